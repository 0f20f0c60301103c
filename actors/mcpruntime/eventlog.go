package mcpruntime

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// eventLog is the go-sdk EventStore of one session runtime: SSE events are
// kept in memory and written behind to the store in small batches, so a
// client can resume a dropped stream with Last-Event-ID on this node (from
// memory) or on any other node after the session moved (from the store).
//
// The standalone GET stream (id "") is not logged: go-sdk numbers its
// events from 0 again in every runtime incarnation, so its indices would
// collide across restores. Its notifications are not replayed after a
// dropped GET; responses to requests (POST streams, random ids) are.
//
// Write-behind means the last FlushInterval of events can be lost if the
// node dies; a clean passivation flushes everything first.
//
// What one session can make the store keep is bounded (events stay an
// hour, so an unbounded log is a way to make the node store whatever a
// client sends):
//
//   - an event larger than maxEvent is not logged at all. It is still
//     delivered live; its index is skipped, so a resume from before it is
//     refused (go-sdk answers 400, and the gateway answers the request
//     with its retryable restart error), a resume after it works;
//   - the session's stored events are kept within budget bytes: once the
//     events written since the last trim reach a quarter of it, the
//     oldest are dropped (store.TrimEvents). Clients resume within
//     seconds, so old streams are the ones nobody asks for. At any time
//     the store holds at most budget + budget/4 + maxEvent bytes of the
//     session's events (a closing runtime trims what it wrote, so a
//     restored one starts within the budget).
type eventLog struct {
	st        store.Store
	log       *slog.Logger
	every     time.Duration
	maxBytes  int // memory kept per runtime
	maxEvent  int
	budget    int64
	trimEvery int64
	metrics   *eventMetrics

	mu        sync.Mutex
	streams   map[string]*memStream // by session + "\x00" + stream
	pending   []store.Event
	bytes     int
	sinceTrim map[string]int64 // bytes stored per session since its last trim
	kick      chan struct{}
	stop      chan struct{}
	stopped   chan struct{}
	closed    bool
}

type memStream struct {
	first   int      // index of data[0]
	data    [][]byte // events first.. (trimmed from the front once flushed; nil for a skipped one)
	next    int      // next index to assign
	flushed int      // events with index < flushed are in the store
	skipped int      // 1 + the highest index not logged (too large); 0: none
}

// eventLimits bound what the log keeps (see [eventLog]).
type eventLimits struct {
	memory   int   // bytes kept in memory per runtime
	maxEvent int   // larger events are not logged
	budget   int64 // bytes stored per session
}

func newEventLog(st store.Store, log *slog.Logger, every time.Duration, lim eventLimits, m *eventMetrics) *eventLog {
	l := &eventLog{st: st, log: log, every: every, maxBytes: lim.memory, maxEvent: lim.maxEvent,
		budget: lim.budget, trimEvery: max(lim.budget/4, 1), metrics: m,
		streams: map[string]*memStream{}, sinceTrim: map[string]int64{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.run()
	return l
}

// eventMetrics count what the bounds of the event log refused or dropped.
// Shared by every runtime of a node; nil counts nothing.
type eventMetrics struct {
	unlogged prometheus.Counter
	trimmed  prometheus.Counter
}

func newEventMetrics(reg prometheus.Registerer) (*eventMetrics, error) {
	m := &eventMetrics{
		unlogged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_event_log_unlogged_total",
			Help: "SSE events not kept for resumability because they were larger than the per-event bound (delivered live; a resume from before them is refused).",
		}),
		trimmed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_event_log_trimmed_total",
			Help: "Stored SSE events dropped, oldest first, to keep a session's event log within its byte budget.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.unlogged, m.trimmed} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("mcpruntime: register event log metrics: %w", err)
			}
		}
	}
	return m, nil
}

func streamKey(session, stream string) string { return session + "\x00" + stream }

// Open implements mcp.EventStore.
func (l *eventLog) Open(_ context.Context, session, stream string) error {
	if stream == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.streams[streamKey(session, stream)]; !ok {
		l.streams[streamKey(session, stream)] = &memStream{}
	}
	return nil
}

// Append implements mcp.EventStore.
func (l *eventLog) Append(_ context.Context, session, stream string, data []byte) error {
	if stream == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("mcpruntime: event log closed")
	}
	ms, ok := l.streams[streamKey(session, stream)]
	if !ok {
		ms = &memStream{}
		l.streams[streamKey(session, stream)] = ms
	}
	if len(data) > l.maxEvent {
		// Not logged; the index is used all the same (go-sdk numbers the
		// event it delivers live).
		ms.data = append(ms.data, nil)
		ms.skipped = ms.next + 1
		ms.next++
		if l.metrics != nil {
			l.metrics.unlogged.Inc()
		}
		return nil
	}
	d := append([]byte(nil), data...)
	ms.data = append(ms.data, d)
	l.pending = append(l.pending, store.Event{Session: session, Stream: stream, Index: ms.next, Data: d})
	ms.next++
	l.bytes += len(d)
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return nil
}

// After implements mcp.EventStore.
func (l *eventLog) After(ctx context.Context, session, stream string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		if stream == "" {
			return
		}
		l.mu.Lock()
		ms, ok := l.streams[streamKey(session, stream)]
		if ok && ms.skipped > index+1 {
			l.mu.Unlock()
			yield(nil, fmt.Errorf("mcpruntime: stream %q: event %d was too large to keep: %w", stream, ms.skipped-1, mcp.ErrEventsPurged))
			return
		}
		if ok && index+1 >= ms.first {
			out := append([][]byte(nil), ms.data[max(0, index+1-ms.first):]...)
			l.mu.Unlock()
			for _, d := range out {
				if !yield(d, nil) {
					return
				}
			}
			return
		}
		l.mu.Unlock()
		if ok {
			// Trimmed from memory: everything trimmed was flushed first.
			if err := l.flush(ctx); err != nil {
				yield(nil, err)
				return
			}
		}
		data, last, err := l.st.Events(ctx, session, stream, index)
		if err != nil {
			yield(nil, err)
			return
		}
		if last < index {
			yield(nil, fmt.Errorf("mcpruntime: no events after %d in stream %q", index, stream))
			return
		}
		for _, d := range data {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements mcp.EventStore. go-sdk calls it whenever the
// server session closes, which for us includes passivation; the log must
// survive that, so events are deleted only when the session ends.
func (l *eventLog) SessionClosed(context.Context, string) error { return nil }

func (l *eventLog) run() {
	defer close(l.stopped)
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.kick:
			// Batch appends that arrive together.
			select {
			case <-l.stop:
				return
			case <-time.After(l.every):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := l.flush(ctx); err != nil {
			l.log.Warn("mcpruntime: flush event log (will retry)", "err", err)
		}
		cancel()
	}
}

// flush writes pending events, trims memory beyond maxBytes and, when a
// session wrote a quarter of its budget since its last trim, trims its
// stored events to the budget.
func (l *eventLog) flush(ctx context.Context) error {
	l.mu.Lock()
	batch := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := l.st.AppendEvents(ctx, batch); err != nil {
		l.mu.Lock()
		l.pending = append(batch, l.pending...)
		l.mu.Unlock()
		return err
	}
	l.mu.Lock()
	var trim []string
	for _, e := range batch {
		if ms, ok := l.streams[streamKey(e.Session, e.Stream)]; ok && e.Index+1 > ms.flushed {
			ms.flushed = e.Index + 1
		}
		l.sinceTrim[e.Session] += int64(len(e.Data))
	}
	for session, n := range l.sinceTrim {
		if n >= l.trimEvery {
			trim = append(trim, session)
		}
	}
	l.trimMemory()
	l.mu.Unlock()
	for _, session := range trim {
		if err := l.trim(ctx, session); err != nil {
			return err
		}
	}
	return nil
}

// trim drops the session's oldest stored events beyond its budget.
func (l *eventLog) trim(ctx context.Context, session string) error {
	l.mu.Lock()
	written := l.sinceTrim[session]
	l.mu.Unlock()
	n, err := l.st.TrimEvents(ctx, session, l.budget)
	if err != nil {
		return fmt.Errorf("mcpruntime: keep the event log within %d bytes: %w", l.budget, err)
	}
	l.mu.Lock()
	l.sinceTrim[session] -= written // what was written meanwhile waits for the next trim
	l.mu.Unlock()
	if n > 0 && l.metrics != nil {
		l.metrics.trimmed.Add(float64(n))
	}
	return nil
}

// trimMemory drops flushed events from memory beyond maxBytes. l.mu held.
func (l *eventLog) trimMemory() {
	for l.bytes > l.maxBytes {
		trimmed := false
		for _, ms := range l.streams {
			if len(ms.data) > 0 && ms.first < ms.flushed {
				l.bytes -= len(ms.data[0])
				ms.data = ms.data[1:]
				ms.first++
				trimmed = true
			}
		}
		if !trimmed {
			break
		}
	}
}

// close flushes everything and stops the writer.
func (l *eventLog) close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.stopped
	if err := l.flush(ctx); err != nil {
		return err
	}
	// A restored runtime knows nothing of what this one stored: leave the
	// session within its budget.
	l.mu.Lock()
	var sessions []string
	for session, n := range l.sinceTrim {
		if n > 0 {
			sessions = append(sessions, session)
		}
	}
	l.mu.Unlock()
	for _, session := range sessions {
		if err := l.trim(ctx, session); err != nil {
			return err
		}
	}
	return nil
}
