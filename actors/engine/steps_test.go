package engine_test

import (
	"context"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
)

// stepLog records the durable-execution steps (transactions) a journal
// writes.
type stepLog struct {
	engine.RunStore
	mu    sync.Mutex
	steps []runstore.RunWrite
}

func (l *stepLog) WriteRun(ctx context.Context, grain string, epoch uint64, w runstore.RunWrite) error {
	l.mu.Lock()
	l.steps = append(l.steps, w)
	l.mu.Unlock()
	return l.RunStore.WriteRun(ctx, grain, epoch, w)
}

// An approval cycle is three journal steps: the pause (the journal so far,
// the run and the published directory row), the call about to be sent,
// and the settle (the call's outcome, the settled run and the directory
// row settled) — a call's outcome travels with the run's next write.
func TestAnApprovalCycleIsThreeJournalSteps(t *testing.T) {
	f := newDurableFixture(t)
	own, err := f.st.Acquire(context.Background(), "session/s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	log := &stepLog{RunStore: runstore.New(f.st)}
	set, _ := policy.New(nil)
	e := engine.New(engine.Config{Tools: f.reg, Policy: set, Clock: f.clk, ApprovalWindow: time.Minute, Session: "s1",
		Limits:  sandbox.Limits{WallTime: 10 * time.Second},
		Journal: engine.StoreJournal{Store: log, Grain: own.Grain, Epoch: own.Epoch, Publish: true}})
	t.Cleanup(e.Shutdown)
	out := e.ExecuteWithPause(context.Background(), `const l = await tools.demo.listTodos({});
		return await tools.demo.createTodo({title: "x" + l.length})`, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	id := out.Pause.ID
	done, found := e.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusCompleted {
		t.Fatalf("resume: %v %+v", found, done)
	}
	log.mu.Lock()
	steps := append([]runstore.RunWrite(nil), log.steps...)
	log.mu.Unlock()
	if len(steps) != 3 {
		t.Fatalf("%d journal steps, want 3: %+v", len(steps), steps)
	}
	pause, send, settle := steps[0], steps[1], steps[2]
	if len(pause.Entries) != 2 || pause.Run == nil || pause.Run.PauseID != id || pause.Publish == nil || pause.Publish.ID != id || pause.Publish.Org != "acme" {
		t.Fatalf("the pause step: %+v", pause)
	}
	if len(send.Entries) != 1 || send.Entries[0].State != runstore.JournalInFlight || send.Run != nil {
		t.Fatalf("the send step: %+v", send)
	}
	if len(settle.Entries) != 1 || settle.Entries[0].State != runstore.JournalDone || settle.Run == nil || settle.Run.Settled.IsZero() ||
		len(settle.Settle) != 1 || settle.Settle[0] != id {
		t.Fatalf("the settle step (the last outcomes, the run, the directory row): %+v", settle)
	}
	if row, err := directory.New(f.st).GetExecution(context.Background(), id); err != nil || row.Settled.IsZero() {
		t.Fatalf("directory row after the cycle: %+v %v", row, err)
	}
}

// waitUntil polls cond until it holds, failing after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A durable pause gives its sandbox worker back when the node has more
// parked than it keeps (the pool asks the longest parked): the pause goes
// dormant, holds no worker, and its decision re-runs the code by replay —
// the approved call is made once, the earlier one is not made again.
func TestParkedDurablePauseReleasesItsWorkerAndResumesByReplay(t *testing.T) {
	pool, err := sandbox.NewPool(sandbox.PoolOptions{MaxParked: 1, Spares: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f := newDurableFixture(t)
	e := f.activateWith(&hookLog{}, sandbox.Limits{WallTime: 10 * time.Second, Pool: pool})
	first := e.ExecuteWithPause(context.Background(), nonDeterministicCode, alice)
	if first.Status != engine.StatusPaused || e.DormantCount() != 0 {
		t.Fatalf("first: %+v, %d dormant", first, e.DormantCount())
	}
	second := e.ExecuteWithPause(context.Background(), `return await tools.demo.createTodo({title: "second"})`, alice)
	if second.Status != engine.StatusPaused {
		t.Fatalf("second: %+v", second)
	}
	waitUntil(t, "the first pause to give its worker back", func() bool {
		st := pool.Stats()
		return e.DormantCount() == 1 && st.Parked == 1 && st.Running == 0
	})
	if e.PausedCount() != 2 || e.RunningCount() != 0 {
		t.Fatalf("%d paused, %d running after the release", e.PausedCount(), e.RunningCount())
	}
	gets := f.gets.Load()
	done, found := e.Resume(context.Background(), first.Pause.ID, engine.AsOwner(alice), engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusCompleted {
		t.Fatalf("resume of the dormant pause: %v %+v", found, done)
	}
	if f.posts.Load() != 1 || f.gets.Load() != gets+1 {
		t.Fatalf("%d POSTs, %d GETs during the resume (want 1 POST and only the final GET: the first was replayed)",
			f.posts.Load(), f.gets.Load()-gets)
	}
	// The replayed run parked again on its way: over MaxParked, the other
	// pause gave its worker back in turn.
	waitUntil(t, "the second pause to go dormant", func() bool { return e.DormantCount() == 1 && pool.Stats().Parked == 0 })
	if again, found := e.Resume(context.Background(), first.Pause.ID, engine.AsOwner(alice), engine.Response{}); !found || again.Status != engine.StatusCompleted {
		t.Fatalf("replayed outcome: %v %+v", found, again)
	}
}

// A fresh activation registers its paused runs dormant: no code runs and
// no worker is taken until a decision comes, which replays the run.
func TestRestoredPausesAreDormantUntilDecided(t *testing.T) {
	pool, err := sandbox.NewPool(sandbox.PoolOptions{Spares: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	lim := sandbox.Limits{WallTime: 10 * time.Second, Pool: pool}
	f := newDurableFixture(t)
	first := f.activateWith(&hookLog{}, lim)
	out := first.ExecuteWithPause(context.Background(), nonDeterministicCode, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v", out)
	}
	first.Shutdown()
	waitUntil(t, "the shut-down activation's worker to go", func() bool { st := pool.Stats(); return st.Parked == 0 && st.Running == 0 })
	hooks := &hookLog{}
	second := f.activateWith(hooks, lim)
	run, entries := f.runOf(out.Pause.ID)
	gets := f.gets.Load()
	restored := second.RestoreDormant(run, entries)
	if restored.Status != engine.StatusPaused || restored.Pause.ID != out.Pause.ID || restored.Pause.Message != out.Pause.Message {
		t.Fatalf("restored: %+v", restored)
	}
	if second.DormantCount() != 1 || pool.Stats().Parked != 0 || pool.Stats().Running != 0 || f.gets.Load() != gets {
		t.Fatalf("a dormant restore ran code: %d dormant, pool %+v, %d GETs", second.DormantCount(), pool.Stats(), f.gets.Load()-gets)
	}
	if got := hooks.list(); len(got) != 1 || got[0] != "pause:"+out.Pause.ID {
		t.Fatalf("hooks %v, want the pause reported once", got)
	}
	if p, ok := second.Paused(out.Pause.ID, engine.AsApprover(alice)); !ok || p.Address != "demo.createTodo" {
		t.Fatalf("the dormant pause is not visible: %+v %v", p, ok)
	}
	done, found := second.Resume(context.Background(), out.Pause.ID, engine.AsOwner(alice), engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusCompleted || f.posts.Load() != 1 {
		t.Fatalf("decision of a dormant pause: %v %+v, %d POSTs", found, done, f.posts.Load())
	}
}

// gatedRuns holds the journal read of a dormant pause's replay until the
// test opens gate (once armed).
type gatedRuns struct {
	engine.RunStore
	armed   atomic.Bool
	arrived chan struct{}
	gate    chan struct{}
}

func (g *gatedRuns) RunByPause(ctx context.Context, pauseID string) (string, error) {
	if g.armed.Load() {
		g.arrived <- struct{}{}
		<-g.gate
	}
	return g.RunStore.RunByPause(ctx, pauseID)
}

// A decision for a dormant pause claims it before the replay that brings
// the pause back (a journal read, then a run that may wait for a sandbox
// slot): a second decider and a reader that come meanwhile join that
// decision. (Regression: both waited for the replay and then raced the
// first decision — a reader that asked by resuming with a cancel decided
// the pause, and the approved call was cancelled.)
func TestADecisionClaimsADormantPauseDuringItsReplay(t *testing.T) {
	f := newDurableFixture(t)
	id := f.pausedThenShutDown()
	own, err := f.st.Acquire(context.Background(), "session/s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	runs := &gatedRuns{RunStore: runstore.New(f.st), arrived: make(chan struct{}), gate: make(chan struct{})}
	set, _ := policy.New(nil)
	e := engine.New(engine.Config{Tools: f.reg, Policy: set, Clock: f.clk, ApprovalWindow: time.Minute, Session: "s1",
		Limits: sandbox.Limits{WallTime: 10 * time.Second}, Journal: engine.StoreJournal{Store: runs, Grain: own.Grain, Epoch: own.Epoch}})
	t.Cleanup(e.Shutdown)
	if r := e.RestoreDormant(f.runOf(id)); r.Status != engine.StatusPaused {
		t.Fatalf("restored: %+v", r)
	}

	type result struct {
		out   engine.Outcome
		found bool
	}
	resume := func(action string) chan result {
		ch := make(chan result, 1)
		go func() {
			o, ok := e.Resume(context.Background(), id, engine.AsOwner(alice), engine.Response{Action: action})
			ch <- result{o, ok}
		}()
		return ch
	}
	runs.armed.Store(true)
	accepted := resume(engine.Accept)
	<-runs.arrived // the replay reads the journal
	runs.armed.Store(false)
	cancelled := resume(engine.Cancel)
	read := make(chan result, 1)
	go func() {
		o, ok := e.Outcome(context.Background(), id, engine.AsOwner(alice))
		read <- result{o, ok}
	}()
	if _, ok := e.Outcome(context.Background(), id, engine.AsOwner(bob)); ok {
		t.Fatal("another user read the outcome")
	}
	select {
	case r := <-cancelled:
		t.Fatalf("a second decision returned while the first waited for its replay: %+v", r)
	case r := <-read:
		t.Fatalf("a reader returned while the decision waited for its replay: %+v", r)
	default:
	}
	close(runs.gate)

	want := <-accepted
	if !want.found || want.out.Status != engine.StatusCompleted {
		t.Fatalf("the accepted execution: %+v", want)
	}
	for name, ch := range map[string]chan result{"the cancel": cancelled, "the reader": read} {
		if r := <-ch; !r.found || r.out.Status != engine.StatusCompleted || r.out.Result.Value == nil {
			t.Fatalf("%s got %+v, want the accepted outcome", name, r)
		}
	}
	if n := f.posts.Load(); n != 1 {
		t.Fatalf("%d POSTs, want the accepted write once", n)
	}
}
