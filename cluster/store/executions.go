package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

func (s *sqlStore) PutExecution(ctx context.Context, e Execution) error {
	return s.writeOne(ctx, func(ctx context.Context, q querier) error { return putExecutionIn(ctx, q, e) })
}

// putExecutionIn upserts a directory row on q.
func putExecutionIn(ctx context.Context, q querier, e Execution) error {
	_, err := q.ExecContext(ctx, `
INSERT INTO executions (exec_id, session, user_id, org, address, message, approval_text, args_json, deadline_ms, settled_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (exec_id) DO UPDATE SET session = excluded.session, user_id = excluded.user_id, org = excluded.org,
	address = excluded.address, message = excluded.message, approval_text = excluded.approval_text,
	args_json = excluded.args_json, deadline_ms = excluded.deadline_ms, settled_at_ms = excluded.settled_at_ms`,
		e.ID, e.Session, e.User, e.Org, e.Address, e.Message, e.ApprovalText, e.ArgsJSON, e.Deadline.UnixMilli(), msOrZero(e.Settled))
	if err != nil {
		return fmt.Errorf("store: put execution %s: %w", e.ID, err)
	}
	return nil
}

const executionColumns = `exec_id, session, user_id, org, address, message, approval_text, args_json, deadline_ms, settled_at_ms, decided_by, decision`

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func scanExecution(row interface{ Scan(...any) error }) (Execution, error) {
	var (
		e               Execution
		ms, settledAtMs int64
	)
	err := row.Scan(&e.ID, &e.Session, &e.User, &e.Org, &e.Address, &e.Message, &e.ApprovalText, &e.ArgsJSON, &ms, &settledAtMs, &e.DecidedBy, &e.Decision)
	e.Deadline = time.UnixMilli(ms)
	if settledAtMs != 0 {
		e.Settled = time.UnixMilli(settledAtMs)
	}
	return e, err
}

func (s *sqlStore) GetExecution(ctx context.Context, execID string) (Execution, error) {
	e, err := scanExecution(s.rd.QueryRowContext(ctx, `SELECT `+executionColumns+` FROM executions WHERE exec_id = $1`, execID))
	if errors.Is(err, sql.ErrNoRows) {
		return Execution{}, fmt.Errorf("%w: execution %s", ErrNotFound, execID)
	}
	if err != nil {
		return Execution{}, fmt.Errorf("store: get execution %s: %w", execID, err)
	}
	return e, nil
}

func (s *sqlStore) ListExecutions(ctx context.Context, org string, now time.Time, limit int) ([]Execution, error) {
	rows, err := s.rd.QueryContext(ctx, `SELECT `+executionColumns+` FROM executions WHERE org = $1 AND deadline_ms > $2 AND settled_at_ms = 0 ORDER BY deadline_ms LIMIT $3`,
		org, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: list executions: %w", err)
	}
	return scanExecutions(rows)
}

// MaxDecidedLimit caps [Store.ListDecided].
const MaxDecidedLimit = 100

func (s *sqlStore) ListDecided(ctx context.Context, org string, limit int) ([]Execution, error) {
	limit = min(max(limit, 0), MaxDecidedLimit)
	rows, err := s.rd.QueryContext(ctx, `SELECT `+executionColumns+` FROM executions WHERE org = $1 AND settled_at_ms > 0
ORDER BY settled_at_ms DESC, exec_id LIMIT $2`, org, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list decided executions: %w", err)
	}
	return scanExecutions(rows)
}

func (s *sqlStore) RecordDecision(ctx context.Context, execID, user, action string, at time.Time) error {
	return s.writeOne(ctx, func(ctx context.Context, q querier) error {
		_, err := q.ExecContext(ctx, `UPDATE executions SET decided_by = $1, decision = $2,
	settled_at_ms = CASE WHEN settled_at_ms = 0 THEN $3 ELSE settled_at_ms END
WHERE exec_id = $4 AND decision = ''`, user, action, at.UnixMilli(), execID)
		if err != nil {
			return fmt.Errorf("store: record decision of %s: %w", execID, err)
		}
		return nil
	})
}

// scanExecutions reads directory rows and closes rows.
func scanExecutions(rows *sql.Rows) ([]Execution, error) {
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("store: scan execution: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list executions: %w", err)
	}
	return out, nil
}

func (s *sqlStore) DeleteExecutions(ctx context.Context, execIDs ...string) error {
	if len(execIDs) == 0 {
		return nil
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		for _, id := range execIDs {
			if _, err := q.ExecContext(ctx, `DELETE FROM executions WHERE exec_id = $1`, id); err != nil {
				return fmt.Errorf("store: delete execution %s: %w", id, err)
			}
		}
		return nil
	})
}

func (s *sqlStore) SettleExecutions(ctx context.Context, at time.Time, execIDs ...string) error {
	if len(execIDs) == 0 {
		return nil
	}
	return s.write(ctx, func(ctx context.Context, q querier) error { return settleIn(ctx, q, at, execIDs) })
}

// settleIn marks directory rows settled at at on q.
func settleIn(ctx context.Context, q querier, at time.Time, execIDs []string) error {
	for _, id := range execIDs {
		if _, err := q.ExecContext(ctx, `UPDATE executions SET settled_at_ms = $1 WHERE exec_id = $2 AND settled_at_ms = 0`, at.UnixMilli(), id); err != nil {
			return fmt.Errorf("store: settle execution %s: %w", id, err)
		}
	}
	return nil
}

func (s *sqlStore) PruneExecutions(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM executions WHERE deadline_ms < $1`, before.UnixMilli())
		if err != nil {
			return fmt.Errorf("store: prune executions: %w", err)
		}
		n, _ = res.RowsAffected()
		return pruneRunsIn(ctx, q, before)
	})
	return n, err
}
