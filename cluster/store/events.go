package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

func (s *sqlStore) AppendEvents(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	now := s.now().UnixMilli()
	return s.write(ctx, func(ctx context.Context, tx querier) error {
		for rest := events; len(rest) > 0; {
			chunk := rest[:min(len(rest), eventsPerInsert)]
			rest = rest[len(chunk):]
			args := make([]any, 0, 5*len(chunk))
			for _, e := range chunk {
				data := e.Data
				if data == nil {
					data = []byte{}
				}
				args = append(args, e.Session, e.Stream, e.Index, data, now)
			}
			if _, err := tx.ExecContext(ctx, insertEventsText[len(chunk)], args...); err != nil {
				return fmt.Errorf("store: append %d events of %s/%s#%d…: %w", len(chunk), chunk[0].Session, chunk[0].Stream, chunk[0].Index, err)
			}
		}
		return nil
	})
}

// eventsPerInsert bounds the rows of one INSERT of AppendEvents (5
// parameters a row: well inside SQLite's and Postgres's limits). A batch of
// events is one statement per this many rows, not one per event: on
// Postgres every statement is a round trip, which made the event log a
// sixth of the CPU of a remote tool call.
const eventsPerInsert = 64

// insertEventsText holds the INSERT of n events at index n (built once:
// the text is the prepared-statement caches' key).
var insertEventsText = func() []string {
	texts := make([]string, eventsPerInsert+1)
	for n := 1; n <= eventsPerInsert; n++ {
		var b strings.Builder
		b.WriteString("INSERT INTO mcp_events (session, stream, idx, data, created_at_ms) VALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			p := 5 * i
			fmt.Fprintf(&b, "($%d, $%d, $%d, $%d, $%d)", p+1, p+2, p+3, p+4, p+5)
		}
		b.WriteString(" ON CONFLICT (session, stream, idx) DO NOTHING")
		texts[n] = b.String()
	}
	return texts
}()

func (s *sqlStore) Events(ctx context.Context, session, stream string, after int) ([][]byte, int, error) {
	rows, err := s.rd.QueryContext(ctx, `SELECT idx, data FROM mcp_events WHERE session = $1 AND stream = $2 AND idx > $3 ORDER BY idx`, session, stream, after)
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
		if err := s.rd.QueryRowContext(ctx, `SELECT MAX(idx) FROM mcp_events WHERE session = $1 AND stream = $2`, session, stream).Scan(&max); err != nil {
			return nil, 0, fmt.Errorf("store: read events: %w", err)
		}
		if !max.Valid {
			return nil, -1, nil
		}
		return nil, int(max.Int64), nil
	}
	return out, last, nil
}

func (s *sqlStore) DeleteEvents(ctx context.Context, session string) error {
	return s.writeOne(ctx, func(ctx context.Context, q querier) error {
		if _, err := q.ExecContext(ctx, `DELETE FROM mcp_events WHERE session = $1`, session); err != nil {
			return fmt.Errorf("store: delete events of %s: %w", session, err)
		}
		return nil
	})
}

func (s *sqlStore) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.writeOne(ctx, func(ctx context.Context, q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM mcp_events WHERE created_at_ms < $1`, before.UnixMilli())
		if err != nil {
			return fmt.Errorf("store: prune events: %w", err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("store: prune events: %w", err)
		}
		return nil
	})
	return n, err
}

func (s *sqlStore) TrimEvents(ctx context.Context, session string, keepBytes int64) (int64, error) {
	// Running total of the data of the session's events, newest first;
	// everything past keepBytes goes. One statement, so concurrent trims
	// and appends of the session's single writer cannot interleave with it.
	var n int64
	err := s.writeOne(ctx, func(ctx context.Context, q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM mcp_events WHERE session = $1 AND (stream, idx) IN (
  SELECT stream, idx FROM (
    SELECT stream, idx, SUM(LENGTH(data)) OVER (ORDER BY created_at_ms DESC, idx DESC, stream DESC ROWS UNBOUNDED PRECEDING) AS newer
    FROM mcp_events WHERE session = $1
  ) AS t WHERE newer > $2)`, session, keepBytes)
		if err != nil {
			return fmt.Errorf("store: trim events of %s: %w", session, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("store: trim events of %s: %w", session, err)
		}
		return nil
	})
	return n, err
}
