package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// migrationLockKey is the Postgres advisory lock id that serialises
// migrations ("mcpgrain" in ASCII, truncated to 63 bits).
const migrationLockKey = 0x6d6370677261696e

// OpenPostgres connects to the Postgres database at dsn (a postgres:// URL;
// extra query parameters such as search_path become session settings) and
// migrates it.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse postgres DSN %s: %w", Redact(dsn), err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: cannot reach postgres at %s (is it running? check --store): %w", Redact(dsn), err)
	}
	d := dialect{
		name: "postgres",
		blob: "BYTEA",
		lockMigrations: func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLockKey))
			return err
		},
	}
	if err := migrate(ctx, db, d); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &sqlStore{db: db, rd: db, d: d, now: time.Now}, nil
}
