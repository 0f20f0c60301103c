package store

import (
	"context"
	"errors"
	"testing"
)

// A caller whose context ends while its write function runs must not
// return before the function has: the function writes the caller's
// result variables, and returning early raced with those writes (seen by
// the race detector in the reminders service at shutdown).
func TestAbandonedWriteWaitsForItsRunningFunction(t *testing.T) {
	st, err := OpenSQLite(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	c := st.(*sqlStore).w
	ctx, cancel := context.WithCancel(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	var result int
	go func() {
		<-started
		cancel()
		close(release)
	}()
	err = c.do(ctx, func(context.Context, querier) error {
		close(started)
		<-release
		result = 1
		return nil
	})
	// Either answer is right (the write may have committed by the time the
	// caller looks); what must hold is that fn is done.
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("do after its context ended: %v", err)
	}
	if result != 1 {
		t.Fatal("do returned before its running write function did")
	}
}

// A caller that gives up before the writer reaches its write is answered
// at once, and the write never runs.
func TestAbandonedWriteThatHasNotStartedNeverRuns(t *testing.T) {
	st, err := OpenSQLite(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	c := st.(*sqlStore).w
	// Hold the writer in a first write so the second one waits in the group.
	hold, held := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- c.do(context.Background(), func(context.Context, querier) error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	second := make(chan error, 1)
	go func() {
		second <- c.do(ctx, func(context.Context, querier) error { ran = true; return nil })
	}()
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned write: %v, want context.Canceled", err)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The writer's next group proves the abandoned write was skipped, not queued.
	if err := c.do(context.Background(), func(context.Context, querier) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Fatal("a write abandoned before it started ran anyway")
	}
}

// The writer's BEGIN, COMMIT and ROLLBACK are prepared once on its
// connection and reused, as its writes' statements are: parsing them
// again was a part of every commit. Writes still commit, and a failed one
// still rolls back alone.
func TestWriterReusesItsTransactionStatements(t *testing.T) {
	st, err := OpenSQLite(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	c := st.(*sqlStore).w
	ctx := context.Background()
	exec := func(q string) func(context.Context, querier) error {
		return func(ctx context.Context, tx querier) error {
			_, err := tx.ExecContext(ctx, q)
			return err
		}
	}
	if err := c.do(ctx, exec(`CREATE TABLE t (v INTEGER)`)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.do(ctx, exec(`INSERT INTO t VALUES (1)`)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	boom := errors.New("boom")
	if err := c.do(ctx, func(ctx context.Context, tx querier) error {
		if err := exec(`INSERT INTO t VALUES (2)`)(ctx, tx); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failed write: %v", err)
	}
	var n, twos int
	if err := c.do(ctx, func(ctx context.Context, tx querier) error {
		return tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(v = 2), 0) FROM t`).Scan(&n, &twos)
	}); err != nil || n != 3 || twos != 0 {
		t.Fatalf("rows %d (of them the failed write's %d), %v: want 3 and 0", n, twos, err)
	}
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	for _, q := range []string{`BEGIN IMMEDIATE`, `COMMIT`} {
		if c.q.m[q] == nil {
			t.Errorf("%s is not among the writer's prepared statements", q)
		}
	}
}
