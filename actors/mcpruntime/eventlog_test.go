package mcpruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// alice owns the test's sessions.
var alice = &pb.Principal{User: "alice", Org: "acme"}

// testStore opens a fresh SQLite store for the test: its event log.
func testStore(t *testing.T) *eventstore.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return eventstore.New(st)
}

// testWriter is a node's event writer on st (it flushes when told to:
// its window is an hour and its groups have no bound).
func testWriter(t *testing.T, st eventStore, lim eventLimits) *eventWriter {
	t.Helper()
	w := newEventWriter(st, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Real(),
		flushPolicy{window: time.Hour, events: math.MaxInt, bytes: math.MaxInt}, lim, nil)
	t.Cleanup(func() { _ = w.close(context.Background()) })
	return w
}

func newTestLog(t *testing.T, lim eventLimits) (*eventLog, *eventstore.Store) {
	t.Helper()
	st := testStore(t)
	l := testWriter(t, st, lim).newLog("s", alice)
	t.Cleanup(func() { _ = l.close(context.Background()) })
	return l, st
}

func replay(l *eventLog, stream string, after int) ([]string, error) {
	var out []string
	for d, err := range l.After(context.Background(), "s", stream, after) {
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
	return out, nil
}

// An event over the per-event bound is not kept; its index is used, so a
// resume from before it is refused (never a replay with a hole), and one
// from after it works — from memory and from the store alike.
func TestEventLogSkipsAnEventOverTheBound(t *testing.T) {
	l, st := newTestLog(t, eventLimits{memory: 1 << 20, maxEvent: 8, budget: 1 << 20})
	ctx := context.Background()
	for _, d := range []string{"a", "b", "too-large-to-keep", "d"} {
		if err := l.Append(ctx, "s", "x", []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	for _, from := range []string{"memory", "store"} {
		// From memory the log knows why (ErrEventsPurged); the store of
		// another node sees a gap in the indices.
		if _, err := replay(l, "x", 1); err == nil || (from == "memory" && !errors.Is(err, mcp.ErrEventsPurged)) {
			t.Fatalf("%s: resume from before the skipped event: %v, want it refused", from, err)
		}
		if got, err := replay(l, "x", 2); err != nil || strings.Join(got, ",") != "d" {
			t.Fatalf("%s: resume after the skipped event: %q %v", from, got, err)
		}
		if err := l.w.flush(ctx); err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		l.streams = streamSet{} // as on another node
		l.mu.Unlock()
	}
	if data, last, err := st.Events(ctx, "s", "x", 2); err != nil || last != 3 || len(data) != 1 {
		t.Fatalf("the store after the skipped event: %q last %d %v", data, last, err)
	}
}

// A session's stored events stay within its budget: trimmed, oldest
// first, each time a quarter of it was written.
func TestEventLogTrimsTheStoreToTheSessionBudget(t *testing.T) {
	const budget = 400
	l, st := newTestLog(t, eventLimits{memory: 1 << 20, maxEvent: 64, budget: budget})
	ctx := context.Background()
	ev := []byte(strings.Repeat("e", 50))
	for i := range 40 {
		if err := l.Append(ctx, "s", "x", ev); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := l.w.flush(ctx); err != nil {
				t.Fatal(err)
			}
			if n := storedBytes(t, st); n > budget+budget/4+64 {
				t.Fatalf("after event %d the store holds %d bytes", i, n)
			}
		}
	}
	if err := l.close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := storedBytes(t, st); n > budget+budget/4+64 || n < budget-50 {
		t.Fatalf("after close the store holds %d bytes, want the newest within %d", n, budget+budget/4+64)
	}
	if data, last, err := st.Events(ctx, "s", "x", 39-budget/50); err != nil || last != 39 || len(data) != budget/50 {
		t.Fatalf("the newest events: %d, last %d, %v", len(data), last, err)
	}
}

func storedBytes(t *testing.T, st *eventstore.Store) int {
	t.Helper()
	data, _, err := st.Events(context.Background(), "s", "x", -1)
	if err == nil {
		n := 0
		for _, d := range data {
			n += len(d)
		}
		return n
	}
	// Trimmed from the front: count from the first stored index.
	for after := 0; after < 1000; after++ {
		if data, _, err := st.Events(context.Background(), "s", "x", after); err == nil {
			n := 0
			for _, d := range data {
				n += len(d)
			}
			return n
		}
	}
	t.Fatal("no readable suffix of the stream")
	return 0
}

// One writer serves every runtime of a node: their events go to the store
// in one write per flush, under each runtime's session, and a restore's
// replayed handshake is not logged.
func TestEventWriterFlushesEveryRuntimeTogether(t *testing.T) {
	st := testStore(t)
	w := testWriter(t, st, eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20})
	ctx := context.Background()
	a, b := w.newLog("A", alice), w.newLog("B", alice)
	_ = a.Append(ctx, "sdk-id-1", "x", []byte("a0"))
	_ = b.Append(ctx, "sdk-id-2", "x", []byte("b0"))
	b.muted.Store(true)
	_ = b.Append(ctx, "sdk-id-2", "replayed", []byte("not logged"))
	b.muted.Store(false)
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	for session, want := range map[string]string{"A": "a0", "B": "b0"} {
		if data, _, err := st.Events(ctx, session, "x", -1); err != nil || len(data) != 1 || string(data[0]) != want {
			t.Fatalf("%s: %q %v", session, data, err)
		}
	}
	if data, last, _ := st.Events(ctx, "B", "replayed", -1); len(data) != 0 || last != -1 {
		t.Fatalf("the muted stream was stored: %q", data)
	}
}

// trimCounter counts the store's trims.
type trimCounter struct {
	*eventstore.Store
	trims int
}

func (c *trimCounter) TrimEvents(ctx context.Context, session string, keep int64) (int64, error) {
	c.trims++
	return c.Store.TrimEvents(ctx, session, keep)
}

// Closing the runtime of a session that ended (DELETE, expiry) does not
// trim its events (they are pruned within the hour). A passivated one's
// close trims only when a quarter of the budget was written since the
// last trim — trimming reads every stored event of the session — and the
// count goes on in the next runtime (the session record carries it), so
// restores that each write a little still trim on schedule.
func TestClosingTrimsOnlyWhenDueAndTheCountCarriesOver(t *testing.T) {
	st := testStore(t)
	c := &trimCounter{Store: st}
	const budget = 400 // a trim is due every 100 bytes
	w := testWriter(t, c, eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: budget})
	ctx := context.Background()
	ended := w.newLog("ended", alice)
	_ = ended.Append(ctx, "sdk", "x", []byte(strings.Repeat("e", 30)))
	ended.ended.Store(true)
	if err := ended.close(ctx); err != nil || c.trims != 0 {
		t.Fatalf("an ended session's close: %d trims (%v), want none", c.trims, err)
	}
	// Runtimes of one session, each writing 30 bytes before it is closed:
	// the fourth close is the first with 100 bytes since the last trim.
	var carried int64
	for i := range 4 {
		l := w.newLog("s", alice)
		l.sinceTrim = carried // as Build sets it from the record
		_ = l.Append(ctx, "sdk", fmt.Sprint("stream", i), []byte(strings.Repeat("e", 30)))
		if err := l.close(ctx); err != nil {
			t.Fatal(err)
		}
		carried = l.untrimmed()
		if want := map[bool]int{true: 1, false: 0}[i == 3]; c.trims != want {
			t.Fatalf("close %d: %d trims, want %d", i, c.trims, want)
		}
		if want := map[bool]int64{true: 0, false: int64(30 * (i + 1))}[i == 3]; carried != want {
			t.Fatalf("close %d: %d untrimmed bytes carried, want %d", i, carried, want)
		}
	}
}

// A new session's initialize answer (the first stream its log opens) is
// resumable from memory but never written to the store: a restore replays
// the handshake from the record. Its later streams are stored as always.
func TestCreatedSessionsInitializeAnswerStaysInMemory(t *testing.T) {
	st := testStore(t)
	w := testWriter(t, st, eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20})
	ctx := context.Background()
	l := w.createdLog("s", alice)
	if err := l.Open(ctx, "sdk", "init"); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct{ stream, data string }{{"init", ""}, {"init", "initialize result"}, {"call", ""}, {"call", "tools/call result"}} {
		if err := l.Append(ctx, "sdk", e.stream, []byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := replay(l, "init", 0); err != nil || strings.Join(got, ",") != "initialize result" {
		t.Fatalf("resume of the initialize stream from memory: %q %v", got, err)
	}
	if err := l.close(ctx); err != nil {
		t.Fatal(err)
	}
	if data, last, _ := st.Events(ctx, "s", "init", -1); len(data) != 0 || last != -1 {
		t.Fatalf("the initialize answer was stored: %q (last %d)", data, last)
	}
	if data, last, err := st.Events(ctx, "s", "call", 0); err != nil || last != 1 || len(data) != 1 || string(data[0]) != "tools/call result" {
		t.Fatalf("the later stream (after its priming event, which is not stored): %q last %d %v", data, last, err)
	}
	// A restored session's log has no such exception: its first stream is
	// a request's, and is stored.
	r := w.newLog("r", alice)
	_ = r.Append(ctx, "sdk", "first", []byte("result"))
	if err := r.close(ctx); err != nil {
		t.Fatal(err)
	}
	if data, _, err := st.Events(ctx, "r", "first", -1); err != nil || len(data) != 1 {
		t.Fatalf("a restored session's first stream: %q %v", data, err)
	}
}

// go-sdk's priming event (empty, the first of a POST stream) is not
// stored: a resume from it is answered from memory on the same node, and
// on another node from the store as it would be with its row — the
// response when it was stored, refused when it was not. An empty event
// behind unstored ones is stored as any other (the flushed mark stays
// exact).
func TestPrimingEventIsNotStored(t *testing.T) {
	st := testStore(t)
	w := testWriter(t, st, eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20})
	ctx := context.Background()
	l := w.newLog("s", alice)
	for _, e := range []struct{ stream, data string }{{"call", ""}, {"call", "tools/call result"}, {"lost", ""}, {"busy", "progress"}, {"busy", ""}} {
		if err := l.Append(ctx, "sdk", e.stream, []byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := replay(l, "call", 0); err != nil || strings.Join(got, ",") != "tools/call result" {
		t.Fatalf("resume from the priming event, same node: %q %v", got, err)
	}
	if err := l.close(ctx); err != nil {
		t.Fatal(err)
	}
	// A client holds at least the priming event's id: reads start after it.
	if data, last, err := st.Events(ctx, "s", "call", 0); err != nil || last != 1 || strings.Join(toStrings(data), ",") != "tools/call result" {
		t.Fatalf("stored call stream: %q last %d %v (want the response alone, at index 1)", data, last, err)
	}
	if data, last, err := st.Events(ctx, "s", "busy", -1); err != nil || last != 1 || len(data) != 2 {
		t.Fatalf("stored busy stream: %q last %d %v (an empty event behind a stored one is stored)", data, last, err)
	}
	// Another node's runtime of the session: from the store.
	other := w.newLog("s", alice)
	if got, err := replay(other, "call", 0); err != nil || strings.Join(got, ",") != "tools/call result" {
		t.Fatalf("resume from the priming event, another node: %q %v", got, err)
	}
	if got, err := replay(other, "lost", 0); err == nil {
		t.Fatalf("resume of a stream whose response was never stored, another node: %q, want it refused", got)
	}
}

func toStrings(data [][]byte) []string {
	out := make([]string, len(data))
	for i, d := range data {
		out[i] = string(d)
	}
	return out
}

// Created sessions that get the same initialize answer keep one copy of
// it; a different answer (another request id, another server) is a copy
// of its own, and the caller's buffer is never kept.
func TestInitializeAnswersAreShared(t *testing.T) {
	w := testWriter(t, testStore(t), eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20})
	ctx := context.Background()
	answer := func(id, data string) []byte {
		l := w.createdLog(id, alice)
		t.Cleanup(func() { _ = l.close(ctx) })
		buf := []byte(data)
		for _, d := range [][]byte{nil, buf} { // the priming event, then the answer
			if err := l.Append(ctx, "sdk", "init", d); err != nil {
				t.Fatal(err)
			}
		}
		copy(buf, "XXXX") // go-sdk may reuse its buffer
		got, err := replay(l, "init", 0)
		if err != nil || len(got) != 1 || got[0] != data {
			t.Fatalf("%s: replay %q %v, want %q", id, got, err, data)
		}
		return l.streams.first.data[1]
	}
	a := answer("a", `{"id":1,"result":{}}`)
	b := answer("b", `{"id":1,"result":{}}`)
	c := answer("c", `{"id":2,"result":{}}`)
	d := answer("d", `{"id":1,"result":{}}`) // after another: still shared
	if &a[0] != &b[0] || &a[0] != &d[0] {
		t.Fatal("sessions with the same initialize answer keep copies of their own")
	}
	if &a[0] == &c[0] || string(c) != `{"id":2,"result":{}}` {
		t.Fatalf("a different answer shares the first one's bytes: %q", c)
	}
	// Past maxSharedAnswers distinct answers the set starts over; every
	// log keeps its own bytes all the same.
	for i := range maxSharedAnswers + 2 {
		answer(fmt.Sprintf("x%d", i), fmt.Sprintf(`{"id":%d,"result":{}}`, 100+i))
	}
	if len(w.answers.m) > maxSharedAnswers {
		t.Fatalf("%d answers kept, want at most %d", len(w.answers.m), maxSharedAnswers)
	}
	if got, _ := replay(w.createdLog("a", alice), "init", 0); len(got) != 0 {
		t.Fatalf("a new log replays another's answer: %q", got)
	}
}

// maxStreamAppendAllocs bounds the objects of a POST stream's two events
// appended to the log (the stream, the events' slice, the answer's copy,
// the stream's entry): 3 measured, 4 when the slice grew per event.
const maxStreamAppendAllocs = 3

// A tool call's stream (go-sdk's priming event, then the answer) costs
// the log one allocation for its events' slice, not one per event.
func TestEventLogStreamAppendAllocations(t *testing.T) {
	l, _ := newTestLog(t, eventLimits{memory: 1 << 30, maxEvent: 1 << 20, budget: 1 << 40})
	ctx := context.Background()
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = fmt.Sprintf("stream-%d", i)
	}
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	next := 0
	allocs := testing.AllocsPerRun(200, func() {
		id := ids[next]
		next++
		if err := l.Append(ctx, "s", id, nil); err != nil {
			t.Fatal(err)
		}
		if err := l.Append(ctx, "s", id, answer); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.1f allocations per stream of two events", allocs)
	if allocs > maxStreamAppendAllocs {
		t.Fatalf("%.1f allocations per stream of two events, want ≤ %d", allocs, maxStreamAppendAllocs)
	}
}
