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

// Reminder is a durable, named timer of a grain: the stand-in for a
// Durable Object alarm. It fires at DueAt and, if Period is set, every
// Period after that.
type Reminder struct {
	// Grain is the grain's key, "<kind>/<identity>".
	Grain string
	// Name identifies the reminder within its grain.
	Name string
	// DueAt is when it fires next (millisecond precision).
	DueAt time.Time
	// Period repeats the reminder; zero fires once.
	Period time.Duration
	// Version changes whenever the reminder is replaced or advanced.
	Version int64
}

// Event is one SSE event of an MCP session's stream, kept so a client can
// resume a dropped stream with Last-Event-ID on any node.
type Event struct {
	Session string
	Stream  string
	Index   int
	Data    []byte
}

// Execution is a paused execution's directory row: where it lives and
// what it waits for. A settled row stays (Settled set) until pruned, so a
// late resume from another session still reaches the owner, which replays
// the outcome or answers "already settled".
type Execution struct {
	ID           string
	Session      string
	User, Org    string
	Address      string
	Message      string
	ApprovalText string
	ArgsJSON     string
	Deadline     time.Time
	// Settled is when the execution stopped waiting (zero: still paused).
	Settled time.Time
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
	// RegisterReminders creates or replaces named reminders of grain, in one
	// transaction fenced by epoch ([ErrFenced] if it is not current), and
	// returns them as stored (with their versions). A replaced reminder gets
	// a new, larger version.
	RegisterReminders(ctx context.Context, grain string, epoch uint64, rs []Reminder) ([]Reminder, error)
	// CancelReminders deletes named reminders of grain (missing names are
	// ignored), fenced by epoch.
	CancelReminders(ctx context.Context, grain string, epoch uint64, names ...string) error
	// Reminders lists grain's reminders, ordered by name.
	Reminders(ctx context.Context, grain string) ([]Reminder, error)
	// DueReminders lists up to limit reminders due at or before t, earliest
	// first.
	DueReminders(ctx context.Context, t time.Time, limit int) ([]Reminder, error)
	// CompleteReminder records that the reminder at version fired: a
	// one-shot reminder (next zero) is deleted, a periodic one moves to next
	// with a new version. It does nothing and returns false if the reminder
	// was replaced or cancelled since (version differs).
	CompleteReminder(ctx context.Context, grain, name string, version int64, next time.Time) (bool, error)
	// AppendEvents stores SSE events of MCP sessions (the resumability log).
	// Indices are per (session, stream) and assigned by the caller; an event
	// already stored at its index is left as is.
	AppendEvents(ctx context.Context, events []Event) error
	// Events returns the data of the events of (session, stream) with
	// index > after, in order, and the stream's highest stored index (-1
	// if none).
	Events(ctx context.Context, session, stream string, after int) (data [][]byte, last int, err error)
	// DeleteEvents drops every event of session (the session ended).
	DeleteEvents(ctx context.Context, session string) error
	// PutExecution records (or replaces) a paused execution in the
	// directory that approval surfaces and cross-session resumes use.
	PutExecution(ctx context.Context, e Execution) error
	// GetExecution returns a paused execution, or [ErrNotFound].
	GetExecution(ctx context.Context, execID string) (Execution, error)
	// ListExecutions lists the unsettled executions of org whose deadline
	// is after now, soonest first (at most limit).
	ListExecutions(ctx context.Context, org string, now time.Time, limit int) ([]Execution, error)
	// SettleExecutions marks rows settled at at (rows settled before keep
	// their time).
	SettleExecutions(ctx context.Context, at time.Time, execIDs ...string) error
	// DeleteExecutions drops directory rows by id.
	DeleteExecutions(ctx context.Context, execIDs ...string) error
	// PruneExecutions drops rows whose deadline is before before and
	// returns how many.
	PruneExecutions(ctx context.Context, before time.Time) (int64, error)
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
