// Package callstore keeps the durable tool calls of a program's own MCP
// server (the SDK's Step and Ask, docs/sdk.md §4) in the store's
// database: one row per tool call that journaled a step or asked a human,
// with its journal (a JSON document the runtime defines), the pause it
// waits in, and whether its handler returned. Rows are written fenced by
// the epoch of the session grain that owns the call; a write that pauses
// or decides also publishes or settles the pause's row of the execution
// directory (exchange/directory) in the same transaction, so every
// approval surface sees an asked question exactly as a code-mode pause.
package callstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
)

func init() { store.RegisterMigrations("actors/mcpruntime/callstore", migrations...) }

// migrations are the durable calls' steps (versions of the store's one
// sequence; see store.RegisterMigrations). Expand-only.
var migrations = []store.Migration{
	{Version: 14, Name: "durable tool calls of the SDK: Step and Ask journals", Stmts: []string{
		`CREATE TABLE sdk_calls (
			call_id TEXT PRIMARY KEY,
			session TEXT NOT NULL,
			ident TEXT NOT NULL,
			doc TEXT NOT NULL,
			pause_id TEXT NOT NULL,
			created_at_ms BIGINT NOT NULL,
			completed_at_ms BIGINT NOT NULL
		)`,
		`CREATE INDEX sdk_calls_open ON sdk_calls (session, completed_at_ms, ident)`,
	}},
}

// Store keeps durable tool calls in a store's database. Its methods are
// safe for concurrent use.
type Store struct{ db *store.DB }

// New returns the calls kept in st's database.
func New(st store.Store) *Store { return &Store{db: st.DB()} }

// Call is one durable tool call of a session or of a continuation grain
// (the 2026-07-28 era).
type Call struct {
	// ID is the call's id (random; not shown to clients).
	ID string
	// Session is the identity of the session grain that owns the call, or
	// the store key of the continuation grain that does
	// ("continuation/<id>": never a session id, which has no "/").
	Session string
	// Ident identifies the call among the session's open calls: a hash of
	// the tool's name and its canonical arguments.
	Ident string
	// Doc is the runtime's JSON of the call's journal (steps, questions).
	Doc string
	// PauseID is the execution id of the question the call waits for ("":
	// none).
	PauseID string
	// Created is when the call first journaled something.
	Created time.Time
	// Completed is when its handler returned (zero: still open).
	Completed time.Time
}

// Write is one step of a durable call, written in one transaction fenced
// by its grain's epoch.
type Write struct {
	// Call is the call's new row.
	Call Call
	// Publish, if not nil, is put in the execution directory.
	Publish *directory.Execution
	// Settle are directory rows marked settled at SettledAt.
	Settle    []string
	SettledAt time.Time
	// Cap, if not nil (with Publish), bounds the pending questions of
	// Publish's principal: the write is refused with [ErrCapReached]
	// unless the principal has fewer than Cap.Max.
	Cap *Cap
}

// Cap bounds how many pending questions of one kind a principal (user
// and org) has: directory rows of the principal, not settled and not past
// their deadline, whose question is held by the open call Prefix+exec id
// (the SDK's AskLater: "later_"). The count and the write that publishes
// one more are one transaction, serialised per principal (a Postgres
// advisory lock; SQLite's single writer), so concurrent publishers on any
// node never exceed Max.
type Cap struct {
	// Max is how many the principal may have (> 0).
	Max int
	// Prefix is the call id prefix of the kind's calls.
	Prefix string
	// Now is the count's clock: a question past its deadline is not counted.
	Now time.Time
}

// ErrCapReached is the answer of a write whose principal has [Cap.Max]
// pending questions already: nothing was written.
var ErrCapReached = errors.New("store: the principal has its cap of pending questions")

// Put writes w atomically, fenced by the epoch of grain (the session
// grain's store key): [store.ErrFenced] if it is not current.
func (s *Store) Put(ctx context.Context, grain string, epoch uint64, w Write) error {
	return s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
		if w.Cap != nil && w.Publish != nil {
			if err := s.checkCap(ctx, q, *w.Cap, *w.Publish); err != nil {
				return err
			}
		}
		c := w.Call
		res, err := q.ExecContext(ctx, `
INSERT INTO sdk_calls (call_id, session, ident, doc, pause_id, created_at_ms, completed_at_ms)
SELECT $3, $4, $5, $6, $7, $8, $9 WHERE `+store.FencedBy+`
ON CONFLICT (call_id) DO UPDATE SET doc = excluded.doc, pause_id = excluded.pause_id,
	completed_at_ms = excluded.completed_at_ms`,
			grain, int64(epoch), c.ID, c.Session, c.Ident, c.Doc, c.PauseID, c.Created.UnixMilli(), directory.MsOrZero(c.Completed))
		if err != nil {
			return fmt.Errorf("store: put call %s: %w", c.ID, err)
		}
		if err := store.CheckFenced(res, grain, epoch); err != nil {
			return err
		}
		if w.Publish != nil {
			if err := directory.PutIn(ctx, q, *w.Publish); err != nil {
				return err
			}
		}
		return directory.SettleIn(ctx, q, w.SettledAt, w.Settle)
	})
}

// checkCap takes the lock of e's principal in q and answers
// ErrCapReached if the principal has c.Max pending questions besides e.
func (s *Store) checkCap(ctx context.Context, q store.Querier, c Cap, e directory.Execution) error {
	if err := s.db.Lock(ctx, q, capLockKey(e.Org, e.User)); err != nil {
		return err
	}
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM executions e JOIN sdk_calls c ON c.call_id = CAST($1 AS TEXT) || e.exec_id
WHERE e.org = $2 AND e.user_id = $3 AND e.settled_at_ms = 0 AND e.deadline_ms > $4 AND e.exec_id <> $5 AND c.completed_at_ms = 0`,
		c.Prefix, e.Org, e.User, c.Now.UnixMilli(), e.ID).Scan(&n)
	if err != nil {
		return fmt.Errorf("store: count pending questions: %w", err)
	}
	if n >= c.Max {
		return fmt.Errorf("%w: %d pending", ErrCapReached, n)
	}
	return nil
}

// capLockKey is the cross-process lock of the pending questions of the
// principal (org, user): a hash, so two principals rarely share one (and
// then only wait for each other's count).
func capLockKey(org, user string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("mcpgrain pending questions\x00" + org + "\x00" + user))
	return int64(h.Sum64())
}

const columns = `call_id, session, ident, doc, pause_id, created_at_ms, completed_at_ms`

func scan(row interface{ Scan(...any) error }) (Call, error) {
	var (
		c                  Call
		created, completed int64
	)
	err := row.Scan(&c.ID, &c.Session, &c.Ident, &c.Doc, &c.PauseID, &created, &completed)
	c.Created = time.UnixMilli(created)
	if completed != 0 {
		c.Completed = time.UnixMilli(completed)
	}
	return c, err
}

// Open returns the session's open call (its handler never returned) with
// identity ident, the oldest if several, or [store.ErrNotFound].
func (s *Store) Open(ctx context.Context, session, ident string) (Call, error) {
	c, err := scan(s.db.Reader().QueryRowContext(ctx, `SELECT `+columns+` FROM sdk_calls
WHERE session = $1 AND completed_at_ms = 0 AND ident = $2 ORDER BY created_at_ms, call_id LIMIT 1`, session, ident))
	if errors.Is(err, sql.ErrNoRows) {
		return Call{}, fmt.Errorf("%w: open call of %s", store.ErrNotFound, session)
	}
	if err != nil {
		return Call{}, fmt.Errorf("store: open call of %s: %w", session, err)
	}
	return c, nil
}

// Get returns the call of owner (a session's, or a continuation grain's
// store key) with id id, open or completed, or [store.ErrNotFound].
func (s *Store) Get(ctx context.Context, owner, id string) (Call, error) {
	return s.one(ctx, `SELECT `+columns+` FROM sdk_calls WHERE call_id = $1 AND session = $2`, id, owner)
}

// ByPause returns owner's open call that waits in pause pauseID, or
// [store.ErrNotFound].
func (s *Store) ByPause(ctx context.Context, owner, pauseID string) (Call, error) {
	return s.one(ctx, `SELECT `+columns+` FROM sdk_calls
WHERE session = $1 AND completed_at_ms = 0 AND pause_id = $2 ORDER BY created_at_ms, call_id LIMIT 1`, owner, pauseID)
}

// one reads the one call query selects.
func (s *Store) one(ctx context.Context, query string, args ...any) (Call, error) {
	c, err := scan(s.db.Reader().QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Call{}, fmt.Errorf("%w: call %v", store.ErrNotFound, args)
	}
	if err != nil {
		return Call{}, fmt.Errorf("store: read call %v: %w", args, err)
	}
	return c, nil
}

// Paused lists the session's open calls that wait for a question's
// decision, oldest first.
func (s *Store) Paused(ctx context.Context, session string) ([]Call, error) {
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT `+columns+` FROM sdk_calls
WHERE session = $1 AND completed_at_ms = 0 AND pause_id <> '' ORDER BY created_at_ms, call_id`, session)
	if err != nil {
		return nil, fmt.Errorf("store: paused calls of %s: %w", session, err)
	}
	defer rows.Close()
	var out []Call
	for rows.Next() {
		c, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: scan call: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: paused calls of %s: %w", session, err)
	}
	return out, nil
}

// Count returns how many calls of session are stored (open or not); for
// tests and operators.
func (s *Store) Count(ctx context.Context, session string) (int, error) {
	var n int
	if err := s.db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM sdk_calls WHERE session = $1`, session).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count calls of %s: %w", session, err)
	}
	return n, nil
}

// Prune drops the calls completed before before, and the open calls
// created before it that never paused or whose pause left the execution
// directory (pruned past its deadline: its client never retried), and
// returns how many.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM sdk_calls WHERE (completed_at_ms <> 0 AND completed_at_ms < $1) OR
	(completed_at_ms = 0 AND created_at_ms < $1 AND
		(pause_id = '' OR NOT EXISTS (SELECT 1 FROM executions WHERE executions.exec_id = sdk_calls.pause_id)))`, before.UnixMilli())
		if err != nil {
			return fmt.Errorf("store: prune calls: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
