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
// resume a dropped stream with Last-Event-ID on any node. Org and User
// name the principal that owns the session: its events count against the
// principal's budget ([Store.TrimPrincipalEvents]).
type Event struct {
	Session   string
	Stream    string
	Index     int
	Data      []byte
	Org, User string
}

// EventBytes is the data one principal's stored events hold, all its
// sessions together, as the store counts it.
type EventBytes struct {
	Org, User string
	Bytes     int64
}

// EventUsage is what the event log keeps in the store, every session of
// every node that shares it.
type EventUsage struct {
	// Bytes is the data of every stored event.
	Bytes int64
	// Principals is how many principals have stored events, and
	// LargestPrincipal the most bytes one of them keeps.
	Principals       int64
	LargestPrincipal int64
}

// Writes are changes to one grain's durable state that are applied
// together: one transaction, fenced by the grain's epoch (see
// [Store.Apply]). A lifecycle step of a grain (a session created, ended,
// passivated) is one Writes, not a transaction per field.
type Writes struct {
	// Record, if non-nil, replaces the grain's record.
	Record []byte
	// SetReminders creates or replaces reminders (their Grain and Version
	// are ignored).
	SetReminders []Reminder
	// CancelReminders deletes reminders by name (missing names are
	// ignored). A name in both lists is set.
	CancelReminders []string
	// CancelOtherReminders deletes every reminder of the grain that
	// SetReminders does not name (an ended grain keeps one reminder).
	CancelOtherReminders bool
	// Release clears the grain's owner as [Store.Release] does: the
	// activation's last step before it passivates.
	Release bool
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
	// AcquireExisting is Acquire for a grain that has a row; for one that
	// has none it writes nothing and returns [ErrNotFound].
	AcquireExisting(ctx context.Context, grain, node string) (Ownership, error)
	// Save replaces grain's record if epoch is still current, else it
	// returns [ErrFenced] and changes nothing.
	Save(ctx context.Context, grain string, epoch uint64, record []byte) error
	// Apply applies w to grain atomically if epoch is still current, else
	// it returns [ErrFenced] and changes nothing. It returns the set
	// reminders as stored (with their versions).
	Apply(ctx context.Context, grain string, epoch uint64, w Writes) ([]Reminder, error)
	// Create takes ownership of grain for node as Acquire does, for a grain
	// that has no record yet, and applies w at the new epoch, all in one
	// transaction. If the grain has a record (another activation created
	// it), it changes nothing and returns [ErrFenced].
	Create(ctx context.Context, grain, node string, w Writes) (Ownership, []Reminder, error)
	// Release clears the owner of grain if epoch is still current (a clean
	// deactivation). It returns [ErrFenced] if the epoch was superseded.
	Release(ctx context.Context, grain string, epoch uint64) error
	// Delete removes grain — its row (record, epoch) and its reminders — if
	// epoch is still current, else it returns [ErrFenced] and changes
	// nothing. Epochs start again at 1 if the grain is created again, so
	// delete only grains whose identity is never reused (e.g. random
	// session ids): an old activation's epoch could become current again.
	Delete(ctx context.Context, grain string, epoch uint64) error
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
	// already stored at its index is left as is. It returns the bytes each
	// principal whose events it stored keeps now, counted in the same
	// transaction (the store counts every principal's bytes as events are
	// stored and deleted, whichever node writes them).
	AppendEvents(ctx context.Context, events []Event) ([]EventBytes, error)
	// Events returns the data of the events of (session, stream) with
	// index > after, in order, and the stream's highest stored index (-1
	// if none).
	Events(ctx context.Context, session, stream string, after int) (data [][]byte, last int, err error)
	// DeleteEvents drops every event of session (the session ended).
	DeleteEvents(ctx context.Context, session string) error
	// PruneEvents drops events stored before before (past the window in
	// which a client resumes a dropped stream) and returns how many.
	PruneEvents(ctx context.Context, before time.Time) (int64, error)
	// TrimEvents drops the oldest events of session (by storage time, then
	// index) until the data of those left totals at most keepBytes, and
	// returns how many it dropped. A stream whose older events were dropped
	// can no longer be resumed from before them ([Store.Events] reports
	// the gap).
	TrimEvents(ctx context.Context, session string, keepBytes int64) (int64, error)
	// TrimPrincipalEvents drops the oldest events of the principal's
	// sessions, whichever session they belong to (by storage time), until
	// the principal keeps at most keepBytes, and returns how many it
	// dropped. It drops in steps of a bounded number of events, each its
	// own transaction, so it never holds the store long.
	TrimPrincipalEvents(ctx context.Context, org, user string, keepBytes int64) (int64, error)
	// TrimStoredEvents is TrimPrincipalEvents over every stored event: the
	// oldest go, whoever owns them, until the store keeps at most
	// keepBytes.
	TrimStoredEvents(ctx context.Context, keepBytes int64) (int64, error)
	// EventUsage reports what the event log keeps in the store.
	EventUsage(ctx context.Context) (EventUsage, error)
	// Load returns grain's ownership row, or [ErrNotFound].
	Load(ctx context.Context, grain string) (Ownership, error)
	// DB is the SQL database under the store, for the domain packages that
	// keep their own tables in it (see [DB]).
	DB() *DB
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
