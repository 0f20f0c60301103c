package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// durableFixture is a real demo API over HTTP (counting requests by
// method), a real SQLite store, and engines that stand for successive
// activations of session "s1".
type durableFixture struct {
	api       *demo.API
	postGate  chan struct{} // if set, a POST waits for it (or for its request to end)
	postSeen  chan struct{} // if set, told when a POST arrives
	postCut   chan struct{} // if set, told when a gated POST's client gave up
	gets      atomic.Int32
	posts     atomic.Int32
	headers   sync.Map // method → the last request's http.Header
	reg       *tools.Registry
	st        store.Store
	clk       *clock.Fake
	testingTB testing.TB
}

func newDurableFixture(t testing.TB) *durableFixture {
	t.Helper()
	f := &durableFixture{api: demo.NewAPI(), clk: clock.NewFake(time.UnixMilli(2_000_000_000_000)), testingTB: t}
	h := f.api.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.headers.Store(r.Method, r.Header.Clone())
		if r.Method == http.MethodGet {
			f.gets.Add(1)
		} else {
			f.posts.Add(1)
			if f.postSeen != nil {
				f.postSeen <- struct{}{}
			}
			if f.postGate != nil {
				// Read the body first: the server notices a client that
				// gives up only once the body is consumed.
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				select {
				case <-f.postGate:
				case <-r.Context().Done():
					if f.postCut != nil {
						f.postCut <- struct{}{}
					}
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	spec := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(spec, f.api.Spec(ts.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := openapi.Load(context.Background(), openapi.Options{Name: "demo", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if f.reg, err = tools.NewRegistry(src); err != nil {
		t.Fatal(err)
	}
	if f.st, err = store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.st.Close() })
	return f
}

// activate is a new activation of the session: a new epoch and engine.
func (f *durableFixture) activate(hooks engine.Hooks) *engine.Engine {
	return f.activateWith(hooks, sandbox.Limits{WallTime: 10 * time.Second})
}

func (f *durableFixture) activateWith(hooks engine.Hooks, lim sandbox.Limits) *engine.Engine {
	t := f.testingTB
	t.Helper()
	own, err := f.st.Acquire(context.Background(), "session/s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	set, _ := policy.New(nil)
	e := engine.New(engine.Config{Tools: f.reg, Policy: set, Hooks: hooks, Clock: f.clk, ApprovalWindow: time.Minute,
		Limits: lim, Session: "s1",
		Journal: engine.StoreJournal{Store: runstore.New(f.st), Grain: own.Grain, Epoch: own.Epoch}})
	t.Cleanup(e.Shutdown)
	return e
}

// pausedThenShutDown runs nonDeterministicCode to its pause in an
// activation that then shuts down (its pause left journaled), and returns
// the pause's id.
func (f *durableFixture) pausedThenShutDown() string {
	t := f.testingTB
	t.Helper()
	first := f.activate(&hookLog{})
	out := first.ExecuteWithPause(context.Background(), nonDeterministicCode, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	first.Shutdown()
	return out.Pause.ID
}

// restoreAll restores every paused run of the session into e.
func (f *durableFixture) restoreAll(e *engine.Engine) []engine.Outcome {
	t := f.testingTB
	t.Helper()
	runs, err := runstore.New(f.st).PausedRuns(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	var outs []engine.Outcome
	for _, r := range runs {
		run, entries, err := runstore.New(f.st).GetRun(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, e.Restore(run, entries))
	}
	return outs
}

// nonDeterministicCode observes everything replay must reproduce: a read,
// Math.random, the clock, emits and logs, then pauses on a write.
const nonDeterministicCode = `
	const before = await tools.demo.listTodos({});
	const r = Math.random();
	const d = Date.now();
	emit({r});
	console.log("seen", before.length);
	const t = await tools.demo.createTodo({title: "ship " + r});
	const after = await tools.demo.listTodos({});
	return {r, d, same: t.title === "ship " + r, count: after.length, now: Date.now()}`

func TestDurablePauseIsRestoredByReplayOnANewActivation(t *testing.T) {
	f := newDurableFixture(t)
	first := f.activate(&hookLog{})
	out := first.ExecuteWithPause(context.Background(), nonDeterministicCode, alice)
	if out.Status != engine.StatusPaused || !first.IsDurable(out.Pause.ID) || first.DurablePausedCount() != 1 {
		t.Fatalf("outcome %+v, want a durable pause", out)
	}
	id := out.Pause.ID
	if f.gets.Load() != 1 || f.posts.Load() != 0 {
		t.Fatalf("before the pause: %d GETs %d POSTs", f.gets.Load(), f.posts.Load())
	}
	// The runtime goes away (passivation): the durable pause is left as is.
	first.Shutdown()
	f.clk.Advance(10 * time.Second)

	hooks := &hookLog{}
	second := f.activate(hooks)
	outs := f.restoreAll(second)
	if len(outs) != 1 || outs[0].Status != engine.StatusPaused || outs[0].Pause.ID != id || outs[0].Pause.Address != "demo.createTodo" ||
		!strings.Contains(outs[0].Pause.Message, "ship 0.") || !outs[0].Pause.Deadline.Equal(out.Pause.Deadline) {
		t.Fatalf("restored %+v, want the same pause %+v", outs, out.Pause)
	}
	if f.gets.Load() != 1 {
		t.Fatalf("replay sent the journaled GET again: %d GETs", f.gets.Load())
	}
	if got := hooks.list(); len(got) != 1 || got[0] != "pause:"+id {
		t.Fatalf("hooks %v", got)
	}
	done, found := second.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusCompleted {
		t.Fatalf("resume %v %+v", found, done)
	}
	v := done.Result.Value.(map[string]any)
	if v["same"] != true || v["count"] != float64(1) || len(done.Result.Emitted) != 1 || fmt.Sprint(done.Result.Logs) != "[seen 0]" {
		t.Fatalf("result %+v", done.Result)
	}
	if v["r"] != done.Result.Emitted[0].(map[string]any)["r"] || v["d"] != float64(2_000_000_000_000) {
		t.Fatalf("random/clock not replayed: %+v", v)
	}
	if n := len(f.api.Todos()); n != 1 || f.posts.Load() != 1 {
		t.Fatalf("side effects: %d todos, %d POSTs", n, f.posts.Load())
	}
	// A third activation replays the settled outcome; nothing is restored.
	third := f.activate(&hookLog{})
	if outs := f.restoreAll(third); len(outs) != 0 {
		t.Fatalf("settled run restored: %+v", outs)
	}
	again, found := third.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Decline})
	if !found || again.Status != engine.StatusCompleted || fmt.Sprint(again.Result.Value) != fmt.Sprint(done.Result.Value) || !third.IsSettled(id, engine.System) {
		t.Fatalf("replayed outcome %v %+v", found, again)
	}
	if f.posts.Load() != 1 {
		t.Fatal("the settled replay sent the write again")
	}
}

// A grain that restores lazily (a continuation grain) restores one paused
// execution when its resume misses: concurrent misses replay it once, and
// only the grain that owns the run may restore it.
func TestRestorePausedOnDemand(t *testing.T) {
	f := newDurableFixture(t)
	id := f.pausedThenShutDown()

	// Another owner's engine on the same store does not restore it.
	set, _ := policy.New(nil)
	stranger := engine.New(engine.Config{Tools: f.reg, Policy: set, Clock: f.clk, Session: "s2",
		Journal: engine.StoreJournal{Store: runstore.New(f.st), Grain: "session/s2", Epoch: 1}})
	t.Cleanup(stranger.Shutdown)
	if stranger.RestorePaused(context.Background(), id, engine.System) || stranger.PausedCount() != 0 {
		t.Fatal("another owner restored the execution")
	}

	hooks := &hookLog{}
	second := f.activate(hooks)
	if _, found := second.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Accept}); found {
		t.Fatal("a fresh activation knew the pause before restoring it")
	}
	var wg sync.WaitGroup
	var restored atomic.Int32
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if second.RestorePaused(context.Background(), id, engine.System) {
				restored.Add(1)
			}
		}()
	}
	wg.Wait()
	if restored.Load() != 4 || second.PausedCount() != 1 || f.gets.Load() != 1 {
		t.Fatalf("%d of 4 restores reported, %d paused, %d GETs: want one replay seen by all", restored.Load(), second.PausedCount(), f.gets.Load())
	}
	if got := hooks.list(); len(got) != 1 || got[0] != "pause:"+id {
		t.Fatalf("hooks %v: want exactly one pause reported", got)
	}
	done, found := second.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusCompleted || len(f.api.Todos()) != 1 {
		t.Fatalf("resume %v %+v, %d todos", found, done, len(f.api.Todos()))
	}
	// Settled: nothing is restored again; the outcome is replayed.
	third := f.activate(&hookLog{})
	if third.RestorePaused(context.Background(), id, engine.System) {
		t.Fatal("a settled run was restored")
	}
	if again, found := third.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Accept}); !found || again.Status != engine.StatusCompleted || f.posts.Load() != 1 {
		t.Fatalf("replayed %v %+v, %d POSTs", found, again, f.posts.Load())
	}
}

func TestDurableDeclineAfterRestoreContinuesLikeInMemory(t *testing.T) {
	f := newDurableFixture(t)
	first := f.activate(&hookLog{})
	out := first.ExecuteWithPause(context.Background(), `try { await tools.demo.createTodo({title: "x"}) } catch (e) { return "caught: " + e.message }`, alice)
	first.Shutdown()
	second := f.activate(&hookLog{})
	f.restoreAll(second)
	done, found := second.Resume(context.Background(), out.Pause.ID, engine.System, engine.Response{Action: engine.Decline, Reason: "approval_timeout"})
	if !found || done.Status != engine.StatusCompleted || done.Result.Value != "caught: The call to demo.createTodo was declined by the user (approval_timeout)" {
		t.Fatalf("%v %+v", found, done)
	}
	if f.posts.Load() != 0 {
		t.Fatal("declined call was sent")
	}
}

// tamper rewrites the journal entry at seq of the session's only paused run.
func (f *durableFixture) tamper(edit func(c map[string]any)) {
	t := f.testingTB
	ctx := context.Background()
	runs, _ := runstore.New(f.st).PausedRuns(ctx, "s1")
	if len(runs) != 1 {
		t.Fatalf("%d paused runs", len(runs))
	}
	_, entries, _ := runstore.New(f.st).GetRun(ctx, runs[0].ID)
	var c map[string]any
	_ = json.Unmarshal([]byte(entries[0].Data), &c)
	edit(c)
	b, _ := json.Marshal(c)
	entries[0].Data = string(b)
	own, _ := f.st.Load(ctx, "session/s1")
	if err := runstore.New(f.st).PutJournalEntry(ctx, "session/s1", own.Epoch, runs[0].ID, entries[0]); err != nil {
		t.Fatal(err)
	}
}

func TestReplayThatSeesAnotherCallDiverges(t *testing.T) {
	f := newDurableFixture(t)
	first := f.activate(&hookLog{})
	out := first.ExecuteWithPause(context.Background(), nonDeterministicCode, alice)
	first.Shutdown()
	// Make the journal disagree with what the code asks for first (as a
	// code whose calls depend on something unrecorded would).
	f.tamper(func(c map[string]any) { c["hash"] = engine.CallHash("demo.listTodos", map[string]any{"limit": 1.0}) })
	hooks := &hookLog{}
	second := f.activate(hooks)
	outs := f.restoreAll(second)
	if len(outs) != 1 || outs[0].Status != engine.StatusError || outs[0].ErrorKind != engine.KindDiverged ||
		!strings.Contains(outs[0].Error, "execution_diverged: call #1 asks for tools.demo.listTodos") {
		t.Fatalf("restore %+v, want execution_diverged", outs)
	}
	// The failure is the pause's outcome; nothing was sent.
	got, found := second.Resume(context.Background(), out.Pause.ID, engine.System, engine.Response{Action: engine.Accept})
	if !found || got.ErrorKind != engine.KindDiverged || f.posts.Load() != 0 || f.gets.Load() != 1 {
		t.Fatalf("resume after divergence %v %+v (GETs %d POSTs %d)", found, got, f.gets.Load(), f.posts.Load())
	}
	if h := hooks.list(); len(h) != 1 || h[0] != "resume-settle:"+out.Pause.ID {
		t.Fatalf("hooks %v", h)
	}
}

// seedInFlight stores a run whose only journal entry is call path(args)
// in flight, as a node that died while sending it leaves it.
func (f *durableFixture) seedInFlight(code, path string, args map[string]any) (runstore.Run, []runstore.JournalEntry) {
	t := f.testingTB
	ctx := context.Background()
	own, err := f.st.Acquire(ctx, "session/s1", "n0")
	if err != nil {
		t.Fatal(err)
	}
	run := runstore.Run{ID: "run_seeded", Session: "s1", Code: code, PauseID: "exec_seeded", Created: f.clk.Now(),
		Spec: fmt.Sprintf(`{"user":"alice","org":"acme","seed":42,"startMs":%d}`, f.clk.Now().UnixMilli())}
	b, _ := json.Marshal(map[string]any{"path": path, "hash": engine.CallHash(path, args)})
	if err := runstore.New(f.st).PutRun(ctx, own.Grain, own.Epoch, run); err != nil {
		t.Fatal(err)
	}
	if err := runstore.New(f.st).PutJournalEntry(ctx, own.Grain, own.Epoch, run.ID, runstore.JournalEntry{Seq: 0, State: runstore.JournalInFlight, Data: string(b)}); err != nil {
		t.Fatal(err)
	}
	r, entries, err := runstore.New(f.st).GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r, entries
}

func TestInFlightWriteIsInterruptedNotResent(t *testing.T) {
	f := newDurableFixture(t)
	run, entries := f.seedInFlight(`try { return await tools.demo.createTodo({title: "x"}) } catch (e) { return e.message }`,
		"demo.createTodo", map[string]any{"title": "x"})
	e := f.activate(&hookLog{})
	out := e.Restore(run, entries)
	if out.Status != engine.StatusCompleted || !strings.HasPrefix(fmt.Sprint(out.Result.Value), "execution_interrupted: the call to tools.demo.createTodo was in flight") {
		t.Fatalf("outcome %+v", out)
	}
	if f.posts.Load() != 0 || len(f.api.Todos()) != 0 {
		t.Fatal("the in-flight POST was sent again")
	}
	// The interruption is journaled: the run settled with it.
	r, journal, _ := runstore.New(f.st).GetRun(context.Background(), run.ID)
	if r.Settled.IsZero() || len(journal) != 1 || journal[0].State != runstore.JournalDone {
		t.Fatalf("run %+v journal %+v", r, journal)
	}
}

// Regression (chaos, graceful stop): a runtime disposed while a resumed
// execution's write was in flight cut the call, and the cut ("context
// canceled") was journaled as the call's outcome; the next activation
// replayed it into the code as a failure, so the approved write was lost
// with a misleading error. The entry now stays in flight, as after a crash.
func TestCallCutByShutdownStaysInFlight(t *testing.T) {
	f := newDurableFixture(t)
	f.postGate, f.postSeen, f.postCut = make(chan struct{}), make(chan struct{}, 1), make(chan struct{}, 1)
	first := f.activate(&hookLog{})
	out := first.ExecuteWithPause(context.Background(), `return await tools.demo.createTodo({title: "x"})`, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	go first.Resume(context.Background(), out.Pause.ID, engine.System, engine.Response{Action: engine.Accept})
	<-f.postSeen // the approved POST is in flight
	first.Shutdown()
	<-f.postCut // the server saw the client give up: the call returns in the engine now
	// The engine's reaction to the cut (before the fix: journaling it as
	// the call's outcome) runs on the abandoned call's goroutine, which
	// nothing can be awaited on; the journal write it made came within a
	// millisecond. Give it far longer before reading.
	deadline := time.Now().Add(500 * time.Millisecond)
	var (
		run     runstore.Run
		entries []runstore.JournalEntry
	)
	for {
		run, entries = f.runOf(out.Pause.ID)
		if len(entries) != 1 || entries[0].State != runstore.JournalInFlight || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !run.Settled.IsZero() || len(entries) != 1 || entries[0].State != runstore.JournalInFlight {
		t.Fatalf("after the shutdown: run %+v journal %+v, want unsettled with the call in flight", run, entries)
	}
	close(f.postGate)
	second := f.activate(&hookLog{})
	restored := second.Restore(run, entries)
	if restored.Status != engine.StatusError || !strings.Contains(restored.Error, engine.KindInterrupted) {
		t.Fatalf("restored %+v, want execution_interrupted", restored)
	}
	// Regression (chaos, "lost accept"): replay rewrote the in-flight entry
	// as done without its pause id, so the run was no longer found by its
	// execution id: a later activation could not answer a late resume with
	// the settled outcome, and the chaos checker took the interrupted
	// execution for a lost accept.
	run, entries = f.runOf(out.Pause.ID)
	if run.Settled.IsZero() || !strings.Contains(run.Outcome, engine.KindInterrupted) || entries[0].PauseID != out.Pause.ID {
		t.Fatalf("after the restore: run %+v journal %+v, want settled as interrupted, still linked to %s", run, entries, out.Pause.ID)
	}
	if third := f.activate(&hookLog{}); !third.IsSettled(out.Pause.ID, engine.System) {
		t.Fatal("a later activation does not know the execution settled")
	}
}

// runOf reads the run that paused with pauseID.
func (f *durableFixture) runOf(pauseID string) (runstore.Run, []runstore.JournalEntry) {
	t := f.testingTB
	t.Helper()
	id, err := runstore.New(f.st).RunByPause(context.Background(), pauseID)
	if err != nil {
		t.Fatal(err)
	}
	run, entries, err := runstore.New(f.st).GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return run, entries
}

func TestInFlightReadIsRetriedOnce(t *testing.T) {
	f := newDurableFixture(t)
	f.api.Handler() // the API starts empty
	run, entries := f.seedInFlight(`return (await tools.demo.listTodos({})).length`, "demo.listTodos", map[string]any{})
	e := f.activate(&hookLog{})
	out := e.Restore(run, entries)
	if out.Status != engine.StatusCompleted || out.Result.Value != float64(0) || f.gets.Load() != 1 {
		t.Fatalf("outcome %+v, %d GETs (want the GET retried once)", out, f.gets.Load())
	}
}

// A sandbox made non-deterministic on replay — Math.random seeded
// differently than the run recorded, as if it were left unrecorded — asks
// for other arguments: the replay is refused, not mis-replayed.
func TestReplayWithUnrecordedRandomnessDiverges(t *testing.T) {
	f := newDurableFixture(t)
	first := f.activate(&hookLog{})
	out := first.ExecuteWithPause(context.Background(), `
		const seen = await tools.search({query: "todos " + Math.random()});
		return await tools.demo.createTodo({title: "after " + seen.length});`, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("%+v", out)
	}
	first.Shutdown()
	ctx := context.Background()
	runs, _ := runstore.New(f.st).PausedRuns(ctx, "s1")
	run, entries, _ := runstore.New(f.st).GetRun(ctx, runs[0].ID)
	// Decode numbers exactly: the seed is a random int64, and as a float64 "seed + 1" is often the
	// same seed (above 2^53 a float64 cannot hold every integer), which made this test flaky.
	var spec map[string]any
	dec := json.NewDecoder(strings.NewReader(run.Spec))
	dec.UseNumber()
	if err := dec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	seed, err := spec["seed"].(json.Number).Int64()
	if err != nil {
		t.Fatal(err)
	}
	spec["seed"] = seed ^ 1
	b, _ := json.Marshal(spec)
	run.Spec = string(b)
	second := f.activate(&hookLog{})
	got := second.Restore(run, entries)
	if got.Status != engine.StatusError || got.ErrorKind != engine.KindDiverged || !strings.Contains(got.Error, "different arguments") {
		t.Fatalf("restore %+v, want execution_diverged", got)
	}
	if f.gets.Load() != 0 || f.posts.Load() != 0 {
		t.Fatalf("calls sent during a diverged replay: %d GETs %d POSTs", f.gets.Load(), f.posts.Load())
	}
}

// The limit that stopped a durable execution is journaled with its outcome:
// a later activation replays the same kind and limit, not a bare failure.
func TestTheLimitThatStoppedADurableRunIsReplayed(t *testing.T) {
	f := newDurableFixture(t)
	first := f.activateWith(&hookLog{}, sandbox.Limits{WallTime: 10 * time.Second, MaxToolCalls: 2})
	out := first.ExecuteWithPause(context.Background(), `
		await tools.demo.createTodo({title: "one"});
		for (let i = 0; i < 5; i++) await tools.demo.listTodos({});
		return "all"`, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("want a pause: %+v", out)
	}
	id := out.Pause.ID
	done, found := first.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusError || done.ErrorKind != sandbox.KindLimit || done.ErrorLimit != sandbox.LimitToolCalls {
		t.Fatalf("resume %v %+v, want the tool_calls limit", found, done)
	}
	again, found := f.activate(&hookLog{}).Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Decline})
	if !found || again.Status != engine.StatusError || again.ErrorKind != sandbox.KindLimit || again.ErrorLimit != sandbox.LimitToolCalls ||
		again.Error != done.Error {
		t.Fatalf("replayed outcome %v %+v, want %+v", found, again, done)
	}
}
