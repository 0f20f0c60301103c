package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver (the store's own)

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// StoreSample is the store at a snapshot of the scale scenario.
type StoreSample struct {
	// Bytes is the store's size on disk. SQLite: the database file plus
	// its -wal and -shm files. Postgres: pg_total_relation_size (table,
	// indexes, TOAST) of every table in the connection's current schema.
	Bytes int64 `json:"bytes"`
	// Sessions counts session rows (grains table).
	Sessions int64 `json:"sessions"`
	// Reminders counts the rows of the reminders table; Due those due now
	// or earlier, that is due and not fired yet (a reminder that fired is
	// deleted or moved to its next due time).
	Reminders int64 `json:"reminders"`
	Due       int64 `json:"remindersDue"`
	// Error says why the store could not be measured.
	Error string `json:"error,omitempty"`
}

// storePath is the SQLite file of a sqlite:PATH (or PATH.db) DSN, the way
// the store reads it; "" for anything else.
func storePath(dsn string) string {
	switch {
	case isPostgres(dsn):
		return ""
	case strings.HasPrefix(dsn, "sqlite:"):
		p := strings.TrimPrefix(dsn, "sqlite:")
		if p == ":memory:" {
			return ""
		}
		return p
	case strings.HasSuffix(dsn, ".db"):
		return dsn
	}
	return ""
}

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// sampleStore measures the store at dsn at time now. It only reads; a
// failure is reported in StoreSample.Error.
func sampleStore(ctx context.Context, dsn string, now time.Time) StoreSample {
	var s StoreSample
	var err error
	if isPostgres(dsn) {
		err = samplePostgres(ctx, dsn, now, &s)
	} else {
		err = sampleSQLite(ctx, storePath(dsn), now, &s)
	}
	if err != nil {
		return StoreSample{Error: shortError(err)}
	}
	return s
}

func sampleSQLite(ctx context.Context, path string, now time.Time, s *StoreSample) error {
	if path == "" {
		return errors.New("store: want sqlite:PATH or postgres://…")
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(path + suffix)
		switch {
		case err == nil:
			s.Bytes += fi.Size()
		case suffix == "" || !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("store size: %w", err)
		}
	}
	// Read-only, so a wrong path fails instead of creating a database.
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	return countRows(ctx, db, now, s)
}

func samplePostgres(ctx context.Context, dsn string, now time.Time, s *StoreSample) error {
	cfg, err := pgx.ParseConfig(dsn) // search_path=… in the URL picks the schema, as for the store
	if err != nil {
		return fmt.Errorf("parse %s: %w", store.Redact(dsn), err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	db.SetMaxOpenConns(1)
	err = db.QueryRowContext(ctx, `
SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::BIGINT
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')`).Scan(&s.Bytes)
	if err != nil {
		return fmt.Errorf("store size: %w", err)
	}
	return countRows(ctx, db, now, s)
}

// countRows counts session rows and reminders (both engines speak this
// SQL).
func countRows(ctx context.Context, db *sql.DB, now time.Time, s *StoreSample) error {
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM grains WHERE grain LIKE 'session/%'`).Scan(&s.Sessions); err != nil {
		return fmt.Errorf("count sessions: %w", err)
	}
	err := db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN due_at_ms <= $1 THEN 1 ELSE 0 END), 0) FROM reminders`,
		now.UnixMilli()).Scan(&s.Reminders, &s.Due)
	if err != nil {
		return fmt.Errorf("count reminders: %w", err)
	}
	return nil
}
