package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrFenced is returned by a fenced write whose epoch is no longer the
// grain's current epoch: another activation took ownership since. The caller
// must stop acting for the grain.
var ErrFenced = errors.New("store: ownership epoch superseded")

// ErrNotFound is returned when a grain has no record.
var ErrNotFound = errors.New("store: not found")

// Ownership is a grain's ownership row: which node activated it last, under
// which epoch, and the durable record the grain saved.
type Ownership struct {
	// Grain is the grain's key, "<kind>/<identity>".
	Grain string
	// Owner is the node id that holds the current epoch. Empty after the
	// owner released the grain (clean passivation).
	Owner string
	// Epoch increases by one on every activation, cluster-wide.
	Epoch uint64
	// Record is the grain's durable state as last saved; nil if never saved.
	Record []byte
	// UpdatedAt is the time of the last ownership change or save.
	UpdatedAt time.Time
}

// Store is mcpgrain's durable state. Two implementations share one schema and
// one set of migrations: SQLite (embedded, single node) and Postgres
// (clusters). Every method is safe for concurrent use.
type Store interface {
	// Acquire makes node the owner of grain: it atomically increments the
	// grain's epoch (creating the row at epoch 1) and returns the new epoch
	// with the stored record. Every later write of that activation must
	// carry the returned epoch.
	Acquire(ctx context.Context, grain, node string) (Ownership, error)
	// Save replaces grain's record if epoch is still current, else it
	// returns [ErrFenced] and changes nothing.
	Save(ctx context.Context, grain string, epoch uint64, record []byte) error
	// Release clears the owner of grain if epoch is still current (a clean
	// deactivation). It returns [ErrFenced] if the epoch was superseded.
	Release(ctx context.Context, grain string, epoch uint64) error
	// Load returns grain's ownership row, or [ErrNotFound].
	Load(ctx context.Context, grain string) (Ownership, error)
	// Ping checks the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store's connections.
	Close() error
}

// Open opens the store named by dsn and applies pending migrations:
//
//   - "sqlite:PATH" or a path ending in ".db": SQLite file at PATH (created if missing);
//   - "sqlite::memory:": a private in-memory SQLite database;
//   - "postgres://…" or "postgresql://…": Postgres via pgx.
func Open(ctx context.Context, dsn string) (Store, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return OpenPostgres(ctx, dsn)
	case strings.HasPrefix(dsn, "sqlite:"):
		return OpenSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	case strings.HasSuffix(dsn, ".db"):
		return OpenSQLite(ctx, dsn)
	default:
		return nil, fmt.Errorf("store: unsupported DSN %q: use sqlite:PATH or postgres://user@host:port/db", Redact(dsn))
	}
}

// Redact hides the password in a DSN, for logs and error messages.
func Redact(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	scheme := strings.Index(dsn, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return dsn
	}
	userinfo := dsn[scheme+3 : at]
	if i := strings.Index(userinfo, ":"); i >= 0 {
		return dsn[:scheme+3] + userinfo[:i] + ":***" + dsn[at:]
	}
	return dsn
}
