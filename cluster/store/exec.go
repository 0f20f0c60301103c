package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// stmtCache prepares each statement text once per database handle and
// keeps it. SQLite (modernc) parses a statement on every unprepared
// execution; that was a tenth of the CPU of a session's lifecycle.
// Postgres (pgx) caches prepared statements per connection itself.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, m: map[string]*sql.Stmt{}} }

func (c *stmtCache) get(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.m[q] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		_ = st.Close()
		delete(c.m, q)
	}
}

// cachedDB runs statements on a database handle through its cache.
type cachedDB struct{ c *stmtCache }

func (d cachedDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := d.c.get(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (d cachedDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := d.c.get(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (d cachedDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := d.c.get(ctx, q)
	if err != nil {
		return d.c.db.QueryRowContext(ctx, q, args...) // reports the same error
	}
	return st.QueryRowContext(ctx, args...)
}

// connQ runs statements on one held connection, each prepared once on it
// and kept (the committer's connection, which runs its own BEGIN and
// COMMIT: database/sql re-prepares a statement for every *sql.Tx).
type connQ struct {
	conn *sql.Conn
	mu   sync.Mutex
	m    map[string]*sql.Stmt
}

func (c *connQ) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	st, err := c.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.m[q] = st
	return st, nil
}

func (c *connQ) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := c.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (c *connQ) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (c *connQ) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, q)
	if err != nil {
		return c.conn.QueryRowContext(ctx, q, args...) // reports the same error
	}
	return st.QueryRowContext(ctx, args...)
}

func (c *connQ) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		_ = st.Close()
		delete(c.m, q)
	}
}

// writeFunc is one write: its statements, run on q inside a transaction
// (see sqlStore.write).
type writeFunc = WriteFunc

// maxGroup bounds how many writes one group commit carries.
const maxGroup = 128

// errStoreClosed is returned for writes after Close.
var errStoreClosed = errors.New("store: closed")

// committer is SQLite's single writer with group commit. SQLite allows one
// writer at a time; several connections writing at once wait for each
// other in SQLite's busy handler, which sleeps in steps of milliseconds
// (under a burst of session creations the node was idle two thirds of
// the time while requests queued). So every write goes through one
// connection and one goroutine: it takes the writes that are waiting,
// runs each in a savepoint of one transaction (a failing write — a fenced
// one, say — is rolled back alone) and commits them together.
type committer struct {
	db   *sql.DB
	q    *connQ // the one write connection, held for the store's life
	reqs chan *writeReq
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

type writeReq struct {
	ctx context.Context
	fn  writeFunc
	err chan error
	// state decides between the writer running fn and a caller that
	// gives up: fn writes its results into the caller's variables, so a
	// caller may only return before the answer if fn never starts.
	state atomic.Int32
	ran   chan struct{} // closed when fn has returned
}

// States of a writeReq.
const (
	reqWaiting int32 = iota
	reqRunning
	reqAbandoned
)

// start claims r for the writer; false when its caller gave up first.
func (r *writeReq) start() bool { return r.state.CompareAndSwap(reqWaiting, reqRunning) }

// newCommitter takes one connection of db for good and starts the writer.
func newCommitter(ctx context.Context, db *sql.DB) (*committer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: writer connection: %w", err)
	}
	c := &committer{db: db, q: &connQ{conn: conn, m: map[string]*sql.Stmt{}}, reqs: make(chan *writeReq),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c, nil
}

// do runs fn in the next group commit and returns its outcome. If ctx ends
// first, do returns an error wrapping ctx's; a write already taken into a
// commit may still be committed (as with any database write whose caller
// gives up).
func (c *committer) do(ctx context.Context, fn writeFunc) error {
	r := &writeReq{ctx: ctx, fn: fn, err: make(chan error, 1), ran: make(chan struct{})}
	select {
	case c.reqs <- r:
	case <-ctx.Done():
		return fmt.Errorf("store: write not started: %w", ctx.Err())
	case <-c.stop:
		return errStoreClosed
	}
	select {
	case err := <-r.err:
		return err
	case <-ctx.Done():
	}
	if r.state.CompareAndSwap(reqWaiting, reqAbandoned) {
		return fmt.Errorf("store: write not started: %w", ctx.Err())
	}
	// fn is running (its statements are not cancellable) or has run:
	// wait until it stops touching the caller's variables.
	<-r.ran
	return fmt.Errorf("store: no answer to a write: %w", ctx.Err())
}

func (c *committer) loop() {
	defer close(c.done)
	batch := make([]*writeReq, 0, maxGroup)
	for {
		select {
		case r := <-c.reqs:
			batch = append(batch[:0], r)
		case <-c.stop:
			return
		}
		c.commit(c.gather(batch))
	}
}

// gather adds the writes that are waiting to batch. It first lets the
// writers that are runnable enqueue — woken by the first write, the
// writer would otherwise commit it alone (creating sessions from 16
// clients averaged 1.04 writes a commit, 4.3 with one yield) — and yields
// again for as long as that brings more: each write of the group that
// has not yet run has its caller waiting, and each commit writes its
// dirty pages to the WAL. A lone write costs one yield.
func (c *committer) gather(batch []*writeReq) []*writeReq {
	for {
		runtime.Gosched()
		n := len(batch)
		if batch = c.drain(batch); len(batch) == n || len(batch) >= maxGroup {
			return batch
		}
	}
}

// drain moves the writes waiting now into batch, up to maxGroup.
func (c *committer) drain(batch []*writeReq) []*writeReq {
	for len(batch) < maxGroup {
		select {
		case r := <-c.reqs:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// commit runs a group of writes in one transaction. Statements run without
// the callers' cancellation: interrupting one statement can roll back the
// whole transaction in SQLite, and with it the others' writes. A caller
// that gave up before its turn is skipped.
func (c *committer) commit(batch []*writeReq) {
	errs := make([]error, len(batch))
	defer func() {
		for i, r := range batch {
			r.err <- errs[i]
		}
	}()
	fail := func(err error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	ctx := context.Background()
	if _, err := c.q.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		fail(fmt.Errorf("store: begin: %w", err))
		return
	}
	single, ok := len(batch) == 1, 0
	for i, r := range batch {
		if r.ctx.Err() != nil || !r.start() {
			errs[i] = fmt.Errorf("store: write not started: %w", r.ctx.Err())
			continue
		}
		if err := c.runOne(ctx, r, single, &errs[i]); err != nil {
			c.rollback()
			fail(err)
			return
		}
		if errs[i] == nil {
			ok++
		}
	}
	if ok == 0 {
		c.rollback()
		return
	}
	if _, err := c.q.ExecContext(ctx, `COMMIT`); err != nil {
		c.rollback()
		fail(fmt.Errorf("store: commit: %w", err))
	}
}

func (c *committer) rollback() {
	_, _ = c.q.ExecContext(context.Background(), `ROLLBACK`)
}

// runOne runs one write of a group in its savepoint (a lone write needs
// none: its failure rolls the transaction back). It sets *werr to the
// write's own failure and returns an error only when the transaction
// itself can no longer be used.
func (c *committer) runOne(ctx context.Context, r *writeReq, single bool, werr *error) error {
	defer close(r.ran)
	wctx := context.WithoutCancel(r.ctx)
	if single {
		*werr = r.fn(wctx, c.q)
		return nil
	}
	if _, err := c.q.ExecContext(ctx, `SAVEPOINT w`); err != nil {
		return fmt.Errorf("store: savepoint: %w", err)
	}
	*werr = r.fn(wctx, c.q)
	if *werr != nil {
		if _, err := c.q.ExecContext(ctx, `ROLLBACK TO w`); err != nil {
			return fmt.Errorf("store: roll back to savepoint: %w", err)
		}
	}
	if _, err := c.q.ExecContext(ctx, `RELEASE w`); err != nil {
		return fmt.Errorf("store: release savepoint: %w", err)
	}
	return nil
}

// close stops the writer after the commit in progress and closes its
// connection.
func (c *committer) close() error {
	c.once.Do(func() { close(c.stop) })
	<-c.done
	c.q.close()
	return errors.Join(c.q.conn.Close(), c.db.Close())
}
