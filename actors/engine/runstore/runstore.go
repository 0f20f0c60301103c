// Package runstore keeps durable executions (code-mode runs whose pauses
// survive passivation, restarts and node loss) in the store's database:
// each run and its tool-call journal, written fenced by the epoch of the
// grain that owns the run. Its tables (execution_runs, execution_journal)
// and migration are this package's; a step that pauses or resumes also
// publishes or settles rows of the execution directory (exchange/directory)
// in the same transaction ([Store.WriteRun]). Its contract tests run on
// SQLite and Postgres.
package runstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
)

func init() { store.RegisterMigrations("actors/engine/runstore", migrations...) }

// migrations are the runs' steps (versions of the store's one sequence;
// see store.RegisterMigrations).
var migrations = []store.Migration{
	{Version: 6, Name: "durable executions: runs and their tool-call journal", Stmts: []string{
		`CREATE TABLE execution_runs (
			run_id TEXT PRIMARY KEY,
			session TEXT NOT NULL,
			code TEXT NOT NULL,
			spec TEXT NOT NULL,
			pause_id TEXT NOT NULL,
			outcome TEXT NOT NULL,
			created_at_ms BIGINT NOT NULL,
			settled_at_ms BIGINT NOT NULL
		)`,
		`CREATE INDEX execution_runs_session ON execution_runs (session, settled_at_ms)`,
		`CREATE TABLE execution_journal (
			run_id TEXT NOT NULL,
			seq INTEGER NOT NULL,
			state TEXT NOT NULL,
			pause_id TEXT NOT NULL,
			data TEXT NOT NULL,
			PRIMARY KEY (run_id, seq)
		)`,
		`CREATE INDEX execution_journal_pause ON execution_journal (pause_id)`,
	}},
}

// Store keeps durable execution runs in a store's database. Its methods are
// safe for concurrent use.
type Store struct{ db *store.DB }

// New returns the runs kept in st's database.
func New(st store.Store) *Store { return &Store{db: st.DB()} }

// Run is a durable execution (a code-mode execution whose pauses survive
// passivation, restarts and node loss): what replay needs to re-run it.
// The engine defines Spec and Outcome (JSON); the store keeps them
// opaque.
type Run struct {
	// ID is the run's id (not an execution id clients see: every pause of
	// the run has its own).
	ID string
	// Session is the identity of the session grain that owns the run.
	Session string
	// Code is the TypeScript the run executes.
	Code string
	// Spec is the engine's JSON of everything else replay needs: the
	// principal, the sandbox limits, the Math.random seed, the start time.
	Spec string
	// PauseID is the execution id of the run's latest pause ("" if it
	// never paused).
	PauseID string
	// Outcome is the engine's JSON of the final outcome ("" until settled).
	Outcome string
	// Created is when the run started.
	Created time.Time
	// Settled is when the run finished (zero: not yet).
	Settled time.Time
}

// Journal entry states.
const (
	// JournalInFlight: the call was sent to the outside world; no outcome
	// was recorded yet.
	JournalInFlight = "in_flight"
	// JournalDone: the call's outcome (result or error) is recorded.
	JournalDone = "done"
	// JournalAwaiting: the call waits for an approval decision.
	JournalAwaiting = "awaiting"
)

// JournalEntry is one tool call of a run, at its position Seq (0-based,
// in call order). A call's entry is replaced as it moves from awaiting or
// in flight to done.
type JournalEntry struct {
	Seq   int
	State string
	// PauseID is the execution id of the pause the call waited in ("" if
	// it needed no approval).
	PauseID string
	// Data is the engine's JSON of the call: request hash, outcome, time.
	Data string
}

// RunWrite is one step of a durable execution, written in one transaction
// fenced by its grain's epoch: journal entries of run RunID (in order),
// then the run itself, and the directory rows the step publishes (a new
// pause) or settles (the pause it resumed past).
type RunWrite struct {
	RunID   string
	Entries []JournalEntry
	// Run, if not nil, is the run's new record.
	Run *Run
	// Publish, if not nil, is put in the execution directory.
	Publish *directory.Execution
	// Settle are directory rows marked settled at SettledAt.
	Settle    []string
	SettledAt time.Time
	// SetReminders and CancelReminders are reminders of the grain that
	// the step carries (store.RemindersIn): a pause's deadline set with
	// the write that publishes it, cancelled with the one that settles
	// it, instead of writes of the grain's own.
	SetReminders    []store.Reminder
	CancelReminders []string
	// Stored, if not nil, is told of the reminders once the step
	// committed: the set ones as stored (with versions) and the
	// cancelled names, for the node's reminder service.
	Stored func(set []store.Reminder, cancelled []string)
}

// PutRun creates or replaces a durable execution run of the session
// grain (key grain), fenced by the grain's epoch ([store.ErrFenced] if it
// is not current).
func (s *Store) PutRun(ctx context.Context, grain string, epoch uint64, r Run) error {
	return s.db.WriteOne(ctx, func(ctx context.Context, q store.Querier) error { return putRunIn(ctx, q, grain, epoch, r) })
}

// putRunIn upserts a run on q, fenced by the grain's epoch.
func putRunIn(ctx context.Context, q store.Querier, grain string, epoch uint64, r Run) error {
	res, err := q.ExecContext(ctx, `
INSERT INTO execution_runs (run_id, session, code, spec, pause_id, outcome, created_at_ms, settled_at_ms)
SELECT $3, $4, $5, $6, $7, $8, $9, $10 WHERE `+store.FencedBy+`
ON CONFLICT (run_id) DO UPDATE SET session = excluded.session, code = excluded.code, spec = excluded.spec,
	pause_id = excluded.pause_id, outcome = excluded.outcome, created_at_ms = excluded.created_at_ms,
	settled_at_ms = excluded.settled_at_ms`,
		grain, int64(epoch), r.ID, r.Session, r.Code, r.Spec, r.PauseID, r.Outcome, r.Created.UnixMilli(), directory.MsOrZero(r.Settled))
	if err != nil {
		return fmt.Errorf("store: put run %s: %w", r.ID, err)
	}
	return store.CheckFenced(res, grain, epoch)
}

// PutJournalEntry creates or replaces the entry at e.Seq of run runID,
// fenced like PutRun.
func (s *Store) PutJournalEntry(ctx context.Context, grain string, epoch uint64, runID string, e JournalEntry) error {
	return s.db.WriteOne(ctx, func(ctx context.Context, q store.Querier) error { return putEntryIn(ctx, q, grain, epoch, runID, e) })
}

// putEntryIn upserts a journal entry on q, fenced by the grain's epoch.
func putEntryIn(ctx context.Context, q store.Querier, grain string, epoch uint64, runID string, e JournalEntry) error {
	res, err := q.ExecContext(ctx, `
INSERT INTO execution_journal (run_id, seq, state, pause_id, data)
SELECT $3, $4, $5, $6, $7 WHERE `+store.FencedBy+`
ON CONFLICT (run_id, seq) DO UPDATE SET state = excluded.state, pause_id = excluded.pause_id, data = excluded.data`,
		grain, int64(epoch), runID, e.Seq, e.State, e.PauseID, e.Data)
	if err != nil {
		return fmt.Errorf("store: journal %s #%d: %w", runID, e.Seq, err)
	}
	return store.CheckFenced(res, grain, epoch)
}

// WriteRun writes one durable-execution step atomically, fenced like
// PutRun: its journal entries, its run, the directory rows it publishes
// or settles and the grain's reminders it carries, in one transaction.
func (s *Store) WriteRun(ctx context.Context, grain string, epoch uint64, w RunWrite) error {
	var stored []store.Reminder
	err := s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
		stored = nil // a group commit may run fn again
		for _, e := range w.Entries {
			if err := putEntryIn(ctx, q, grain, epoch, w.RunID, e); err != nil {
				return err
			}
		}
		if w.Run != nil {
			if err := putRunIn(ctx, q, grain, epoch, *w.Run); err != nil {
				return err
			}
		}
		if w.Publish != nil {
			if err := directory.PutIn(ctx, q, *w.Publish); err != nil {
				return err
			}
		}
		if err := directory.SettleIn(ctx, q, w.SettledAt, w.Settle); err != nil {
			return err
		}
		if len(w.SetReminders) == 0 && len(w.CancelReminders) == 0 {
			return nil
		}
		var err error
		stored, err = store.RemindersIn(ctx, q, grain, epoch, w.SetReminders, w.CancelReminders, s.db.Now())
		return err
	})
	if err == nil && w.Stored != nil && (len(w.SetReminders) > 0 || len(w.CancelReminders) > 0) {
		w.Stored(stored, w.CancelReminders)
	}
	return err
}

const runColumns = `run_id, session, code, spec, pause_id, outcome, created_at_ms, settled_at_ms`

func scanRun(row interface{ Scan(...any) error }) (Run, error) {
	var (
		r                  Run
		created, settledMs int64
	)
	err := row.Scan(&r.ID, &r.Session, &r.Code, &r.Spec, &r.PauseID, &r.Outcome, &created, &settledMs)
	r.Created = time.UnixMilli(created)
	if settledMs != 0 {
		r.Settled = time.UnixMilli(settledMs)
	}
	return r, err
}

// GetRun returns a run and its journal in call order, or
// [store.ErrNotFound].
func (s *Store) GetRun(ctx context.Context, runID string) (Run, []JournalEntry, error) {
	r, err := scanRun(s.db.Reader().QueryRowContext(ctx, `SELECT `+runColumns+` FROM execution_runs WHERE run_id = $1`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, nil, fmt.Errorf("%w: run %s", store.ErrNotFound, runID)
	}
	if err != nil {
		return Run{}, nil, fmt.Errorf("store: get run %s: %w", runID, err)
	}
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT seq, state, pause_id, data FROM execution_journal WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return Run{}, nil, fmt.Errorf("store: read journal of %s: %w", runID, err)
	}
	defer rows.Close()
	var out []JournalEntry
	for rows.Next() {
		var e JournalEntry
		if err := rows.Scan(&e.Seq, &e.State, &e.PauseID, &e.Data); err != nil {
			return Run{}, nil, fmt.Errorf("store: scan journal of %s: %w", runID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return Run{}, nil, fmt.Errorf("store: read journal of %s: %w", runID, err)
	}
	return r, out, nil
}

// RunByPause returns the id of the run that paused with execution id
// pauseID, or [store.ErrNotFound].
func (s *Store) RunByPause(ctx context.Context, pauseID string) (string, error) {
	var id string
	err := s.db.Reader().QueryRowContext(ctx, `SELECT run_id FROM execution_journal WHERE pause_id = $1 LIMIT 1`, pauseID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) || pauseID == "" {
		return "", fmt.Errorf("%w: pause %s", store.ErrNotFound, pauseID)
	}
	if err != nil {
		return "", fmt.Errorf("store: run of pause %s: %w", pauseID, err)
	}
	return id, nil
}

// PausedRuns lists the unsettled runs of session that paused at least
// once, oldest first.
func (s *Store) PausedRuns(ctx context.Context, session string) ([]Run, error) {
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT `+runColumns+` FROM execution_runs
WHERE session = $1 AND settled_at_ms = 0 AND pause_id <> '' ORDER BY created_at_ms, run_id`, session)
	if err != nil {
		return nil, fmt.Errorf("store: paused runs of %s: %w", session, err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("store: scan run: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: paused runs of %s: %w", session, err)
	}
	return out, nil
}

// pruneRunsIn drops runs settled before before, and unsettled runs created
// before it that never paused or whose pause left the directory, with
// their journals.
func pruneRunsIn(ctx context.Context, q store.Querier, before time.Time) error {
	// Orphaned pauses too: unsettled, older than before, and gone from the
	// directory (pruned past its deadline: its session ended without it).
	const stale = `(settled_at_ms <> 0 AND settled_at_ms < $1) OR (settled_at_ms = 0 AND created_at_ms < $1 AND
		(pause_id = '' OR NOT EXISTS (SELECT 1 FROM executions WHERE executions.exec_id = execution_runs.pause_id)))`
	if _, err := q.ExecContext(ctx, `DELETE FROM execution_journal WHERE run_id IN (SELECT run_id FROM execution_runs WHERE `+stale+`)`, before.UnixMilli()); err != nil {
		return fmt.Errorf("store: prune journals: %w", err)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM execution_runs WHERE `+stale, before.UnixMilli()); err != nil {
		return fmt.Errorf("store: prune runs: %w", err)
	}
	return nil
}

// PruneExecutions drops the directory rows whose deadline is before before
// and returns how many. In the same transaction it drops runs (with their
// journals) settled before before, and unsettled runs created before it
// that never paused (their caller is gone) or whose pause is no longer in
// the directory: the runs' prune reads the directory it prunes, so the
// two are one step.
func (s *Store) PruneExecutions(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
		var err error
		if n, err = directory.PruneIn(ctx, q, before); err != nil {
			return err
		}
		return pruneRunsIn(ctx, q, before)
	})
	return n, err
}
