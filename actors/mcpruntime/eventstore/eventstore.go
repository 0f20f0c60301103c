// Package eventstore is the SSE event log of MCP sessions in the store's
// database: the events a client resumes a dropped stream from
// (Last-Event-ID) on any node, and the bytes each principal's events hold,
// counted as they are stored and dropped whichever node writes them. Its
// tables (mcp_events, mcp_event_bytes) and migrations are this package's,
// run through store.DB. Its contract tests run on SQLite and Postgres.
package eventstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

func init() { store.RegisterMigrations("actors/mcpruntime/eventstore", migrations...) }

// migrations are the event log's steps (versions of the store's one
// sequence; see store.RegisterMigrations).
var migrations = []store.Migration{
	{Version: 3, Name: "mcp sse event log", Stmts: []string{
		`CREATE TABLE mcp_events (
			session TEXT NOT NULL,
			stream TEXT NOT NULL,
			idx BIGINT NOT NULL,
			data {{blob}},
			created_at_ms BIGINT NOT NULL,
			PRIMARY KEY (session, stream, idx)
		)`,
	}},

	{Version: 7, Name: "the sse event log is pruned by age", Stmts: []string{
		`CREATE INDEX mcp_events_created ON mcp_events (created_at_ms)`,
	}},

	{Version: 12, Name: "the sse event log is kept within a budget per principal and for the store", Stmts: []string{
		`ALTER TABLE mcp_events ADD COLUMN org TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE mcp_events ADD COLUMN user_id TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX mcp_events_principal ON mcp_events (org, user_id, created_at_ms)`,
		// The bytes of data each principal's events hold, kept by every
		// write of the log in its own transaction. Events stored before
		// are not counted (they are pruned within the hour).
		`CREATE TABLE mcp_event_bytes (
			org TEXT NOT NULL,
			user_id TEXT NOT NULL,
			bytes BIGINT NOT NULL,
			PRIMARY KEY (org, user_id)
		)`,
	}},
}

// deletesLockKey is the cross-process lock (a Postgres advisory lock id)
// that serialises the deletes of the event log ("mcpevdl" in ASCII; see
// deleteEventsIn).
const deletesLockKey = 0x6d63706576646c

// Store is the event log in a store's database. Its methods are safe for
// concurrent use.
type Store struct {
	db  *store.DB
	now func() time.Time // stamps stored events (the store's clock)
	// inserts are the batched INSERTs in the dialect's placeholders
	// (insertTexts).
	inserts *[2][]string
}

// New returns the event log kept in st's database.
func New(st store.Store) *Store {
	db := st.DB()
	return &Store{db: db, now: db.Now, inserts: insertTexts(db.Dialect())}
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

// AppendEvents stores SSE events of MCP sessions (the resumability log).
// Indices are per (session, stream) and assigned by the caller; an event
// already stored at its index is left as is. It returns the bytes each
// principal whose events it stored keeps now, counted in the same
// transaction (the store counts every principal's bytes as events are
// stored and deleted, whichever node writes them).
func (s *Store) AppendEvents(ctx context.Context, events []Event) ([]EventBytes, error) {
	if len(events) == 0 {
		return nil, nil
	}
	now := s.now().UnixMilli()
	var totals []EventBytes
	err := s.db.Write(ctx, func(ctx context.Context, tx store.Querier) error {
		added := principalBytes{}
		for rest := events; len(rest) > 0; {
			chunk := rest[:min(len(rest), eventsPerInsert)]
			rest = rest[len(chunk):]
			args := make([]any, 0, eventColumns*len(chunk))
			for _, e := range chunk {
				data := e.Data
				if data == nil {
					data = []byte{}
				}
				args = append(args, e.Session, e.Stream, e.Index, data, now, e.Org, e.User)
			}
			// RETURNING names the rows actually inserted: an event already
			// stored (a retried flush) adds nothing to its principal's bytes.
			rows, err := tx.QueryContext(ctx, s.inserts[0][len(chunk)], args...)
			if err == nil {
				_, err = added.scan(rows)
			}
			if err != nil {
				return fmt.Errorf("store: append %d events of %s/%s#%d…: %w", len(chunk), chunk[0].Session, chunk[0].Stream, chunk[0].Index, err)
			}
		}
		var err error
		totals, err = added.addIn(ctx, tx, s.inserts[1])
		return err
	})
	if err != nil {
		return nil, err
	}
	return totals, nil
}

// eventsPerInsert bounds the rows of one INSERT of AppendEvents (7
// parameters a row: well inside SQLite's and Postgres's limits). A batch of
// events is one statement per this many rows, not one per event: on
// Postgres every statement is a round trip, which made the event log a
// sixth of the CPU of a remote tool call.
const eventsPerInsert = 64

// eventColumns are the parameters of one event's row.
const eventColumns = 7

// insertTexts holds, for a dialect, the INSERT of n events at [0][n] and
// the upsert of n principals' counts at [1][n] (built once: the text is
// the prepared-statement caches' key). On SQLite the parameters are
// anonymous (?): a $N parameter is a named one there, and binding looks
// each name up in a list of all of them (sqlite3_bind_parameter_name),
// which made binding a 64-event INSERT's 448 parameters 40 % of its CPU
// (BenchmarkAppendWarmCalls). Postgres numbers them ($N).
func insertTexts(dialect string) *[2][]string {
	if dialect == "sqlite" {
		return &sqliteInserts
	}
	return &postgresInserts
}

var (
	postgresInserts = [2][]string{batchTexts(eventsInsert, eventColumns, false), batchTexts(bytesUpsert, 3, false)}
	sqliteInserts   = [2][]string{batchTexts(eventsInsert, eventColumns, true), batchTexts(bytesUpsert, 3, true)}
)

// The batched statements: head, then the rows' parameters, then tail.
var (
	eventsInsert = [2]string{"INSERT INTO mcp_events (session, stream, idx, data, created_at_ms, org, user_id) VALUES ",
		" ON CONFLICT (session, stream, idx) DO NOTHING RETURNING org, user_id, LENGTH(data)"}
	bytesUpsert = [2]string{"INSERT INTO mcp_event_bytes (org, user_id, bytes) VALUES ",
		" ON CONFLICT (org, user_id) DO UPDATE SET bytes = mcp_event_bytes.bytes + excluded.bytes RETURNING org, user_id, bytes"}
)

// batchTexts holds stmt with n rows of cols parameters at index n, for
// n up to eventsPerInsert.
func batchTexts(stmt [2]string, cols int, anonymous bool) []string {
	texts := make([]string, eventsPerInsert+1)
	for n := 1; n <= eventsPerInsert; n++ {
		var b strings.Builder
		b.WriteString(stmt[0])
		writeParams(&b, n, cols, anonymous)
		b.WriteString(stmt[1])
		texts[n] = b.String()
	}
	return texts
}

// writeParams writes n rows of cols parameters: ($1, $2), ($3, $4)…, or
// (?, ?), (?, ?)… if anonymous.
func writeParams(b *strings.Builder, n, cols int, anonymous bool) {
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			if anonymous {
				b.WriteByte('?')
			} else {
				fmt.Fprintf(b, "$%d", cols*i+c+1)
			}
		}
		b.WriteByte(')')
	}
}

// Events returns the data of the events of (session, stream) with
// index > after, in order, and the stream's highest stored index (-1
// if none).
func (s *Store) Events(ctx context.Context, session, stream string, after int) ([][]byte, int, error) {
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT idx, data FROM mcp_events WHERE session = $1 AND stream = $2 AND idx > $3 ORDER BY idx`, session, stream, after)
	if err != nil {
		return nil, 0, fmt.Errorf("store: read events of %s/%s: %w", session, stream, err)
	}
	defer rows.Close()
	var (
		out  [][]byte
		last = after
	)
	for rows.Next() {
		var (
			idx  int
			data []byte
		)
		if err := rows.Scan(&idx, &data); err != nil {
			return nil, 0, fmt.Errorf("store: scan event: %w", err)
		}
		if data == nil {
			data = []byte{} // SQLite reads an empty blob as nil
		}
		if idx != last+1 {
			return nil, 0, fmt.Errorf("store: events of %s/%s: gap after index %d", session, stream, last)
		}
		out, last = append(out, data), idx
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("store: read events: %w", err)
	}
	if len(out) == 0 {
		// Distinguish "nothing after" from "no such stream".
		var max sql.NullInt64
		if err := s.db.Reader().QueryRowContext(ctx, `SELECT MAX(idx) FROM mcp_events WHERE session = $1 AND stream = $2`, session, stream).Scan(&max); err != nil {
			return nil, 0, fmt.Errorf("store: read events: %w", err)
		}
		if !max.Valid {
			return nil, -1, nil
		}
		return nil, int(max.Int64), nil
	}
	return out, last, nil
}

// DeleteEvents drops every event of session (the session ended).
func (s *Store) DeleteEvents(ctx context.Context, session string) error {
	return s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
		if _, err := s.deleteEventsIn(ctx, q, `DELETE FROM mcp_events WHERE session = $1`+deletedEvents, session); err != nil {
			return fmt.Errorf("store: delete events of %s: %w", session, err)
		}
		return nil
	})
}

// PruneEvents drops events stored before before (past the window in
// which a client resumes a dropped stream) and returns how many.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
		var err error
		if n, err = s.pruneEventsIn(ctx, q, before.UnixMilli()); err != nil {
			return fmt.Errorf("store: prune events: %w", err)
		}
		// Principals with no events left keep no count: a count that went
		// wrong (events a node of an older version dropped during a
		// rolling upgrade were never subtracted) ends with them.
		if _, err := q.ExecContext(ctx, `DELETE FROM mcp_event_bytes WHERE bytes <= 0 OR NOT EXISTS (
  SELECT 1 FROM mcp_events e WHERE e.org = mcp_event_bytes.org AND e.user_id = mcp_event_bytes.user_id)`); err != nil {
			return fmt.Errorf("store: prune event byte counts: %w", err)
		}
		return nil
	})
	return n, err
}

// pruneEventsIn deletes the events stored before before (Unix ms) and
// subtracts them from their principals' bytes. A prune can drop an hour of
// a node's events at once, so it sums them by principal first rather than
// returning every row; under the lock of event deletes nothing else drops
// them meanwhile, and no write adds an event that old.
func (s *Store) pruneEventsIn(ctx context.Context, q store.Querier, before int64) (int64, error) {
	if err := s.lockEventDeletes(ctx, q); err != nil {
		return 0, err
	}
	rows, err := q.QueryContext(ctx, `SELECT org, user_id, SUM(LENGTH(data)) FROM mcp_events WHERE created_at_ms < $1 GROUP BY org, user_id`, before)
	if err != nil {
		return 0, err
	}
	freed := principalBytes{}
	if _, err := freed.scan(rows); err != nil {
		return 0, err
	}
	res, err := q.ExecContext(ctx, `DELETE FROM mcp_events WHERE created_at_ms < $1`, before)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, freed.subtractIn(ctx, q)
}

// TrimEvents drops the oldest events of session (by storage time, then
// index) until the data of those left totals at most keepBytes, and
// returns how many it dropped. A stream whose older events were dropped
// can no longer be resumed from before them ([Store.Events] reports
// the gap).
func (s *Store) TrimEvents(ctx context.Context, session string, keepBytes int64) (int64, error) {
	// Running total of the data of the session's events, newest first;
	// everything past keepBytes goes. One statement, so concurrent trims
	// and appends of the session's single writer cannot interleave with it.
	var n int64
	err := s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
		var err error
		n, err = s.deleteEventsIn(ctx, q, `DELETE FROM mcp_events WHERE session = $1 AND (stream, idx) IN (
  SELECT stream, idx FROM (
    SELECT stream, idx, SUM(LENGTH(data)) OVER (ORDER BY created_at_ms DESC, idx DESC, stream DESC ROWS UNBOUNDED PRECEDING) AS newer
    FROM mcp_events WHERE session = $1
  ) AS t WHERE newer > $2)`+deletedEvents, session, keepBytes)
		if err != nil {
			return fmt.Errorf("store: trim events of %s: %w", session, err)
		}
		return nil
	})
	return n, err
}

// TrimPrincipalEvents drops the oldest events of the principal's
// sessions, whichever session they belong to (by storage time), until
// the principal keeps at most keepBytes, and returns how many it
// dropped. It drops in steps of a bounded number of events, each its
// own transaction, so it never holds the store long.
func (s *Store) TrimPrincipalEvents(ctx context.Context, org, user string, keepBytes int64) (int64, error) {
	n, err := s.trimOldest(ctx, keepBytes, principalScope, org, user)
	if err != nil {
		return n, fmt.Errorf("store: trim the events of %s/%s to %d bytes: %w", org, user, keepBytes, err)
	}
	return n, nil
}

// TrimStoredEvents is TrimPrincipalEvents over every stored event: the
// oldest go, whoever owns them, until the store keeps at most
// keepBytes.
func (s *Store) TrimStoredEvents(ctx context.Context, keepBytes int64) (int64, error) {
	n, err := s.trimOldest(ctx, keepBytes, storeScope)
	if err != nil {
		return n, fmt.Errorf("store: trim the stored events to %d bytes: %w", keepBytes, err)
	}
	return n, nil
}

// EventUsage reports what the event log keeps in the store.
func (s *Store) EventUsage(ctx context.Context) (EventUsage, error) {
	var u EventUsage
	if err := s.db.Reader().QueryRowContext(ctx, `SELECT COALESCE(SUM(bytes), 0), COUNT(*), COALESCE(MAX(bytes), 0) FROM mcp_event_bytes WHERE bytes > 0`).
		Scan(&u.Bytes, &u.Principals, &u.LargestPrincipal); err != nil {
		return EventUsage{}, fmt.Errorf("store: read the event log's usage: %w", err)
	}
	return u, nil
}

// trimChunk bounds the events one step of a trim drops (one write: a
// short transaction, and on SQLite a short turn of the single writer).
const trimChunk = 512

// trimScope is what a trim keeps within a budget: the events of one
// principal (arguments org, user) or all of them. Its statements:
type trimScope struct {
	total   string // the bytes the store counts for the scope
	oldest  string // how many of the trimChunk oldest events there are, and their bytes
	drop    string // deletes the oldest of them until their bytes reach the last argument
	recount string // sets the scope's counts to what its events hold
}

var (
	principalScope = newTrimScope(`WHERE org = $1 AND user_id = $2`, 3,
		`SELECT COALESCE(SUM(bytes), 0) FROM mcp_event_bytes WHERE org = $1 AND user_id = $2`,
		`UPDATE mcp_event_bytes SET bytes = (SELECT COALESCE(SUM(LENGTH(data)), 0) FROM mcp_events WHERE org = $1 AND user_id = $2) WHERE org = $1 AND user_id = $2`)
	storeScope = newTrimScope(``, 1,
		`SELECT COALESCE(SUM(bytes), 0) FROM mcp_event_bytes`,
		`UPDATE mcp_event_bytes SET bytes = (SELECT COALESCE(SUM(LENGTH(e.data)), 0) FROM mcp_events e WHERE e.org = mcp_event_bytes.org AND e.user_id = mcp_event_bytes.user_id)`)
)

// newTrimScope builds a scope's statements over the events matching where,
// the bytes to free being parameter $free.
//
// The oldest events are read by lengths only (a materialized subquery must
// not copy the data), ordered by storage time alone, which an index gives
// (mcp_events_principal, mcp_events_created): a step reads its chunk's
// rows, not all of them. Ties (one flush) come in the index's order, the
// order of insertion. The event that crosses the bytes to free goes too.
func newTrimScope(where string, free int, total, recount string) trimScope {
	chunk := fmt.Sprintf(`SELECT session, stream, idx, created_at_ms, LENGTH(data) AS n FROM mcp_events %s ORDER BY created_at_ms LIMIT %d`, where, trimChunk)
	return trimScope{
		total:  total,
		oldest: `SELECT COUNT(*), COALESCE(SUM(n), 0) FROM (` + chunk + `) AS c`,
		drop: fmt.Sprintf(`DELETE FROM mcp_events WHERE (session, stream, idx) IN (
  SELECT session, stream, idx FROM (
    SELECT session, stream, idx, SUM(n) OVER (ORDER BY created_at_ms, session, stream, idx ROWS UNBOUNDED PRECEDING) - n AS older
    FROM (%s) AS c
  ) AS t WHERE older < $%d)`, chunk, free) + deletedEvents,
		recount: recount,
	}
}

// trimOldest drops the oldest events of scope (arguments args), a chunk a
// write, while the bytes the store counts for it exceed keep. Each step
// reads the count in its own write, after taking the lock of event
// deletes, so trims by several nodes at once free what is over once.
func (s *Store) trimOldest(ctx context.Context, keep int64, scope trimScope, args ...any) (int64, error) {
	var dropped int64
	for {
		var n int64
		var done bool
		err := s.db.Write(ctx, func(ctx context.Context, q store.Querier) error {
			var err error
			n, done, err = s.trimStepIn(ctx, q, keep, scope, args)
			return err
		})
		dropped += n
		if err != nil || done {
			return dropped, err
		}
	}
}

// trimStepIn is one step of trimOldest on q: it drops up to trimChunk of
// the oldest events and reports whether the scope is within keep.
//
// A count higher than the events hold (events a node of an older version
// dropped during a rolling upgrade were never subtracted) makes trims drop
// more than is over; one higher than all the scope holds would drop every
// event of the scope at every write, for good. So when the oldest chunk is
// all the scope has and holds less than the count says is over, the step
// counts the scope again from its events first. (A principal's count also
// ends when it has no events left: PruneEvents.)
func (s *Store) trimStepIn(ctx context.Context, q store.Querier, keep int64, scope trimScope, args []any) (n int64, done bool, err error) {
	if err := s.lockEventDeletes(ctx, q); err != nil {
		return 0, false, err
	}
	var kept, oldest, oldestBytes int64
	if err := q.QueryRowContext(ctx, scope.total, args...).Scan(&kept); err != nil {
		return 0, false, fmt.Errorf("read the bytes kept: %w", err)
	}
	if kept <= keep {
		return 0, true, nil
	}
	if err := q.QueryRowContext(ctx, scope.oldest, args...).Scan(&oldest, &oldestBytes); err != nil {
		return 0, false, fmt.Errorf("read the oldest events: %w", err)
	}
	if oldest < trimChunk && oldestBytes < kept-keep {
		if _, err := q.ExecContext(ctx, scope.recount, args...); err != nil {
			return 0, false, fmt.Errorf("count the bytes kept again: %w", err)
		}
		if err := q.QueryRowContext(ctx, scope.total, args...).Scan(&kept); err != nil {
			return 0, false, fmt.Errorf("read the bytes kept: %w", err)
		}
		if kept <= keep {
			return 0, true, nil
		}
	}
	n, err = s.deleteEventsIn(ctx, q, scope.drop, append(args[:len(args):len(args)], kept-keep)...)
	return n, n < trimChunk, err
}

// deletedEvents is the RETURNING clause of every delete of events: what
// deleteEventsIn subtracts from their principals' bytes.
const deletedEvents = ` RETURNING org, user_id, LENGTH(data)`

// deleteEventsIn runs a delete of events (ending in deletedEvents) on q
// and subtracts what it freed from the principals' bytes. It returns how
// many events it deleted.
//
// On Postgres, deletes of events by several nodes at once are serialised
// (lockEventDeletes): two deletes of overlapping events lock them in
// different orders and deadlock, and each delete then locks the counts of
// the principals it freed, which appends lock too. Appends never wait for
// a delete's events, so they are not serialised.
func (s *Store) deleteEventsIn(ctx context.Context, q store.Querier, query string, args ...any) (int64, error) {
	if err := s.lockEventDeletes(ctx, q); err != nil {
		return 0, err
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	freed := principalBytes{}
	n, err := freed.scan(rows)
	if err != nil {
		return 0, err
	}
	return n, freed.subtractIn(ctx, q)
}

// lockEventDeletes takes the store's lock of event deletes in q, a
// transaction (held until it ends; taking it again is a no-op).
func (s *Store) lockEventDeletes(ctx context.Context, q store.Querier) error {
	if err := s.db.Lock(ctx, q, deletesLockKey); err != nil {
		return fmt.Errorf("lock the event log's deletes: %w", err)
	}
	return nil
}

// principalKey names a principal in the event byte counts.
type principalKey struct{ org, user string }

// principalBytes are bytes of event data by principal.
type principalBytes map[principalKey]int64

// scan adds rows of (org, user_id, bytes) and closes them; it returns how
// many rows there were.
func (p principalBytes) scan(rows *sql.Rows) (int64, error) {
	defer rows.Close()
	var n int64
	for rows.Next() {
		var (
			k     principalKey
			bytes int64
		)
		if err := rows.Scan(&k.org, &k.user, &bytes); err != nil {
			return n, fmt.Errorf("scan event bytes: %w", err)
		}
		p[k] += bytes
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("read event bytes: %w", err)
	}
	return n, nil
}

// keys are the principals in a fixed order: on Postgres, transactions
// that update several counts lock them in the same order (no deadlock).
func (p principalBytes) keys() []principalKey {
	keys := make([]principalKey, 0, len(p))
	for k, n := range p {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b principalKey) int {
		return cmp.Or(cmp.Compare(a.org, b.org), cmp.Compare(a.user, b.user))
	})
	return keys
}

// addIn adds p to the principals' counts on q and returns their new
// totals.
func (p principalBytes) addIn(ctx context.Context, q store.Querier, texts []string) ([]EventBytes, error) {
	keys := p.keys()
	totals := make([]EventBytes, 0, len(keys))
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), eventsPerInsert)]
		keys = keys[len(chunk):]
		args := make([]any, 0, 3*len(chunk))
		for _, k := range chunk {
			args = append(args, k.org, k.user, p[k])
		}
		rows, err := q.QueryContext(ctx, texts[len(chunk)], args...)
		if err != nil {
			return nil, fmt.Errorf("store: count the bytes of %d principals' events: %w", len(chunk), err)
		}
		got := principalBytes{}
		if _, err := got.scan(rows); err != nil {
			return nil, fmt.Errorf("store: count the bytes of %d principals' events: %w", len(chunk), err)
		}
		for k, n := range got {
			totals = append(totals, EventBytes{Org: k.org, User: k.user, Bytes: n})
		}
	}
	return totals, nil
}

// subtractIn subtracts p from the principals' counts on q (never below
// zero: events stored before the counts, or by a node of an older
// version during a rolling upgrade, were never added).
func (p principalBytes) subtractIn(ctx context.Context, q store.Querier) error {
	for _, k := range p.keys() {
		if _, err := q.ExecContext(ctx, `UPDATE mcp_event_bytes SET bytes = CASE WHEN bytes > $3 THEN bytes - $3 ELSE 0 END WHERE org = $1 AND user_id = $2`,
			k.org, k.user, p[k]); err != nil {
			return fmt.Errorf("store: uncount %d bytes of %s/%s's events: %w", p[k], k.org, k.user, err)
		}
	}
	return nil
}
