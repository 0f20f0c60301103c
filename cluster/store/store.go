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
	// Link is the W3C traceparent of the span that set the reminder,
	// taken from the registering call's context when tracing is on (""
	// otherwise): the span of its firing links to it.
	Link string
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
	// Also are statements of the application's domains (their own
	// tables, see [DB]) that belong to the same step, such as a
	// decision's entry in the execution directory: they run after the
	// grain's own writes, in the same transaction, fenced by the same
	// epoch ([Stmt]). On Postgres a record and one such statement, when
	// that is the whole step, are one statement.
	Also []Stmt
}

// Stmt is a statement of another domain that a grain's step carries
// ([Writes.Also]). SQL may use $1 (the grain's key) and $2 (its epoch);
// Args are $3 on. SQL must be conditioned on `EXISTS (SELECT 1 FROM f)`:
// the store runs it with a CTE f that holds the grain's key only while
// the epoch is current (on Postgres, in the folded statement, the
// grain's row update itself), so a stale step changes nothing.
type Stmt struct {
	SQL  string
	Args []any
}

// Store is the cluster's durable state: grain ownership, records and
// reminders. Two implementations share one schema and one history of
// migrations: SQLite (embedded, single node) and Postgres (clusters). The
// application's domains keep their tables in the same database through
// [Store.DB]. Every method is safe for concurrent use.
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
