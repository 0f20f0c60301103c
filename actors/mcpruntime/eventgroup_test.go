package mcpruntime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// commitRecorder is the real (SQLite) event store, recording each write
// of the writer: the events of each group it committed, in order, and a
// signal per commit (the writer commits on its own goroutine).
type commitRecorder struct {
	*eventstore.Store
	mu      sync.Mutex
	groups  [][]eventstore.Event
	commits chan struct{}
}

func newCommitRecorder(t *testing.T) *commitRecorder {
	return &commitRecorder{Store: testStore(t), commits: make(chan struct{}, 64)}
}

func (r *commitRecorder) AppendEvents(ctx context.Context, events []eventstore.Event) ([]eventstore.EventBytes, error) {
	totals, err := r.Store.AppendEvents(ctx, events)
	r.mu.Lock()
	r.groups = append(r.groups, append([]eventstore.Event(nil), events...))
	r.mu.Unlock()
	r.commits <- struct{}{}
	return totals, err
}

// committed is the number of events of each group committed so far.
func (r *commitRecorder) committed() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n []int
	for _, g := range r.groups {
		n = append(n, len(g))
	}
	return n
}

// awaitCommit waits for the writer's next commit (bound: 10 s, far past
// a SQLite write; the writer is woken, not timed, so there is no sleep).
func (r *commitRecorder) awaitCommit(t *testing.T) {
	t.Helper()
	select {
	case <-r.commits:
	case <-time.After(10 * time.Second):
		t.Fatalf("no commit after 10s; committed so far: %v", r.committed())
	}
}

// groupWriter is a writer on r with a fake clock and policy p.
func groupWriter(t *testing.T, r *commitRecorder, p flushPolicy) (*eventWriter, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	w := newEventWriter(r, slog.New(slog.NewTextHandler(io.Discard, nil)), clk, p,
		eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20}, nil)
	t.Cleanup(func() { _ = w.close(context.Background()) })
	return w, clk
}

// appendCalls appends the response of n warm calls to l (one event on a
// stream of its own each, as go-sdk's POST streams).
func appendCalls(t *testing.T, l *eventLog, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := l.Append(context.Background(), "sdk", "call-"+string(rune('a'+i)), []byte("response")); err != nil {
			t.Fatal(err)
		}
	}
}

// The events of the calls within one window are committed together,
// when the window ends and not before; the window opens with the group's
// first event and is not extended by later ones, so no event waits
// longer than the window.
func TestEventWriterCommitsAWindowsCallsTogether(t *testing.T) {
	const window = 5 * time.Millisecond
	r := newCommitRecorder(t)
	w, clk := groupWriter(t, r, flushPolicy{window: window, events: math.MaxInt, bytes: math.MaxInt})
	l := w.newLog("s", alice)
	appendCalls(t, l, 0, 3)
	clk.Advance(window / 2)
	appendCalls(t, l, 3, 2) // joins the open group
	clk.Advance(window/2 - time.Nanosecond)
	if got := r.committed(); len(got) != 0 {
		t.Fatalf("committed %v before the window ended", got)
	}
	clk.Advance(time.Nanosecond) // the first event's window ends
	r.awaitCommit(t)
	appendCalls(t, l, 5, 1) // opens the next group
	clk.Advance(window)
	r.awaitCommit(t)
	if got := r.committed(); len(got) != 2 || got[0] != 5 || got[1] != 1 {
		t.Fatalf("committed groups of %v events, want [5 1]", got)
	}
	if data, _, err := r.Events(context.Background(), "s", "call-e", -1); err != nil || len(data) != 1 {
		t.Fatalf("a call of the first group is not in the store: %q %v", data, err)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d windows armed with nothing pending", clk.Pending())
	}
}

// A group that reaches its bound of events, or of bytes, is committed at
// once, without waiting for its window.
func TestEventWriterCommitsAFullGroupAtOnce(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy flushPolicy
	}{
		{"events", flushPolicy{window: time.Hour, events: 4, bytes: math.MaxInt}},
		{"bytes", flushPolicy{window: time.Hour, events: math.MaxInt, bytes: 4 * len("response")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newCommitRecorder(t)
			w, _ := groupWriter(t, r, c.policy)
			l := w.newLog("s", alice)
			appendCalls(t, l, 0, 4)
			r.awaitCommit(t) // the clock never moved
			appendCalls(t, l, 4, 1)
			if got := r.committed(); len(got) != 1 || got[0] != 4 {
				t.Fatalf("committed groups of %v events, want [4]", got)
			}
		})
	}
}

// A runtime's close (a clean passivation) commits what is pending at
// once, whatever is left of the window, and the writer's close too.
func TestEventWriterCommitsAtCloseWithoutTheWindow(t *testing.T) {
	r := newCommitRecorder(t)
	w, clk := groupWriter(t, r, flushPolicy{window: time.Hour, events: math.MaxInt, bytes: math.MaxInt})
	l := w.newLog("s", alice)
	appendCalls(t, l, 0, 2)
	if err := l.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.committed(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("close committed groups of %v events, want [2]", got)
	}
	if clk.Pending() != 0 {
		t.Fatalf("the committed group's window is still armed")
	}
	other := w.newLog("t", alice)
	appendCalls(t, other, 0, 1)
	if err := w.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.committed(); len(got) != 2 || got[1] != 1 {
		t.Fatalf("the writer's close committed groups of %v events, want [2 1]", got)
	}
}

// A failed commit keeps its events and tries again when a new window
// ends — not at once for every event of a full group (a store that fails
// fast would be hammered).
func TestEventWriterRetriesAFailedCommitAfterAWindow(t *testing.T) {
	r := newCommitRecorder(t)
	fail := &failingStore{commitRecorder: r}
	fail.fail.Store(true)
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	w := newEventWriter(fail, slog.New(slog.NewTextHandler(io.Discard, nil)), clk,
		flushPolicy{window: time.Second, events: 2, bytes: math.MaxInt}, eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20}, nil)
	t.Cleanup(func() { _ = w.close(context.Background()) })
	l := w.newLog("s", alice)
	appendCalls(t, l, 0, 2) // full: committed at once, and fails
	r.awaitCommit(t)
	appendCalls(t, l, 2, 3) // full again, but the retry waits for the window
	if got := r.committed(); len(got) != 1 {
		t.Fatalf("commits %v: a full group was retried before its window", got)
	}
	fail.fail.Store(false)
	clk.Advance(time.Second)
	r.awaitCommit(t)
	if got := r.committed(); len(got) != 2 || got[0] != 2 || got[1] != 5 {
		t.Fatalf("commits of %v events, want [2 5]: the failed 2, then all 5", got)
	}
	if data, _, err := r.Events(context.Background(), "s", "call-a", -1); err != nil || len(data) != 1 {
		t.Fatalf("the failed commit's event is not in the store after the retry: %q %v", data, err)
	}
}

// failingStore fails the writer's commits while fail is set, recording
// each attempt (a mock of the store's failure: a real store that fails
// on demand and then recovers is not at hand).
type failingStore struct {
	*commitRecorder
	fail atomic.Bool
}

func (f *failingStore) AppendEvents(ctx context.Context, events []eventstore.Event) ([]eventstore.EventBytes, error) {
	if !f.fail.Load() {
		return f.commitRecorder.AppendEvents(ctx, events)
	}
	f.mu.Lock()
	f.groups = append(f.groups, append([]eventstore.Event(nil), events...))
	f.mu.Unlock()
	f.commits <- struct{}{}
	return nil, errors.New("store down")
}

func TestFlushPolicyFull(t *testing.T) {
	p := flushPolicy{window: time.Millisecond, events: 3, bytes: 100}
	for _, c := range []struct {
		n, size int
		want    bool
	}{{1, 10, false}, {2, 99, false}, {3, 0, true}, {1, 100, true}, {5, 500, true}} {
		if got := p.full(c.n, c.size); got != c.want {
			t.Errorf("full(%d, %d) = %v, want %v", c.n, c.size, got, c.want)
		}
	}
}
