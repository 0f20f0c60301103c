package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// OpenSQLite opens (creating if needed) the SQLite database at path, or a
// private in-memory database for ":memory:", and migrates it. The file uses
// WAL journaling so readers never block the writer. Writes go through one
// connection and one goroutine that commits the writes waiting at the same
// time together (see committer); reads use a pool of their own. Statements
// are prepared once per connection. Temporary data (statement journals,
// sorts) stays in memory: a multi-row insert in the writer's transaction
// keeps a statement journal, which past 64 KiB went to a new temporary
// file each time (a flush of the event log from a few sessions crossed
// that once the event rows had a principal index; see
// docs/benchmarks.md).
func OpenSQLite(ctx context.Context, path string) (Store, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "temp_store(MEMORY)")
	var dsn string
	if path == ":memory:" || path == "" {
		// A private in-memory database that the writer and the readers
		// share (plain ":memory:" is one database per connection).
		dsn = "file:/mcpgrain-" + rand.Text() + "?vfs=memdb&" + q.Encode()
	} else {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("store: create data directory %s: %w", dir, err)
			}
		}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		dsn = "file:" + path + "?" + q.Encode()
	}
	w, err := openSQLiteDB(ctx, dsn, 1)
	if err != nil {
		return nil, err
	}
	r, err := openSQLiteDB(ctx, dsn, 8)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	return newSQLiteStore(ctx, w, r)
}

// openSQLiteDB opens a handle of at most conns connections.
func openSQLiteDB(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", dsn, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: sqlite %s: %w", dsn, err)
	}
	return db, nil
}

// newSQLiteStore migrates through the writer handle w and starts the
// committer on it; reads go to r.
func newSQLiteStore(ctx context.Context, w, r *sql.DB) (Store, error) {
	closeAll := func() {
		_ = w.Close()
		_ = r.Close()
	}
	d := dialect{name: "sqlite", blob: "BLOB"}
	if err := migrate(ctx, w, d); err != nil {
		closeAll()
		return nil, err
	}
	c, err := newCommitter(ctx, w)
	if err != nil {
		closeAll()
		return nil, err
	}
	return &sqlStore{db: r, rd: cachedDB{c: newStmtCache(r)}, w: c, d: d, now: time.Now}, nil
}
