// Package taskstore keeps the tasks of the MCP tasks extension in the
// store's database: the tasks table and its migrations are this package's,
// run through store.DB next to the grains table their writes are fenced
// by. Its contract tests run on SQLite and Postgres.
package taskstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

func init() {
	store.RegisterMigrations("actors/tasks/taskstore", migrations...)
}

// migrations are the tasks table's steps (versions of the store's one
// sequence; see store.RegisterMigrations).
var migrations = []store.Migration{
	{Version: 9, Name: "tasks extension: durable tasks", Stmts: []string{
		`CREATE TABLE tasks (
			task_id TEXT PRIMARY KEY,
			grain TEXT NOT NULL,
			user_id TEXT NOT NULL,
			org TEXT NOT NULL,
			status TEXT NOT NULL,
			status_message TEXT NOT NULL,
			params TEXT NOT NULL,
			result TEXT NOT NULL,
			error TEXT NOT NULL,
			input_requests TEXT NOT NULL,
			input_responses TEXT NOT NULL,
			request_state TEXT NOT NULL,
			attempts BIGINT NOT NULL,
			ttl_ms BIGINT NOT NULL,
			poll_ms BIGINT NOT NULL,
			created_at_ms BIGINT NOT NULL,
			updated_at_ms BIGINT NOT NULL,
			expires_at_ms BIGINT NOT NULL
		)`,
		`CREATE INDEX tasks_expires ON tasks (expires_at_ms)`,
	}},
	{Version: 10, Name: "tasks extension: the handover lease of a task's running work", Stmts: []string{
		`ALTER TABLE tasks ADD COLUMN lease_until_ms BIGINT NOT NULL DEFAULT 0`,
	}},
	// Expand only: a node of the earlier version inserts without the
	// columns (they default to "", a principal without a role, which
	// decides nothing) and its updates leave them as they are.
	{Version: 11, Name: "tasks extension: the roles a task's rounds run with", Stmts: []string{
		`ALTER TABLE tasks ADD COLUMN role TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tasks ADD COLUMN responder_role TEXT NOT NULL DEFAULT ''`,
	}},
}

// Store keeps tasks in a store's database. Its methods are safe for
// concurrent use.
type Store struct{ db *store.DB }

// New returns the tasks kept in st's database.
func New(st store.Store) *Store { return &Store{db: st.DB()} }

// Task is one task of the MCP tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663): a tools/call that runs on after its request answered. Its task
// grain writes it (fenced by the grain's epoch); any node reads it. The
// JSON members hold wire JSON, "" when absent.
type Task struct {
	// ID is the task id, also its task grain's identity.
	ID string
	// User and Org are the principal that created it; nobody else sees it.
	User, Org string
	// Role is the role of the principal that created it: the authority of
	// a round that carries no input responses (its first run). With User
	// and Org it is the whole principal, so a round run again on another
	// node runs as the one that started it ("" on a task written by a node
	// of an earlier version: no role, which decides nothing).
	Role string
	// ResponderRole is the role of the principal that gave InputResponses:
	// the authority of the round that carries them (a decision on a paused
	// execution is its decider's, who may be another member of the
	// organization than the creator). "" while no responses are held.
	ResponderRole string
	// Status is working, input_required, completed, failed or cancelled.
	Status string
	// StatusMessage explains the status (e.g. why it failed).
	StatusMessage string
	// Params is the tools/call params that created the task (JSON).
	Params string
	// Result is the tool's result once completed (JSON).
	Result string
	// Error is the JSON-RPC error once failed (JSON {code, message, data}).
	Error string
	// InputRequests is the pending MRTR input requests by key (JSON map).
	InputRequests string
	// InputResponses is the responses received so far by key (JSON map).
	InputResponses string
	// RequestState is the tool's own state for its next round.
	RequestState string
	// Attempts counts how often the work was started (a start found with
	// attempts already counted was cut by a lost node).
	Attempts int
	// LeaseUntil is when the run of attempt Attempts may still record its
	// outcome although its grain's activation stopped: an activation that
	// stops while the task's work runs claims the time its drain takes
	// (zero: no claim; the work ends with its activation).
	LeaseUntil time.Time
	// TTL is how long the task is kept after its creation; PollInterval
	// the polling interval suggested to clients.
	TTL, PollInterval time.Duration
	// Created, Updated and Expires are the task's times (millisecond
	// precision).
	Created, Updated, Expires time.Time
}

// ErrTaskChanged is returned by [Store.SwapTask] when the task is no
// longer in the status and attempt the write was meant for (or is gone).
var ErrTaskChanged = errors.New("store: the task changed since it was read")

const taskColumns = `task_id, user_id, org, status, status_message, params, result, error, input_requests,
	input_responses, request_state, attempts, ttl_ms, poll_ms, created_at_ms, updated_at_ms, expires_at_ms, lease_until_ms,
	role, responder_role`

// PutTask creates or replaces a task of the tasks extension, fenced by
// the epoch of grain (its task grain; [store.ErrFenced] if not current). A
// task's creator (user, organization, role) is set when it is created
// and never replaced.
func (s *Store) PutTask(ctx context.Context, grain string, epoch uint64, t Task) error {
	return s.db.WriteOne(ctx, func(ctx context.Context, q store.Querier) error {
		res, err := q.ExecContext(ctx, `
INSERT INTO tasks (grain, `+taskColumns+`)
SELECT $1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22 WHERE `+store.FencedBy+`
ON CONFLICT (task_id) DO UPDATE SET status = excluded.status, status_message = excluded.status_message,
	params = excluded.params, result = excluded.result, error = excluded.error,
	input_requests = excluded.input_requests, input_responses = excluded.input_responses,
	request_state = excluded.request_state, attempts = excluded.attempts, ttl_ms = excluded.ttl_ms,
	poll_ms = excluded.poll_ms, updated_at_ms = excluded.updated_at_ms, expires_at_ms = excluded.expires_at_ms,
	lease_until_ms = excluded.lease_until_ms, responder_role = excluded.responder_role`,
			grain, int64(epoch), t.ID, t.User, t.Org, t.Status, t.StatusMessage, t.Params, t.Result, t.Error,
			t.InputRequests, t.InputResponses, t.RequestState, t.Attempts, t.TTL.Milliseconds(),
			t.PollInterval.Milliseconds(), t.Created.UnixMilli(), t.Updated.UnixMilli(), t.Expires.UnixMilli(),
			unixMilliOrZero(t.LeaseUntil), t.Role, t.ResponderRole)
		if err != nil {
			return fmt.Errorf("store: put task %s: %w", t.ID, err)
		}
		return store.CheckFenced(res, grain, epoch)
	})
}

// GetTask returns a task, or [store.ErrNotFound] (also once it expired).
func (s *Store) GetTask(ctx context.Context, taskID string, now time.Time) (Task, error) {
	var (
		t                                 Task
		ttl, poll, created, updated, exps int64
		lease                             int64
	)
	err := s.db.Reader().QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE task_id = $1 AND expires_at_ms > $2`,
		taskID, now.UnixMilli()).Scan(&t.ID, &t.User, &t.Org, &t.Status, &t.StatusMessage, &t.Params, &t.Result,
		&t.Error, &t.InputRequests, &t.InputResponses, &t.RequestState, &t.Attempts, &ttl, &poll, &created, &updated, &exps, &lease,
		&t.Role, &t.ResponderRole)
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("%w: task %s", store.ErrNotFound, taskID)
	}
	if err != nil {
		return Task{}, fmt.Errorf("store: get task %s: %w", taskID, err)
	}
	t.TTL, t.PollInterval = time.Duration(ttl)*time.Millisecond, time.Duration(poll)*time.Millisecond
	t.Created, t.Updated, t.Expires = time.UnixMilli(created), time.UnixMilli(updated), time.UnixMilli(exps)
	if lease != 0 {
		t.LeaseUntil = time.UnixMilli(lease)
	}
	return t, nil
}

// unixMilliOrZero is t in Unix milliseconds, 0 for the zero time.
func unixMilliOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// SwapTask replaces task t.ID's status and run state (status message,
// result, error, input requests and responses with their responder's
// role, request state, attempts, updated time, lease) with t's if its row
// is still in status status and attempt attempts; else it returns
// [ErrTaskChanged]. It is fenced by the task's own state, not by its
// grain's epoch: the run of an attempt records its outcome even after its
// grain moved to another node, and only if no other outcome (or a next
// attempt) came first.
func (s *Store) SwapTask(ctx context.Context, status string, attempts int, t Task) error {
	return s.db.WriteOne(ctx, func(ctx context.Context, q store.Querier) error {
		res, err := q.ExecContext(ctx, `
UPDATE tasks SET status = $3, status_message = $4, result = $5, error = $6, input_requests = $7,
	input_responses = $8, request_state = $9, attempts = $10, updated_at_ms = $11, lease_until_ms = $12,
	responder_role = $14
WHERE task_id = $1 AND status = $2 AND attempts = $13`,
			t.ID, status, t.Status, t.StatusMessage, t.Result, t.Error, t.InputRequests, t.InputResponses,
			t.RequestState, t.Attempts, t.Updated.UnixMilli(), unixMilliOrZero(t.LeaseUntil), attempts, t.ResponderRole)
		if err != nil {
			return fmt.Errorf("store: swap task %s: %w", t.ID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: swap task %s: %w", t.ID, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: task %s is no longer %s in attempt %d", ErrTaskChanged, t.ID, status, attempts)
		}
		return nil
	})
}

// PruneTasks drops tasks that expired before before and returns how
// many.
func (s *Store) PruneTasks(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.db.WriteOne(ctx, func(ctx context.Context, q store.Querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM tasks WHERE expires_at_ms <= $1`, before.UnixMilli())
		if err != nil {
			return fmt.Errorf("store: prune tasks: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
