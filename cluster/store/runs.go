package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// fencedBy is the condition that makes an INSERT … SELECT fenced: the
// grain's epoch must still be the one given ($1 grain, $2 epoch).
const fencedBy = `EXISTS (SELECT 1 FROM grains WHERE grain = $1 AND epoch = $2)`

func (s *sqlStore) PutRun(ctx context.Context, grain string, epoch uint64, r Run) error {
	return s.writeOne(ctx, func(ctx context.Context, q querier) error { return putRunIn(ctx, q, grain, epoch, r) })
}

// putRunIn upserts a run on q, fenced by the grain's epoch.
func putRunIn(ctx context.Context, q querier, grain string, epoch uint64, r Run) error {
	res, err := q.ExecContext(ctx, `
INSERT INTO execution_runs (run_id, session, code, spec, pause_id, outcome, created_at_ms, settled_at_ms)
SELECT $3, $4, $5, $6, $7, $8, $9, $10 WHERE `+fencedBy+`
ON CONFLICT (run_id) DO UPDATE SET session = excluded.session, code = excluded.code, spec = excluded.spec,
	pause_id = excluded.pause_id, outcome = excluded.outcome, created_at_ms = excluded.created_at_ms,
	settled_at_ms = excluded.settled_at_ms`,
		grain, int64(epoch), r.ID, r.Session, r.Code, r.Spec, r.PauseID, r.Outcome, r.Created.UnixMilli(), msOrZero(r.Settled))
	if err != nil {
		return fmt.Errorf("store: put run %s: %w", r.ID, err)
	}
	return fencedResult(res, grain, epoch)
}

func (s *sqlStore) PutJournalEntry(ctx context.Context, grain string, epoch uint64, runID string, e JournalEntry) error {
	return s.writeOne(ctx, func(ctx context.Context, q querier) error { return putEntryIn(ctx, q, grain, epoch, runID, e) })
}

// putEntryIn upserts a journal entry on q, fenced by the grain's epoch.
func putEntryIn(ctx context.Context, q querier, grain string, epoch uint64, runID string, e JournalEntry) error {
	res, err := q.ExecContext(ctx, `
INSERT INTO execution_journal (run_id, seq, state, pause_id, data)
SELECT $3, $4, $5, $6, $7 WHERE `+fencedBy+`
ON CONFLICT (run_id, seq) DO UPDATE SET state = excluded.state, pause_id = excluded.pause_id, data = excluded.data`,
		grain, int64(epoch), runID, e.Seq, e.State, e.PauseID, e.Data)
	if err != nil {
		return fmt.Errorf("store: journal %s #%d: %w", runID, e.Seq, err)
	}
	return fencedResult(res, grain, epoch)
}

func (s *sqlStore) WriteRun(ctx context.Context, grain string, epoch uint64, w RunWrite) error {
	return s.write(ctx, func(ctx context.Context, q querier) error {
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
			if err := putExecutionIn(ctx, q, *w.Publish); err != nil {
				return err
			}
		}
		return settleIn(ctx, q, w.SettledAt, w.Settle)
	})
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

func (s *sqlStore) GetRun(ctx context.Context, runID string) (Run, []JournalEntry, error) {
	r, err := scanRun(s.rd.QueryRowContext(ctx, `SELECT `+runColumns+` FROM execution_runs WHERE run_id = $1`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, nil, fmt.Errorf("%w: run %s", ErrNotFound, runID)
	}
	if err != nil {
		return Run{}, nil, fmt.Errorf("store: get run %s: %w", runID, err)
	}
	rows, err := s.rd.QueryContext(ctx, `SELECT seq, state, pause_id, data FROM execution_journal WHERE run_id = $1 ORDER BY seq`, runID)
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

func (s *sqlStore) RunByPause(ctx context.Context, pauseID string) (string, error) {
	var id string
	err := s.rd.QueryRowContext(ctx, `SELECT run_id FROM execution_journal WHERE pause_id = $1 LIMIT 1`, pauseID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) || pauseID == "" {
		return "", fmt.Errorf("%w: pause %s", ErrNotFound, pauseID)
	}
	if err != nil {
		return "", fmt.Errorf("store: run of pause %s: %w", pauseID, err)
	}
	return id, nil
}

func (s *sqlStore) PausedRuns(ctx context.Context, session string) ([]Run, error) {
	rows, err := s.rd.QueryContext(ctx, `SELECT `+runColumns+` FROM execution_runs
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

// pruneRuns drops runs settled before before, and unsettled runs created
// before it that never paused or whose pause left the directory, with
// their journals.
func pruneRunsIn(ctx context.Context, q querier, before time.Time) error {
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
