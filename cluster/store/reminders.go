package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// fence locks grain's ownership row inside tx and checks epoch is current.
// The row lock (Postgres) or the write transaction (SQLite) keeps a
// concurrent Acquire from slipping in before tx commits.
func fence(ctx context.Context, tx querier, grain string, epoch uint64) error {
	res, err := tx.ExecContext(ctx, `UPDATE grains SET updated_at_ms = updated_at_ms WHERE grain = $1 AND epoch = $2`, grain, int64(epoch))
	if err != nil {
		return fmt.Errorf("store: fence %s at epoch %d: %w", grain, epoch, err)
	}
	return fencedResult(res, grain, epoch)
}

func (s *sqlStore) inTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

func (s *sqlStore) RegisterReminders(ctx context.Context, grain string, epoch uint64, rs []Reminder) ([]Reminder, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if err := checkReminders(rs); err != nil {
		return nil, err
	}
	// Versions start from the clock in nanoseconds and only grow, so a
	// reminder cancelled and registered again never reuses a version that an
	// in-flight completion still holds.
	now := s.now()
	if w := (Writes{SetReminders: rs}); foldable(s.d, w) != "" {
		return s.applyFolded(ctx, foldable(s.d, w), grain, epoch, w, now)
	}
	version := now.UnixNano()
	var out []Reminder
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := fence(ctx, tx, grain, epoch); err != nil {
			return err
		}
		var err error
		out, err = registerIn(ctx, tx, grain, rs, version)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// registerIn upserts reminders of grain on tx (fenced by the caller) and
// returns them as stored.
func registerIn(ctx context.Context, tx querier, grain string, rs []Reminder, version int64) ([]Reminder, error) {
	out := make([]Reminder, 0, len(rs))
	link := tracing.Inject(ctx)["traceparent"] // "" with tracing off
	for _, r := range rs {
		stored := Reminder{Grain: grain, Name: r.Name, DueAt: time.UnixMilli(r.DueAt.UnixMilli()), Period: r.Period.Truncate(time.Millisecond),
			Link: cmp.Or(r.Link, link)}
		err := tx.QueryRowContext(ctx, `
INSERT INTO reminders (grain, name, due_at_ms, period_ms, version, trace_context) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (grain, name) DO UPDATE SET due_at_ms = excluded.due_at_ms, period_ms = excluded.period_ms,
	version = CASE WHEN reminders.version + 1 > excluded.version THEN reminders.version + 1 ELSE excluded.version END,
	trace_context = excluded.trace_context
RETURNING version`,
			grain, r.Name, r.DueAt.UnixMilli(), r.Period.Milliseconds(), version, stored.Link).Scan(&stored.Version)
		if err != nil {
			return nil, fmt.Errorf("store: register reminder %s/%s: %w", grain, r.Name, err)
		}
		out = append(out, stored)
	}
	return out, nil
}

// cancelOthersIn deletes every reminder of grain not named in keep, in
// one statement.
func cancelOthersIn(ctx context.Context, tx querier, grain string, keep []Reminder) error {
	q, args := cancelOthersQuery(grain, keep)
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("store: cancel reminders of %s: %w", grain, err)
	}
	return nil
}

// cancelOthersQuery is the DELETE of grain's reminders but keep's, and its
// arguments.
func cancelOthersQuery(grain string, keep []Reminder) (string, []any) {
	if len(keep) == 0 {
		return `DELETE FROM reminders WHERE grain = $1`, []any{grain}
	}
	var b strings.Builder
	b.WriteString(`DELETE FROM reminders WHERE grain = $1 AND name NOT IN (`)
	args := []any{grain}
	for i, r := range keep {
		if i > 0 {
			b.WriteString(", ")
		}
		args = append(args, r.Name)
		fmt.Fprintf(&b, "$%d", len(args))
	}
	b.WriteString(")")
	return b.String(), args
}

// checkReminders validates reminders before they are written.
func checkReminders(rs []Reminder) error {
	for _, r := range rs {
		if r.Name == "" {
			return errors.New("store: reminder needs a name")
		}
		if r.Period < 0 {
			return fmt.Errorf("store: reminder %s: negative period", r.Name)
		}
	}
	return nil
}

func (s *sqlStore) CancelReminders(ctx context.Context, grain string, epoch uint64, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	if w := (Writes{CancelReminders: names}); foldable(s.d, w) != "" {
		_, err := s.applyFolded(ctx, foldable(s.d, w), grain, epoch, w, s.now())
		return err
	}
	return s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := fence(ctx, tx, grain, epoch); err != nil {
			return err
		}
		return cancelIn(ctx, tx, grain, names)
	})
}

// cancelIn deletes reminders of grain by name on tx (fenced by the caller).
func cancelIn(ctx context.Context, tx querier, grain string, names []string) error {
	for _, n := range names {
		if _, err := tx.ExecContext(ctx, `DELETE FROM reminders WHERE grain = $1 AND name = $2`, grain, n); err != nil {
			return fmt.Errorf("store: cancel reminder %s/%s: %w", grain, n, err)
		}
	}
	return nil
}

func (s *sqlStore) Reminders(ctx context.Context, grain string) ([]Reminder, error) {
	return s.queryReminders(ctx, `SELECT grain, name, due_at_ms, period_ms, version, trace_context FROM reminders WHERE grain = $1 ORDER BY name`, grain)
}

func (s *sqlStore) DueReminders(ctx context.Context, t time.Time, limit int) ([]Reminder, error) {
	return s.queryReminders(ctx, `SELECT grain, name, due_at_ms, period_ms, version, trace_context FROM reminders WHERE due_at_ms <= $1 ORDER BY due_at_ms LIMIT $2`, t.UnixMilli(), limit)
}

func (s *sqlStore) queryReminders(ctx context.Context, q string, args ...any) ([]Reminder, error) {
	rows, err := s.rd.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: query reminders: %w", err)
	}
	defer rows.Close()
	var out []Reminder
	for rows.Next() {
		var (
			r           Reminder
			due, period int64
		)
		if err := rows.Scan(&r.Grain, &r.Name, &due, &period, &r.Version, &r.Link); err != nil {
			return nil, fmt.Errorf("store: scan reminder: %w", err)
		}
		r.DueAt, r.Period = time.UnixMilli(due), time.Duration(period)*time.Millisecond
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read reminders: %w", err)
	}
	return out, nil
}

func (s *sqlStore) CompleteReminder(ctx context.Context, grain, name string, version int64, next time.Time) (bool, error) {
	var n int64
	err := s.writeOne(ctx, func(ctx context.Context, q querier) error {
		var (
			res sql.Result
			err error
		)
		if next.IsZero() {
			res, err = q.ExecContext(ctx, `DELETE FROM reminders WHERE grain = $1 AND name = $2 AND version = $3`, grain, name, version)
		} else {
			res, err = q.ExecContext(ctx, `UPDATE reminders SET due_at_ms = $1, version = version + 1 WHERE grain = $2 AND name = $3 AND version = $4`,
				next.UnixMilli(), grain, name, version)
		}
		if err != nil {
			return fmt.Errorf("store: complete reminder %s/%s: %w", grain, name, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("store: complete reminder %s/%s: %w", grain, name, err)
		}
		return nil
	})
	return n > 0, err
}

// RemindersIn sets and cancels reminders of grain inside tx, a domain
// write's transaction ([DB.Write]), so that a domain's step carries its
// grain's reminders (a durable pause's journal write sets the pause's
// deadline; the run's settling write cancels it) instead of a write of
// the grain's own. Every statement is fenced by epoch as [FencedBy]
// fences: at a stale epoch nothing changes and it returns [ErrFenced]
// (the set reminders' upsert changed no row). It returns the set
// reminders as stored, with their versions, for the node's reminder
// service (grain.Context's RemindersStored) — the caller tells it once
// tx committed. A reminder's Link, if empty, is ctx's traceparent (as
// [Store.RegisterReminders]). Missing names are ignored.
func RemindersIn(ctx context.Context, tx Querier, grain string, epoch uint64, set []Reminder, cancel []string, now time.Time) ([]Reminder, error) {
	if err := checkReminders(set); err != nil {
		return nil, err
	}
	for _, n := range cancel {
		if slices.ContainsFunc(set, func(r Reminder) bool { return r.Name == n }) {
			continue // set wins, as in Writes
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM reminders WHERE grain = $1 AND name = $3 AND `+FencedBy, grain, int64(epoch), n); err != nil {
			return nil, fmt.Errorf("store: cancel reminder %s/%s at epoch %d: %w", grain, n, epoch, err)
		}
	}
	out := make([]Reminder, 0, len(set))
	link := tracing.Inject(ctx)["traceparent"] // "" with tracing off
	for _, r := range set {
		stored := Reminder{Grain: grain, Name: r.Name, DueAt: time.UnixMilli(r.DueAt.UnixMilli()), Period: r.Period.Truncate(time.Millisecond),
			Link: cmp.Or(r.Link, link)}
		err := tx.QueryRowContext(ctx, fencedSetQuery, grain, int64(epoch), r.Name, r.DueAt.UnixMilli(), r.Period.Milliseconds(), now.UnixNano(), stored.Link).
			Scan(&stored.Version)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: %s epoch %d", ErrFenced, grain, epoch)
		}
		if err != nil {
			return nil, fmt.Errorf("store: register reminder %s/%s at epoch %d: %w", grain, r.Name, epoch, err)
		}
		out = append(out, stored)
	}
	return out, nil
}

// fencedSetQuery upserts one reminder (as registerIn does) if epoch ($2)
// is grain's ($1) current one; no row returned means fenced.
const fencedSetQuery = `
INSERT INTO reminders (grain, name, due_at_ms, period_ms, version, trace_context)
SELECT $1, $3, $4, $5, $6, $7 WHERE ` + FencedBy + `
ON CONFLICT (grain, name) DO UPDATE SET due_at_ms = excluded.due_at_ms, period_ms = excluded.period_ms,
	version = CASE WHEN reminders.version + 1 > excluded.version THEN reminders.version + 1 ELSE excluded.version END,
	trace_context = excluded.trace_context
RETURNING version`
