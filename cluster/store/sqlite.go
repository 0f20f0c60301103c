package store

import (
	"context"
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
// WAL journaling so readers never block the single writer.
func OpenSQLite(ctx context.Context, path string) (Store, error) {
	var dsn string
	memory := path == ":memory:" || path == ""
	if memory {
		dsn = "file::memory:?_pragma=foreign_keys(1)"
	} else {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("store: create data directory %s: %w", dir, err)
			}
		}
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Set("_txlock", "immediate")
		dsn = "file:" + path + "?" + q.Encode()
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	if memory {
		// Every connection to ":memory:" is a separate database.
		db.SetMaxOpenConns(1)
	} else {
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
	}
	d := dialect{name: "sqlite", blob: "BLOB"}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: sqlite %s: %w", path, err)
	}
	if err := migrate(ctx, db, d); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &sqlStore{db: db, d: d, now: time.Now}, nil
}
