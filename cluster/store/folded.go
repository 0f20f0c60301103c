package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// Postgres runs the two commonest reminder-only writes — one reminder set
// (a pause's deadline), reminders cancelled by name (the pause decided) —
// as one statement: the fence is a data-modifying CTE (the same UPDATE of
// the grain's row that [fence] runs, taking the same row lock), and the
// reminder change reads its output, so it happens only at the current
// epoch. One round trip instead of four (BEGIN, fence, change, COMMIT).
// SQLite has no data-modifying CTEs; its writes are group-committed, so
// round trips cost it little. Apply, RegisterReminders and
// CancelReminders take this path when the write has one of these shapes.

// fenceCTE is the fence as a CTE that returns the grain's key when epoch
// ($2) is current.
const fenceCTE = `WITH f AS (UPDATE grains SET updated_at_ms = updated_at_ms WHERE grain = $1 AND epoch = $2 RETURNING grain)`

// foldedSetQuery upserts one reminder (as registerIn does) if the fence
// holds; no row returned means fenced.
const foldedSetQuery = fenceCTE + `
INSERT INTO reminders (grain, name, due_at_ms, period_ms, version, trace_context) SELECT grain, $3::TEXT, $4::BIGINT, $5::BIGINT, $6::BIGINT, $7::TEXT FROM f
ON CONFLICT (grain, name) DO UPDATE SET due_at_ms = excluded.due_at_ms, period_ms = excluded.period_ms,
	version = CASE WHEN reminders.version + 1 > excluded.version THEN reminders.version + 1 ELSE excluded.version END,
	trace_context = excluded.trace_context
RETURNING version`

// foldable reports which folded statement applies to w on dialect d:
// "set", "cancel", "also", "end" or "" (none: the general path).
func foldable(d dialect, w Writes) string {
	if d.name != "postgres" {
		return ""
	}
	if w.CancelOtherReminders {
		if w.Record != nil && len(w.SetReminders) == 1 && len(w.CancelReminders) == 0 && len(w.Also) == 0 {
			return "end"
		}
		return ""
	}
	if w.Release {
		return ""
	}
	if w.Record != nil || len(w.Also) > 0 {
		if w.Record != nil && len(w.Also) == 1 && len(w.SetReminders) == 0 && len(w.CancelReminders) == 0 {
			return "also"
		}
		return ""
	}
	switch {
	case len(w.SetReminders) == 1 && len(w.CancelReminders) == 0:
		return "set"
	case len(w.SetReminders) == 0 && len(w.CancelReminders) > 0:
		return "cancel"
	}
	return ""
}

// applyFolded applies w (of a foldable shape) to grain in one statement.
func (s *sqlStore) applyFolded(ctx context.Context, shape, grain string, epoch uint64, w Writes, now time.Time) ([]Reminder, error) {
	switch shape {
	case "also":
		return nil, s.applyAlsoFolded(ctx, grain, epoch, w.Record, w.Also[0], now)
	case "end":
		return s.applyEndFolded(ctx, grain, epoch, w, now)
	}
	if shape == "set" {
		r := w.SetReminders[0]
		stored := Reminder{Grain: grain, Name: r.Name, DueAt: time.UnixMilli(r.DueAt.UnixMilli()), Period: r.Period.Truncate(time.Millisecond),
			Link: cmp.Or(r.Link, tracing.Inject(ctx)["traceparent"])} // as registerIn
		err := s.db.QueryRowContext(ctx, foldedSetQuery, grain, int64(epoch), r.Name, r.DueAt.UnixMilli(), r.Period.Milliseconds(), now.UnixNano(), stored.Link).
			Scan(&stored.Version)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: %s epoch %d", ErrFenced, grain, epoch)
		}
		if err != nil {
			return nil, fmt.Errorf("store: register reminder %s/%s at epoch %d: %w", grain, r.Name, epoch, err)
		}
		return []Reminder{stored}, nil
	}
	q, args := foldedCancelQuery(grain, epoch, w.CancelReminders)
	var fenced int
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&fenced); err != nil {
		return nil, fmt.Errorf("store: cancel reminders of %s at epoch %d: %w", grain, epoch, err)
	}
	if fenced == 0 {
		return nil, fmt.Errorf("%w: %s epoch %d", ErrFenced, grain, epoch)
	}
	return nil, nil
}

// foldedCancelQuery deletes grain's reminders named in names if the fence
// holds, and returns 1 if it held, 0 if not.
func foldedCancelQuery(grain string, epoch uint64, names []string) (string, []any) {
	var b strings.Builder
	b.WriteString(fenceCTE + `, d AS (DELETE FROM reminders WHERE grain IN (SELECT grain FROM f) AND name IN (`)
	args := []any{grain, int64(epoch)}
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		args = append(args, n)
		fmt.Fprintf(&b, "$%d", len(args))
	}
	b.WriteString(")) SELECT COUNT(*) FROM f")
	return b.String(), args
}

// applyAlsoFolded saves record and runs st (a step's domain statement) in
// one statement: the record's fenced UPDATE is the CTE f that st reads,
// so st changes nothing at a stale epoch, and neither does the UPDATE.
func (s *sqlStore) applyAlsoFolded(ctx context.Context, grain string, epoch uint64, record []byte, st Stmt, now time.Time) error {
	n := len(st.Args) + 2
	q := fmt.Sprintf(`WITH f AS (UPDATE grains SET record = $%d, updated_at_ms = $%d WHERE grain = $1 AND epoch = $2 RETURNING grain), d AS (%s) SELECT COUNT(*) FROM f`,
		n+1, n+2, st.SQL)
	args := append(append([]any{grain, int64(epoch)}, st.Args...), record, now.UnixMilli())
	var fenced int
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&fenced); err != nil {
		return fmt.Errorf("store: save %s at epoch %d with a step's statement: %w", grain, epoch, err)
	}
	if fenced == 0 {
		return fmt.Errorf("%w: %s epoch %d", ErrFenced, grain, epoch)
	}
	return nil
}

// createFoldable reports whether Create's w is a record and one reminder
// (a session's creation: its record and its expiry), which Postgres
// writes in one statement.
func createFoldable(d dialect, w Writes) bool {
	return d.name == "postgres" && w.Record != nil && len(w.SetReminders) == 1 && len(w.CancelReminders) == 0 &&
		!w.CancelOtherReminders && !w.Release && len(w.Also) == 0
}

// foldedCreateQuery is createQuery as a CTE g whose row, if the grain
// was created, the reminder's upsert (as registerIn's) reads: ownership,
// record and reminder in one statement. No row returned means the grain
// has a record (created by another activation).
const foldedCreateQuery = `WITH g AS (
INSERT INTO grains (grain, owner_node, epoch, record, updated_at_ms) VALUES ($1, $2, 1, $4, $3)
ON CONFLICT (grain) DO UPDATE SET owner_node = excluded.owner_node, epoch = grains.epoch + 1, record = excluded.record, updated_at_ms = excluded.updated_at_ms
WHERE grains.record IS NULL
RETURNING grain, epoch)
INSERT INTO reminders (grain, name, due_at_ms, period_ms, version, trace_context) SELECT grain, $5::TEXT, $6::BIGINT, $7::BIGINT, $8::BIGINT, $9::TEXT FROM g
ON CONFLICT (grain, name) DO UPDATE SET due_at_ms = excluded.due_at_ms, period_ms = excluded.period_ms,
	version = CASE WHEN reminders.version + 1 > excluded.version THEN reminders.version + 1 ELSE excluded.version END,
	trace_context = excluded.trace_context
RETURNING version, (SELECT epoch FROM g)`

// createFolded is Create for a createFoldable w: one statement, no
// transaction around it (one round trip instead of four).
func (s *sqlStore) createFolded(ctx context.Context, grain, node string, w Writes, now time.Time) (Ownership, []Reminder, error) {
	r := w.SetReminders[0]
	stored := Reminder{Grain: grain, Name: r.Name, DueAt: time.UnixMilli(r.DueAt.UnixMilli()), Period: r.Period.Truncate(time.Millisecond),
		Link: cmp.Or(r.Link, tracing.Inject(ctx)["traceparent"])} // as registerIn
	var epoch int64
	err := s.db.QueryRowContext(ctx, foldedCreateQuery, grain, node, now.UnixMilli(), w.Record,
		r.Name, r.DueAt.UnixMilli(), r.Period.Milliseconds(), now.UnixNano(), stored.Link).Scan(&stored.Version, &epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return Ownership{}, nil, fmt.Errorf("%w: %s was created by another activation", ErrFenced, grain)
	}
	if err != nil {
		return Ownership{}, nil, fmt.Errorf("store: create %s for %s: %w", grain, node, err)
	}
	o := Ownership{Grain: grain, Owner: node, Epoch: uint64(epoch), Record: w.Record, UpdatedAt: time.UnixMilli(now.UnixMilli())}
	return o, []Reminder{stored}, nil
}

// foldedEndQuery saves the record (and, if $10, releases the grain) at
// the current epoch as the CTE f, deletes every other reminder of the
// grain, and upserts the one kept (as registerIn): a session's end (its
// tombstone, its purge reminder) in one statement. No row returned means
// fenced.
const foldedEndQuery = `WITH f AS (UPDATE grains SET record = $3, updated_at_ms = $4,
	owner_node = CASE WHEN $10::BOOLEAN THEN '' ELSE owner_node END WHERE grain = $1 AND epoch = $2 RETURNING grain),
d AS (DELETE FROM reminders WHERE grain IN (SELECT grain FROM f) AND name <> $5::TEXT)
INSERT INTO reminders (grain, name, due_at_ms, period_ms, version, trace_context) SELECT grain, $5::TEXT, $6::BIGINT, $7::BIGINT, $8::BIGINT, $9::TEXT FROM f
ON CONFLICT (grain, name) DO UPDATE SET due_at_ms = excluded.due_at_ms, period_ms = excluded.period_ms,
	version = CASE WHEN reminders.version + 1 > excluded.version THEN reminders.version + 1 ELSE excluded.version END,
	trace_context = excluded.trace_context
RETURNING version`

// applyEndFolded applies w of shape "end" (a record, one reminder kept,
// every other cancelled, maybe the release) in one statement.
func (s *sqlStore) applyEndFolded(ctx context.Context, grain string, epoch uint64, w Writes, now time.Time) ([]Reminder, error) {
	r := w.SetReminders[0]
	stored := Reminder{Grain: grain, Name: r.Name, DueAt: time.UnixMilli(r.DueAt.UnixMilli()), Period: r.Period.Truncate(time.Millisecond),
		Link: cmp.Or(r.Link, tracing.Inject(ctx)["traceparent"])} // as registerIn
	err := s.db.QueryRowContext(ctx, foldedEndQuery, grain, int64(epoch), w.Record, now.UnixMilli(),
		r.Name, r.DueAt.UnixMilli(), r.Period.Milliseconds(), now.UnixNano(), stored.Link, w.Release).Scan(&stored.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s epoch %d", ErrFenced, grain, epoch)
	}
	if err != nil {
		return nil, fmt.Errorf("store: save %s and keep reminder %s at epoch %d: %w", grain, r.Name, epoch, err)
	}
	return []Reminder{stored}, nil
}
