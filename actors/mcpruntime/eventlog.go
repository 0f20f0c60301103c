package mcpruntime

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// eventLog is the go-sdk EventStore of one session runtime: SSE events are
// kept in memory and written behind to the store by the node's
// [eventWriter], so a client can resume a dropped stream with
// Last-Event-ID on this node (from memory) or on any other node after the
// session moved (from the store). Events are stored under the grain's
// session id (go-sdk names the session by its own id, different in every
// runtime incarnation; the events must outlive the incarnation).
//
// The standalone GET stream (id "") is not logged: go-sdk numbers its
// events from 0 again in every runtime incarnation, so its indices would
// collide across restores. Its notifications are not replayed after a
// dropped GET; responses to requests (POST streams, random ids) are.
// Neither are the answers to the handshake a restore replays (mute).
// The answer to a new session's initialize is kept in memory only
// (createdLog): a restore replays the handshake from the session record
// anyway, so a stored copy would only serve a client resuming its
// initialize stream on another node after losing the answer, and such a
// client re-initializes instead. Not writing it saves two rows per
// created session.
//
// Write-behind means the events of the last window ([flushPolicy]: the
// flush interval, 10 ms by default) can be lost if the node dies without
// a clean shutdown; a clean passivation flushes everything first.
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
//     oldest are dropped (eventstore.Store.TrimEvents). Clients resume within
//     seconds, so old streams are the ones nobody asks for. The count
//     goes on across restores (session.Runtime.UntrimmedEventBytes: the session record
//     carries it), so the store holds at most budget + budget/4 +
//     maxEvent bytes of the session's events, plus what runtimes that
//     died without a clean close wrote since the last trim (at most that
//     again per lost runtime, until the next trim). Trimming reads every
//     stored event of the session, so it is not done on every close;
//   - what all the sessions of one principal store together is kept
//     within the principal budget, and what the store keeps for every
//     session of every node within the store budget (see [eventWriter]).
type eventLog struct {
	w         *eventWriter
	session   string
	org, user string      // the principal that owns the session
	muted     atomic.Bool // a restore replays the handshake: nothing to log
	ended     atomic.Bool // the session ended: its events are pruned, not trimmed

	mu sync.Mutex
	// handshake is set on the log of a session being created: the first
	// stream opened (initialize's answer) is kept in memory, not stored.
	// (Set before the log is shared; with closed, next to mu so that the
	// log stays in the 128-byte size class: issue 29.)
	handshake bool
	closed    bool
	streams   streamSet // by stream id
	bytes     int       // of event data kept in memory
	sinceTrim int64     // bytes stored since the last trim
}

type memStream struct {
	local   bool     // kept in memory only (a new session's initialize answer)
	first   int      // index of data[0]
	data    [][]byte // events first.. (trimmed from the front once flushed; nil for a skipped one)
	next    int      // next index to assign
	flushed int      // events with index < flushed are in the store
	skipped int      // 1 + the highest index not logged (too large); 0: none
}

// eventLimits bound what the log keeps (see [eventLog], [eventWriter]).
type eventLimits struct {
	memory    int   // bytes kept in memory per runtime
	maxEvent  int   // larger events are not logged
	budget    int64 // bytes stored per session
	principal int64 // bytes stored per principal, all its sessions (0: no bound)
	stored    int64 // bytes stored in all, every node sharing the store (0: no bound)
}

// newLog is the log of session, owned by p.
func (w *eventWriter) newLog(session string, p *pb.Principal) *eventLog {
	return &eventLog{w: w, session: session, org: p.GetOrg(), user: p.GetUser()}
}

// streamSet is a log's streams by id. Most sessions open one stream
// (initialize's answer; then JSON answers, which go-sdk does not log),
// so the first is held inline and a map made only for a second: a map
// of one entry costs a resident session ~0.25 KB.
type streamSet struct {
	firstID string
	first   *memStream
	more    map[string]*memStream
}

func (s *streamSet) get(id string) (*memStream, bool) {
	if s.first != nil && s.firstID == id {
		return s.first, true
	}
	ms, ok := s.more[id]
	return ms, ok
}

func (s *streamSet) put(id string, ms *memStream) {
	if s.first == nil {
		s.firstID, s.first = id, ms
		return
	}
	if s.more == nil {
		s.more = map[string]*memStream{}
	}
	s.more[id] = ms
}

// each calls f for every stream (the first first, then the others in
// the map's order).
func (s *streamSet) each(f func(*memStream)) {
	if s.first != nil {
		f(s.first)
	}
	for _, ms := range s.more {
		f(ms)
	}
}

// createdLog is the log of a session being created (see [eventLog]).
func (w *eventWriter) createdLog(session string, p *pb.Principal) *eventLog {
	l := w.newLog(session, p)
	l.handshake = true
	return l
}

// stream returns the entry of a stream, creating it (l.mu held): the
// first one a created session opens is its initialize answer's.
func (l *eventLog) stream(id string) *memStream {
	ms, ok := l.streams.get(id)
	if !ok {
		ms = &memStream{local: l.handshake}
		l.handshake = false
		l.streams.put(id, ms)
	}
	return ms
}

// eventMetrics count what the bounds of the event log refused or dropped,
// and report what the store keeps. Shared by every runtime of a node; nil
// counts nothing.
type eventMetrics struct {
	unlogged prometheus.Counter
	trimmed  *prometheus.CounterVec // by budget: session, principal, store
}

// Budgets of the event log, the values of the trimmed counter's label.
const (
	budgetSession   = "session"
	budgetPrincipal = "principal"
	budgetStore     = "store"
)

// eventStore is the part of the event log (eventstore.Store) the
// runtimes of a node use.
type eventStore interface {
	AppendEvents(ctx context.Context, events []eventstore.Event) ([]eventstore.EventBytes, error)
	Events(ctx context.Context, session, stream string, after int) (data [][]byte, last int, err error)
	TrimEvents(ctx context.Context, session string, keepBytes int64) (int64, error)
	TrimPrincipalEvents(ctx context.Context, org, user string, keepBytes int64) (int64, error)
	TrimStoredEvents(ctx context.Context, keepBytes int64) (int64, error)
	EventUsage(ctx context.Context) (eventstore.EventUsage, error)
}

func newEventMetrics(reg prometheus.Registerer, st eventStore, log *slog.Logger) (*eventMetrics, error) {
	m := &eventMetrics{
		unlogged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_event_log_unlogged_total",
			Help: "SSE events not kept for resumability because they were larger than the per-event bound (delivered live; a resume from before them is refused).",
		}),
		trimmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_event_log_trimmed_total",
			Help: "Stored SSE events dropped, oldest first, to keep the event log within a byte budget: a session's, a principal's (all its sessions), or the store's.",
		}, []string{"budget"}),
	}
	for _, b := range []string{budgetSession, budgetPrincipal, budgetStore} {
		m.trimmed.WithLabelValues(b)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.unlogged, m.trimmed, newUsageCollector(st, log)} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("mcpruntime: register event log metrics: %w", err)
			}
		}
	}
	return m, nil
}

// trimmedBy counts n events dropped to keep budget.
func (m *eventMetrics) trimmedBy(budget string, n int64) {
	if m != nil && n > 0 {
		m.trimmed.WithLabelValues(budget).Add(float64(n))
	}
}

// usageCollector reports what the store keeps of the event log, read from
// the store at each scrape (one small query: the store counts each
// principal's bytes). No label names a principal: the largest one's bytes
// stand for all of them.
type usageCollector struct {
	st                         eventStore
	log                        *slog.Logger
	bytes, principals, largest *prometheus.Desc
}

func newUsageCollector(st eventStore, log *slog.Logger) *usageCollector {
	return &usageCollector{st: st, log: log,
		bytes: prometheus.NewDesc("mcpgrain_event_log_stored_bytes",
			"Bytes of SSE event data the store keeps for resumability: every session of every node that shares the store.", nil, nil),
		principals: prometheus.NewDesc("mcpgrain_event_log_principals",
			"Principals with SSE events in the store.", nil, nil),
		largest: prometheus.NewDesc("mcpgrain_event_log_principal_max_bytes",
			"Bytes of SSE event data the principal that keeps the most keeps (all its sessions).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.bytes
	ch <- c.principals
	ch <- c.largest
}

// Collect implements prometheus.Collector. A store that does not answer
// leaves the three out of the scrape.
func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u, err := c.st.EventUsage(ctx)
	if err != nil {
		c.log.Warn("mcpruntime: read the event log's usage for the metrics", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(u.Bytes))
	ch <- prometheus.MustNewConstMetric(c.principals, prometheus.GaugeValue, float64(u.Principals))
	ch <- prometheus.MustNewConstMetric(c.largest, prometheus.GaugeValue, float64(u.LargestPrincipal))
}

// Open implements mcp.EventStore.
func (l *eventLog) Open(_ context.Context, _, stream string) error {
	if stream == "" || l.muted.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stream(stream)
	return nil
}

// Append implements mcp.EventStore.
func (l *eventLog) Append(_ context.Context, _, stream string, data []byte) error {
	if stream == "" || l.muted.Load() {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errors.New("mcpruntime: event log closed")
	}
	ms := l.stream(stream)
	if cap(ms.data) == 0 {
		// Room for a POST stream's two events (from 2025-11-25 on: the
		// priming event and the answer) in one allocation, not two.
		ms.data = make([][]byte, 0, 2)
	}
	if len(data) > l.w.lim.maxEvent {
		// Not logged; the index is used all the same (go-sdk numbers the
		// event it delivers live).
		ms.data = append(ms.data, nil)
		ms.skipped = ms.next + 1
		ms.next++
		l.mu.Unlock()
		if m := l.w.metrics; m != nil {
			m.unlogged.Inc()
		}
		return nil
	}
	var d []byte
	if ms.local {
		d = l.w.shared(data)
	} else {
		d = append([]byte(nil), data...)
	}
	ms.data = append(ms.data, d)
	idx := ms.next
	ms.next++
	l.bytes += len(d)
	if ms.local || (len(d) == 0 && idx == ms.flushed) {
		// Kept in memory only: a created session's initialize answer, or
		// an empty event with everything before it stored — go-sdk's
		// priming event, the first of every POST stream from 2025-11-25
		// on (half the rows of a tool call's stream). go-sdk replays no
		// empty event, and a resume from it on another node gets the
		// same answer with or without its row: the response's row if it
		// was stored, else the gateway's retryable restart error (no row
		// at all: the replay is refused; the priming row alone: the
		// replay ends without the response).
		ms.flushed = ms.next // as good as stored: memory may drop it
		l.trimMemory()
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	l.w.add(l, eventstore.Event{Session: l.session, Stream: stream, Index: idx, Data: d, Org: l.org, User: l.user})
	return nil
}

// After implements mcp.EventStore.
func (l *eventLog) After(ctx context.Context, _, stream string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		if stream == "" {
			return
		}
		l.mu.Lock()
		ms, ok := l.streams.get(stream)
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
			if err := l.w.flush(ctx); err != nil {
				yield(nil, err)
				return
			}
		}
		data, last, err := l.w.st.Events(ctx, l.session, stream, index)
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

// flushed records that ev is in the store: memory beyond the bound can
// go, and it reports whether the session wrote a quarter of its budget
// since its last trim.
func (l *eventLog) flushed(ev eventstore.Event) (trim bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ms, ok := l.streams.get(ev.Stream); ok && ev.Index+1 > ms.flushed {
		ms.flushed = ev.Index + 1
	}
	l.sinceTrim += int64(len(ev.Data))
	l.trimMemory()
	return l.dueForTrim()
}

// dueForTrim reports that a quarter of the budget was written since the
// last trim (l.mu held).
func (l *eventLog) dueForTrim() bool { return l.sinceTrim >= max(l.w.lim.budget/4, 1) }

// untrimmed is what was stored since the last trim, this runtime's
// predecessors included.
func (l *eventLog) untrimmed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sinceTrim
}

// trimMemory drops flushed events from memory beyond the bound (a stream's
// entry stays: it numbers the stream's events, and go-sdk never says a
// stream is over). l.mu held.
func (l *eventLog) trimMemory() {
	for l.bytes > l.w.lim.memory {
		trimmed := false
		l.streams.each(func(ms *memStream) {
			if len(ms.data) > 0 && ms.first < ms.flushed {
				l.bytes -= len(ms.data[0])
				ms.data = ms.data[1:]
				ms.first++
				trimmed = true
			}
		})
		if !trimmed {
			break
		}
	}
}

// trim drops the session's oldest stored events beyond its budget.
func (l *eventLog) trim(ctx context.Context) error {
	l.mu.Lock()
	written := l.sinceTrim
	l.mu.Unlock()
	n, err := l.w.st.TrimEvents(ctx, l.session, l.w.lim.budget)
	if err != nil {
		return fmt.Errorf("mcpruntime: keep the event log of %s within %d bytes: %w", l.session, l.w.lim.budget, err)
	}
	l.mu.Lock()
	l.sinceTrim -= written // what was written meanwhile waits for the next trim
	l.mu.Unlock()
	l.w.metrics.trimmedBy(budgetSession, n)
	return nil
}

// close flushes what the log holds, and trims it if it is due (see
// [eventLog]: the count goes on in the next runtime).
func (l *eventLog) close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	if err := l.w.flush(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	due := l.dueForTrim()
	l.mu.Unlock()
	if due && !l.ended.Load() {
		return l.trim(ctx)
	}
	return nil
}

// eventWriter writes the event logs of all the session runtimes of a node
// behind, in groups ([flushPolicy]): one goroutine and one store write per
// group for the whole node (a goroutine and a ticker per resident
// runtime cost a million wake-ups a second with 10,000 resident), so the
// sequential calls of a window share one transaction.
//
// After each flush it keeps the budgets that span sessions, from what the
// store counts (the store is the source of truth: every node of a
// cluster writes into it, and it counts each principal's bytes in the
// transaction that stores or drops events):
//
//   - a principal the flush left over its budget (the store returns the
//     principal's bytes with the write) is trimmed, oldest events first
//     whichever of its sessions they belong to, to seven eighths of the
//     budget (store.TrimPrincipalEvents), so trims come once per eighth of
//     the budget written, not once per flush. A principal keeps at most
//     its budget, plus what flushes of other nodes add before their own
//     trims (each trims right after its flush);
//   - each time this node has written a thirty-second of the store budget
//     since it last looked, it reads what the store keeps
//     (eventstore.EventUsage) and, if that is over the budget, trims the
//     oldest events of the store, whoever owns them, to seven eighths of
//     it (store.TrimStoredEvents). The store keeps at most its budget plus
//     a thirty-second of it per node (and one flush).
//
// Trimming drops replay history only: the live answer went out as it
// was written. A client resuming a stream from before the dropped events
// is answered from the runtime's memory if it still holds them, else the
// store reports the gap, the replay is refused, and the gateway answers
// the stream's request with its retryable error (as for the per-session
// budget).
type eventWriter struct {
	st      eventStore
	log     *slog.Logger
	clk     clock.Clock
	policy  flushPolicy
	lim     eventLimits
	metrics *eventMetrics

	mu           sync.Mutex
	pending      []pendingEvent
	pendingBytes int         // of the pending events' data
	window       clock.Timer // the pending events' window (nil: none armed)
	gen          uint64      // of window: a window that ended after its flush is ignored
	retrying     bool        // the last commit failed: a full group waits for its window too

	flushMu    sync.Mutex // one flush at a time: the writer's and callers' (After, close)
	sinceCheck int64      // bytes flushed since the store's usage was last read (flushMu held)
	kick       chan struct{}
	stop       chan struct{}
	stopped    chan struct{}

	// answers are the initialize answers created sessions' logs keep
	// (see [eventWriter.shared]).
	answers answerSet
}

// flushPolicy is when the writer commits the events it gathered (a group
// commit: every session of the node in one store write). The first event
// of a group opens its window; the group is committed when the window
// ends — not later: events that arrive meanwhile join it without
// extending it, so no event waits longer than the window — or at once
// when it holds events events or bytes bytes of data, whichever comes
// first. A runtime's close (passivation) and a resume that needs the
// store commit at once.
type flushPolicy struct {
	window time.Duration
	events int
	bytes  int
}

// Defaults of the writer's group commit (Config.EventFlushInterval and
// the bounds of one group).
const (
	// DefaultEventFlushInterval is the window of a group of events: what
	// a node killed without a clean shutdown may lose at most.
	DefaultEventFlushInterval = 10 * time.Millisecond
	// maxGroupEvents and maxGroupBytes bound one group (a busy node
	// commits before the window ends): four INSERTs of 64 events, and
	// what the store's one write holds.
	maxGroupEvents = 256
	maxGroupBytes  = 1 << 20
)

// full reports whether a group of n events holding size bytes of data
// is committed now, without waiting for its window to end.
func (p flushPolicy) full(n, size int) bool { return n >= p.events || size >= p.bytes }

// maxSharedAnswers bounds the distinct initialize answers a node shares;
// past it the set starts over (those kept stay with their logs).
const maxSharedAnswers = 16

// answerSet holds one copy of each initialize answer a node gave.
type answerSet struct {
	mu sync.Mutex
	m  map[string][]byte
}

// shared returns a copy of data, or the copy kept of the same bytes (an
// empty event is nil): the sessions of a node get few distinct initialize
// answers (the server's name, version, capabilities and instructions,
// the negotiated protocol version and the client's request id: a
// client's first request, most often 0 or 1), and each resident session
// kept a copy of its own (~0.45 KB). The events a log keeps are never
// written to, so one copy serves them all.
func (w *eventWriter) shared(data []byte) []byte {
	if len(data) == 0 {
		return nil // go-sdk's priming event: nothing to keep
	}
	a := &w.answers
	a.mu.Lock()
	defer a.mu.Unlock()
	if d, ok := a.m[string(data)]; ok {
		return d
	}
	if a.m == nil || len(a.m) >= maxSharedAnswers {
		a.m = make(map[string][]byte, 4)
	}
	d := append([]byte(nil), data...)
	a.m[string(d)] = d
	return d
}

type pendingEvent struct {
	log *eventLog
	ev  eventstore.Event
}

func newEventWriter(st eventStore, log *slog.Logger, clk clock.Clock, policy flushPolicy, lim eventLimits, m *eventMetrics) *eventWriter {
	w := &eventWriter{st: st, log: log, clk: clk, policy: policy, lim: lim, metrics: m,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go w.run()
	return w
}

// add queues an event for its group's commit: it opens the group's
// window if it is the first, or asks for the commit at once if it fills
// the group.
func (w *eventWriter) add(l *eventLog, ev eventstore.Event) {
	w.mu.Lock()
	w.pending = append(w.pending, pendingEvent{l, ev})
	w.pendingBytes += len(ev.Data)
	full := !w.retrying && w.policy.full(len(w.pending), w.pendingBytes)
	if !full {
		w.openWindow()
	}
	w.mu.Unlock()
	if full {
		w.commitNow()
	}
}

// openWindow arms the window of the pending events unless one is armed
// (w.mu held).
func (w *eventWriter) openWindow() {
	if w.window != nil {
		return
	}
	w.gen++
	gen := w.gen
	w.window = w.clk.AfterFunc(w.policy.window, func() { w.windowEnded(gen) })
}

// windowEnded asks for the commit of the group whose window ended, if
// it was not committed meanwhile.
func (w *eventWriter) windowEnded(gen uint64) {
	w.mu.Lock()
	current := w.window != nil && w.gen == gen
	w.mu.Unlock()
	if current {
		w.commitNow()
	}
}

// commitNow wakes the writer goroutine to commit the pending events.
func (w *eventWriter) commitNow() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run commits each group when it is due. A failed commit keeps its
// events pending and is tried again when a new window ends.
func (w *eventWriter) run() {
	defer close(w.stopped)
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.flush(ctx); err != nil {
			w.log.Warn("mcpruntime: flush the event log (will retry)", "err", err)
		}
		cancel()
	}
}

// take takes the pending events for a commit, closing their window.
func (w *eventWriter) take() []pendingEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	batch := w.pending
	w.pending, w.pendingBytes, w.retrying = nil, 0, false
	if w.window != nil {
		w.window.Stop()
		w.window = nil
	}
	return batch
}

// putBack returns the events of a failed commit to the front of the
// pending ones, to be committed when a new window ends (not at once when
// the group is full: a store that fails fast would be retried for every
// event).
func (w *eventWriter) putBack(batch []pendingEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending, w.retrying = append(batch, w.pending...), true
	for _, p := range batch {
		w.pendingBytes += len(p.ev.Data)
	}
	w.openWindow()
}

// flush writes every pending event of the node, then keeps the budgets:
// the sessions that wrote a quarter of theirs since their last trim, the
// principals the flush left over theirs, and the store's.
func (w *eventWriter) flush(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	batch := w.take()
	if len(batch) == 0 {
		return nil
	}
	events := make([]eventstore.Event, len(batch))
	var written int64
	for i, p := range batch {
		events[i] = p.ev
		written += int64(len(p.ev.Data))
	}
	totals, err := w.st.AppendEvents(ctx, events)
	if err != nil {
		w.putBack(batch)
		return err
	}
	var trim []*eventLog
	seen := map[*eventLog]bool{}
	for _, p := range batch {
		if p.log.flushed(p.ev) && !seen[p.log] {
			seen[p.log] = true
			trim = append(trim, p.log)
		}
	}
	var errs []error
	for _, l := range trim {
		errs = append(errs, l.trim(ctx))
	}
	for _, p := range overBudget(totals, w.lim.principal) {
		n, err := w.st.TrimPrincipalEvents(ctx, p.Org, p.User, trimTarget(w.lim.principal))
		w.metrics.trimmedBy(budgetPrincipal, n)
		errs = append(errs, err)
	}
	w.sinceCheck += written
	if storeCheckDue(w.sinceCheck, w.lim.stored) {
		w.sinceCheck = 0
		errs = append(errs, w.trimStore(ctx))
	}
	return errors.Join(errs...)
}

// trimStore trims the store to its budget if it keeps more.
func (w *eventWriter) trimStore(ctx context.Context) error {
	u, err := w.st.EventUsage(ctx)
	if err != nil {
		return fmt.Errorf("mcpruntime: keep the stored events within %d bytes: %w", w.lim.stored, err)
	}
	if u.Bytes <= w.lim.stored {
		return nil
	}
	n, err := w.st.TrimStoredEvents(ctx, trimTarget(w.lim.stored))
	w.metrics.trimmedBy(budgetStore, n)
	return err
}

// overBudget returns the principals of totals that keep more than budget
// (none if budget is 0: no bound).
func overBudget(totals []eventstore.EventBytes, budget int64) []eventstore.EventBytes {
	var over []eventstore.EventBytes
	for _, t := range totals {
		if budget > 0 && t.Bytes > budget {
			over = append(over, t)
		}
	}
	return over
}

// trimTarget is what a trim to keep budget leaves: seven eighths of it,
// so the next trim comes after an eighth of the budget was written.
func trimTarget(budget int64) int64 { return budget - budget/8 }

// storeCheckDue reports whether, written bytes flushed since the store's
// usage was last read, it is time to read it again: every thirty-second
// of the store budget (never if budget is 0: no bound).
func storeCheckDue(written, budget int64) bool { return budget > 0 && written >= max(budget/32, 1) }

// close stops the writer after a last flush.
func (w *eventWriter) close(ctx context.Context) error {
	select {
	case <-w.stop:
		return nil
	default:
	}
	close(w.stop)
	<-w.stopped
	return w.flush(ctx)
}
