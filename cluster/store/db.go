package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Querier runs SQL statements: a write's transaction (see [DB.Write]) or
// the read pool ([DB.Reader]). Statements use $N placeholders, ON
// CONFLICT and RETURNING, which both engines accept.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// querier is the package's own name for [Querier].
type querier = Querier

// WriteFunc is one write of a domain: its statements, run on tx inside a
// transaction (see [DB.Write]).
type WriteFunc func(ctx context.Context, tx Querier) error

// DB is the SQL database under a [Store], for the domain packages that
// keep their own tables next to the cluster's (the SSE event log, the
// execution directory, journal runs, tasks). A domain package owns its
// tables, registers their migrations ([RegisterMigrations]) and runs its
// statements through DB: writes go through the store's writer (SQLite's
// group committer, a Postgres transaction), so they are atomic, commit
// with the other writes of their group and see the grains table. A write
// that must be fenced by a grain's epoch conditions its statements on
// [FencedBy] (checking them with [CheckFenced]) or calls [Fence] first.
// Several domains' statements that a lifecycle step needs together run in
// one [DB.Write].
type DB struct{ s *sqlStore }

// Write runs fn's statements atomically: in SQLite's single writer (one
// savepoint of a group commit), or in a Postgres transaction. fn may run
// after ctx ended (see the committer); it must not keep tx.
func (d *DB) Write(ctx context.Context, fn WriteFunc) error { return d.s.write(ctx, writeFunc(fn)) }

// WriteOne is [DB.Write] for fn that runs a single statement: Postgres runs
// it without an explicit transaction (one round trip instead of three).
func (d *DB) WriteOne(ctx context.Context, fn WriteFunc) error {
	return d.s.writeOne(ctx, writeFunc(fn))
}

// Reader runs reads (on SQLite, a pool of its own with prepared
// statements kept per text: build statement texts once).
func (d *DB) Reader() Querier { return d.s.rd }

// Now is the store's clock: the time writes are stamped with.
func (d *DB) Now() time.Time { return d.s.now() }

// Dialect names the engine: "sqlite" or "postgres".
func (d *DB) Dialect() string { return d.s.d.name }

// Lock takes the cross-process lock key inside tx, a write's transaction,
// held until it ends (taking it again is a no-op): a Postgres advisory
// transaction lock. On SQLite, whose writes are serialised by its single
// writer, it does nothing.
func (d *DB) Lock(ctx context.Context, tx Querier, key int64) error {
	if d.s.d.name != "postgres" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		return fmt.Errorf("store: lock %#x: %w", key, err)
	}
	return nil
}

// FencedBy is the condition that fences an INSERT … SELECT or an UPDATE by
// a grain's epoch: parameters $1 (the grain's key) and $2 (its epoch) must
// still name the grain's current epoch. Check the result with
// [CheckFenced].
const FencedBy = `EXISTS (SELECT 1 FROM grains WHERE grain = $1 AND epoch = $2)`

// CheckFenced turns the result of a fenced statement that changed no row
// into [ErrFenced].
func CheckFenced(res sql.Result, grain string, epoch uint64) error {
	return fencedResult(res, grain, epoch)
}

// Fence returns [ErrFenced] unless epoch is grain's current epoch, in tx, a
// write's transaction: the statements after it in tx are fenced too (on
// Postgres it locks the grain's row until tx ends).
func Fence(ctx context.Context, tx Querier, grain string, epoch uint64) error {
	return fence(ctx, tx, grain, epoch)
}
