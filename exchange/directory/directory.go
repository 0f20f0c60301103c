// Package directory is the execution directory: where each paused
// execution lives and what it waits for, which approval surfaces list and
// decide and cross-session resumes reach. Its table (executions) and
// migrations are this package's, kept in the store's database through
// store.DB; a step of another domain that publishes or settles rows with
// its own writes does so in one transaction ([PutIn], [SettleIn]: the
// journal runs of actors/engine/runstore). Its contract tests run on
// SQLite and Postgres.
package directory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

func init() { store.RegisterMigrations("exchange/directory", migrations...) }

// migrations are the directory's steps (versions of the store's one
// sequence; see store.RegisterMigrations).
var migrations = []store.Migration{
	{Version: 4, Name: "paused execution directory", Stmts: []string{
		`CREATE TABLE executions (
			exec_id TEXT PRIMARY KEY,
			session TEXT NOT NULL,
			user_id TEXT NOT NULL,
			org TEXT NOT NULL,
			address TEXT NOT NULL,
			message TEXT NOT NULL,
			approval_text TEXT NOT NULL,
			args_json TEXT NOT NULL,
			deadline_ms BIGINT NOT NULL
		)`,
		`CREATE INDEX executions_org ON executions (org, deadline_ms)`,
		`CREATE INDEX executions_session ON executions (session)`,
	}},

	{Version: 5, Name: "settled executions stay in the directory until pruned", Stmts: []string{
		`ALTER TABLE executions ADD COLUMN settled_at_ms BIGINT NOT NULL DEFAULT 0`,
		`CREATE INDEX executions_deadline ON executions (deadline_ms)`,
	}},

	{Version: 8, Name: "who decided a paused execution, and how", Stmts: []string{
		`ALTER TABLE executions ADD COLUMN decided_by TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE executions ADD COLUMN decision TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX executions_org_settled ON executions (org, settled_at_ms)`,
	}},

	{Version: 13, Name: "why a paused execution was declined", Stmts: []string{
		`ALTER TABLE executions ADD COLUMN decision_reason TEXT NOT NULL DEFAULT ''`,
	}},
}

// Store is the execution directory in a store's database. Its methods are
// safe for concurrent use.
type Store struct{ db *store.DB }

// New returns the execution directory kept in st's database.
func New(st store.Store) *Store { return &Store{db: st.DB()} }

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
	// DecidedBy is the user who decided it on an approval surface, and
	// Decision the action ("accept", "decline", "cancel"); both empty if
	// none was recorded (it timed out, or its session's client answered).
	// [Store.PutExecution] leaves them as they are.
	DecidedBy, Decision string
	// Reason is why it was declined, as the decider said ("" if no
	// reason was given or recorded).
	Reason string
}

// PutExecution records (or replaces) a paused execution in the
// directory that approval surfaces and cross-session resumes use.
func (s *Store) PutExecution(ctx context.Context, e Execution) error {
	return s.db.WriteOne(ctx, func(ctx context.Context, q store.Querier) error { return PutIn(ctx, q, e) })
}

// PutIn upserts a directory row in tx, a write of the store (a step of
// another domain that publishes a pause with its own writes).
func PutIn(ctx context.Context, q store.Querier, e Execution) error {
	_, err := q.ExecContext(ctx, `
INSERT INTO executions (exec_id, session, user_id, org, address, message, approval_text, args_json, deadline_ms, settled_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (exec_id) DO UPDATE SET session = excluded.session, user_id = excluded.user_id, org = excluded.org,
	address = excluded.address, message = excluded.message, approval_text = excluded.approval_text,
	args_json = excluded.args_json, deadline_ms = excluded.deadline_ms, settled_at_ms = excluded.settled_at_ms`,
		e.ID, e.Session, e.User, e.Org, e.Address, e.Message, e.ApprovalText, e.ArgsJSON, e.Deadline.UnixMilli(), MsOrZero(e.Settled))
	if err != nil {
		return fmt.Errorf("store: put execution %s: %w", e.ID, err)
	}
	return nil
}

const executionColumns = `exec_id, session, user_id, org, address, message, approval_text, args_json, deadline_ms, settled_at_ms, decided_by, decision, decision_reason`

// MsOrZero is t in Unix milliseconds, 0 for the zero time (a column
// that is 0 while unset).
func MsOrZero(t time.Time) int64 {
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
	err := row.Scan(&e.ID, &e.Session, &e.User, &e.Org, &e.Address, &e.Message, &e.ApprovalText, &e.ArgsJSON, &ms, &settledAtMs, &e.DecidedBy, &e.Decision, &e.Reason)
	e.Deadline = time.UnixMilli(ms)
	if settledAtMs != 0 {
		e.Settled = time.UnixMilli(settledAtMs)
	}
	return e, err
}

// GetExecution returns a paused execution, or [store.ErrNotFound].
func (s *Store) GetExecution(ctx context.Context, execID string) (Execution, error) {
	e, err := scanExecution(s.db.Reader().QueryRowContext(ctx, `SELECT `+executionColumns+` FROM executions WHERE exec_id = $1`, execID))
	if errors.Is(err, sql.ErrNoRows) {
		return Execution{}, fmt.Errorf("%w: execution %s", store.ErrNotFound, execID)
	}
	if err != nil {
		return Execution{}, fmt.Errorf("store: get execution %s: %w", execID, err)
	}
	return e, nil
}

// ListExecutions lists the unsettled executions of org whose deadline
// is after now, soonest first (at most limit).
func (s *Store) ListExecutions(ctx context.Context, org string, now time.Time, limit int) ([]Execution, error) {
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT `+executionColumns+` FROM executions WHERE org = $1 AND deadline_ms > $2 AND settled_at_ms = 0 ORDER BY deadline_ms LIMIT $3`,
		org, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: list executions: %w", err)
	}
	return scanExecutions(rows)
}

// MaxDecidedLimit caps [Store.ListDecided].
const MaxDecidedLimit = 100

// ListDecided lists the settled executions of org, most recently
// settled first (at most limit, which is capped at [MaxDecidedLimit]).
func (s *Store) ListDecided(ctx context.Context, org string, limit int) ([]Execution, error) {
	limit = min(max(limit, 0), MaxDecidedLimit)
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT `+executionColumns+` FROM executions WHERE org = $1 AND settled_at_ms > 0
ORDER BY settled_at_ms DESC, exec_id LIMIT $2`, org, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list decided executions: %w", err)
	}
	return scanExecutions(rows)
}

// RecordDecision records that user decided execID with action, and why
// (reason, may be empty) (the first recorded decision sticks) and marks
// the row settled at at unless it already is. A missing row is not an
// error.
func (s *Store) RecordDecision(ctx context.Context, execID, user, action, reason string, at time.Time) error {
	return s.db.WriteOne(ctx, func(ctx context.Context, q store.Querier) error {
		_, err := q.ExecContext(ctx, `UPDATE executions SET decided_by = $1, decision = $2, decision_reason = $3,
	settled_at_ms = CASE WHEN settled_at_ms = 0 THEN $4 ELSE settled_at_ms END
WHERE exec_id = $5 AND decision = ''`, user, action, reason, at.UnixMilli(), execID)
		if err != nil {
			return fmt.Errorf("store: record decision of %s: %w", execID, err)
		}
		return nil
	})
}

// DecisionIn is [Store.RecordDecision] as a statement of a grain's step
// (store.Writes.Also): a session grain records its decision and the
// directory's entry in one transaction, fenced by its epoch.
func DecisionIn(execID, user, action, reason string, at time.Time) store.Stmt {
	return store.Stmt{SQL: `UPDATE executions SET decided_by = $3, decision = $4, decision_reason = $5,
	settled_at_ms = CASE WHEN settled_at_ms = 0 THEN $6 ELSE settled_at_ms END
WHERE exec_id = $7 AND decision = '' AND EXISTS (SELECT 1 FROM f)`, Args: []any{user, action, reason, at.UnixMilli(), execID}}
}

// MaxReasonShown bounds the reason a decision's directory entry (the
// inbox's history) keeps, in bytes.
const MaxReasonShown = 500

// ReasonShown is the reason a decision's directory entry keeps: r
// trimmed, made valid UTF-8 and cut to [MaxReasonShown] bytes on a
// character boundary (with an ellipsis when cut).
func ReasonShown(r string) string {
	r = strings.ToValidUTF8(strings.TrimSpace(r), "\uFFFD")
	if len(r) <= MaxReasonShown {
		return r
	}
	r = r[:MaxReasonShown]
	for len(r) > 0 && !utf8.ValidString(r) {
		r = r[:len(r)-1]
	}
	return r + "…"
}

// ReasonShownOf is [ReasonShown] of the "reason" string of a decision's
// content (a JSON object; "" if it has none).
func ReasonShownOf(contentJSON string) string {
	var c struct {
		Reason any `json:"reason"`
	}
	if contentJSON == "" || json.Unmarshal([]byte(contentJSON), &c) != nil {
		return ""
	}
	r, _ := c.Reason.(string)
	return ReasonShown(r)
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

// DeleteExecutions drops directory rows by id.
func (s *Store) DeleteExecutions(ctx context.Context, execIDs ...string) error {
	if len(execIDs) == 0 {
		return nil
	}
	return s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
		for _, id := range execIDs {
			if _, err := q.ExecContext(ctx, `DELETE FROM executions WHERE exec_id = $1`, id); err != nil {
				return fmt.Errorf("store: delete execution %s: %w", id, err)
			}
		}
		return nil
	})
}

// SettleExecutions marks rows settled at at (rows settled before keep
// their time).
func (s *Store) SettleExecutions(ctx context.Context, at time.Time, execIDs ...string) error {
	if len(execIDs) == 0 {
		return nil
	}
	return s.db.Write(ctx, func(ctx context.Context, q store.Querier) error { return SettleIn(ctx, q, at, execIDs) })
}

// SettleIn marks directory rows settled at at in tx, a write of the store
// (rows settled before keep their time).
func SettleIn(ctx context.Context, q store.Querier, at time.Time, execIDs []string) error {
	for _, id := range execIDs {
		if _, err := q.ExecContext(ctx, `UPDATE executions SET settled_at_ms = $1 WHERE exec_id = $2 AND settled_at_ms = 0`, at.UnixMilli(), id); err != nil {
			return fmt.Errorf("store: settle execution %s: %w", id, err)
		}
	}
	return nil
}

// PruneIn drops, in tx (a write of the store), the rows whose deadline is
// before before and returns how many.
func PruneIn(ctx context.Context, q store.Querier, before time.Time) (int64, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM executions WHERE deadline_ms < $1`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("store: prune executions: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
