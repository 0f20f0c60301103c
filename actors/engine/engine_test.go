package engine_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

type hookLog struct {
	mu     sync.Mutex
	events []string
}

func (h *hookLog) add(s string) {
	h.mu.Lock()
	h.events = append(h.events, s)
	h.mu.Unlock()
}
func (h *hookLog) Paused(id string, _ time.Time) { h.add("pause:" + id) }
func (h *hookLog) Resuming(id, _ string)         { h.add("resume-start:" + id) }
func (h *hookLog) Settled(id string)             { h.add("resume-settle:" + id) }
func (h *hookLog) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

type fixture struct {
	api   *demo.API
	e     *engine.Engine
	hooks *hookLog
	clk   *clock.Fake
}

var alice = engine.Principal{User: "alice", Org: "acme", Role: "admin"}

func newFixture(t testing.TB, rules []policy.Rule) *fixture {
	t.Helper()
	return newFixtureLimits(t, rules, sandbox.Limits{WallTime: 10 * time.Second})
}

func newFixtureLimits(t testing.TB, rules []policy.Rule, lim sandbox.Limits) *fixture {
	t.Helper()
	return newFixtureWith(t, rules, lim, nil)
}

// newFixtureWith is newFixtureLimits with a tweak of the engine's config.
func newFixtureWith(t testing.TB, rules []policy.Rule, lim sandbox.Limits, tweak func(*engine.Config)) *fixture {
	t.Helper()
	api := demo.NewAPI()
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	spec := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(spec, api.Spec(ts.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := openapi.Load(context.Background(), openapi.Options{Name: "demo", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(src)
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.New(rules)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{api: api, hooks: &hookLog{}, clk: clock.NewFake(time.UnixMilli(2_000_000_000_000))}
	cfg := engine.Config{Tools: reg, Policy: set, Hooks: f.hooks, Clock: f.clk, ApprovalWindow: time.Minute, Limits: lim}
	if tweak != nil {
		tweak(&cfg)
	}
	f.e = engine.New(cfg)
	t.Cleanup(f.e.Shutdown)
	return f
}

func (f *fixture) run(t *testing.T, code string) engine.Outcome {
	t.Helper()
	return f.e.ExecuteWithPause(context.Background(), code, alice)
}

func TestReadsRunWithoutApproval(t *testing.T) {
	f := newFixture(t, nil)
	out := f.run(t, `const todos = await tools.demo.listTodos({}); return todos.length`)
	if out.Status != engine.StatusCompleted || out.Result.Value != float64(0) {
		t.Fatalf("outcome %+v", out)
	}
	if len(f.hooks.list()) != 0 {
		t.Fatalf("hooks %v for a run without pause", f.hooks.list())
	}
}

func TestWritePausesAndAcceptCompletesWithTheSideEffect(t *testing.T) {
	f := newFixture(t, nil)
	out := f.run(t, `const t = await tools.demo.createTodo({title: "buy milk"}); return t.title`)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want paused", out)
	}
	p := out.Pause
	if !strings.HasPrefix(p.ID, "exec_") || p.Address != "demo.createTodo" || p.ApprovalText != "POST /todos" ||
		!strings.Contains(p.Message, "Approve demo.createTodo?") || !strings.Contains(p.Message, "buy milk") ||
		!p.Deadline.Equal(f.clk.Now().Add(time.Minute)) || p.Principal != alice {
		t.Fatalf("pause %+v", p)
	}
	if n := len(f.api.Todos()); n != 0 {
		t.Fatalf("%d todos before approval", n)
	}
	if f.e.PausedCount() != 1 {
		t.Fatalf("paused count %d", f.e.PausedCount())
	}
	out, found := f.e.Resume(context.Background(), p.ID, engine.System, engine.Response{Action: engine.Accept})
	if !found || out.Status != engine.StatusCompleted || out.Result.Value != "buy milk" {
		t.Fatalf("resume: %v %+v", found, out)
	}
	if todos := f.api.Todos(); len(todos) != 1 || todos[0].Title != "buy milk" {
		t.Fatalf("side effect: %+v", todos)
	}
	want := []string{"pause:" + p.ID, "resume-start:" + p.ID, "resume-settle:" + p.ID}
	if got := f.hooks.list(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hooks %v, want %v", got, want)
	}
	// Idempotent: the same outcome again, no second side effect, no hooks.
	again, found := f.e.Resume(context.Background(), p.ID, engine.System, engine.Response{Action: engine.Decline})
	if !found || again.Result.Value != "buy milk" || len(f.api.Todos()) != 1 || len(f.hooks.list()) != 3 {
		t.Fatalf("replay: %+v todos %d hooks %v", again, len(f.api.Todos()), f.hooks.list())
	}
	if !f.e.IsSettled(p.ID, engine.System) || f.e.PausedCount() != 0 {
		t.Fatal("settled bookkeeping")
	}
	if _, found := f.e.Resume(context.Background(), "exec_unknown", engine.System, engine.Response{Action: engine.Accept}); found {
		t.Fatal("unknown id found")
	}
}

func TestDeclineFailsTheCallInsideTheCode(t *testing.T) {
	f := newFixture(t, nil)
	out := f.run(t, `try { await tools.demo.createTodo({title: "x"}); return "created" } catch (e) { return "refused: " + e.message }`)
	out, _ = f.e.Resume(context.Background(), out.Pause.ID, engine.System, engine.Response{Action: engine.Decline})
	if out.Status != engine.StatusCompleted || !strings.HasPrefix(out.Result.Value.(string), "refused: The call to demo.createTodo was declined") {
		t.Fatalf("outcome %+v", out)
	}
	// Uncaught, a decline (here: the deadline's auto-decline) fails the execution.
	out = f.run(t, `await tools.demo.createTodo({title: "y"}); return "created"`)
	out, _ = f.e.Resume(context.Background(), out.Pause.ID, engine.System, engine.Response{Action: engine.Decline, Reason: "approval_timeout"})
	if out.Status != engine.StatusError || !strings.Contains(out.Error, "approval_timeout") {
		t.Fatalf("outcome %+v", out)
	}
	if n := len(f.api.Todos()); n != 0 {
		t.Fatalf("%d todos after declines", n)
	}
}

func TestSecondPauseAfterResumeAndHookOrder(t *testing.T) {
	f := newFixture(t, nil)
	out := f.run(t, `await tools.demo.createTodo({title: "a"}); await tools.demo.createTodo({title: "b"}); return (await tools.demo.listTodos({})).length`)
	e1 := out.Pause.ID
	out, _ = f.e.Resume(context.Background(), e1, engine.System, engine.Response{Action: engine.Accept})
	if out.Status != engine.StatusPaused || out.Pause.ID == e1 {
		t.Fatalf("after the first resume: %+v", out)
	}
	e2 := out.Pause.ID
	out, _ = f.e.Resume(context.Background(), e2, engine.System, engine.Response{Action: engine.Accept})
	if out.Status != engine.StatusCompleted || out.Result.Value != float64(2) {
		t.Fatalf("final: %+v", out)
	}
	want := []string{"pause:" + e1, "resume-start:" + e1, "resume-settle:" + e1, "pause:" + e2, "resume-start:" + e2, "resume-settle:" + e2}
	if got := f.hooks.list(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hooks %v\nwant %v", got, want)
	}
}

func TestConcurrentResumesJoin(t *testing.T) {
	f := newFixture(t, nil)
	out := f.run(t, `return (await tools.demo.createTodo({title: "once"})).id`)
	id := out.Pause.ID
	var wg sync.WaitGroup
	results := make([]engine.Outcome, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = f.e.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Accept})
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.Status != engine.StatusCompleted || r.Result.Value != results[0].Result.Value {
			t.Fatalf("results differ: %+v vs %+v", r, results[0])
		}
	}
	if n := len(f.api.Todos()); n != 1 {
		t.Fatalf("%d todos: the call ran more than once", n)
	}
}

func TestPoliciesBlockAndApprove(t *testing.T) {
	f := newFixture(t, []policy.Rule{
		{Pattern: "demo.deleteTodo", Action: policy.Block, Org: "acme"},
		{Pattern: "demo.createTodo", Action: policy.Approve, Org: "acme"},
	})
	out := f.run(t, `return (await tools.demo.createTodo({title: "trusted"})).title`)
	if out.Status != engine.StatusCompleted || out.Result.Value != "trusted" {
		t.Fatalf("approved by policy: %+v", out)
	}
	out = f.run(t, `await tools.demo.deleteTodo({id: "1"})`)
	if out.Status != engine.StatusError || !strings.Contains(out.Error, "blocked by policy") {
		t.Fatalf("blocked: %+v", out)
	}
}

func TestUnknownToolsSearchAndDescribe(t *testing.T) {
	f := newFixture(t, nil)
	out := f.run(t, `await tools.nope.thing({})`)
	if out.Status != engine.StatusError || !strings.Contains(out.Error, `unknown tool "nope.thing"`) {
		t.Fatalf("unknown tool: %+v", out)
	}
	out = f.run(t, `const hits = await tools.search({query: "create todo", limit: 3}); const d = await tools.describe({path: hits[0].path}); return [hits.length > 0, d.path, hits[0].requiresApproval, Object.keys(hits[0]).sort().join()]`)
	if out.Status != engine.StatusCompleted || fmt.Sprint(out.Result.Value) != "[true demo.createTodo true description,name,path,requiresApproval,source]" {
		t.Fatalf("search/describe: %+v", out)
	}
	out = f.run(t, `return 1 +`)
	if out.Status != engine.StatusError || out.ErrorKind != sandbox.KindSyntax {
		t.Fatalf("syntax error: %+v", out)
	}
}

func TestShutdownEndsPausedExecutions(t *testing.T) {
	f := newFixture(t, nil)
	out := f.run(t, `await tools.demo.createTodo({title: "never"})`)
	id := out.Pause.ID
	f.e.Shutdown()
	if f.e.PausedCount() != 0 {
		t.Fatal("pauses survived shutdown")
	}
	if got := f.hooks.list(); got[len(got)-1] != "resume-settle:"+id {
		t.Fatalf("hooks %v: the lease was not released", got)
	}
	if out := f.e.ExecuteWithPause(context.Background(), "return 1", alice); out.Status != engine.StatusInternal {
		t.Fatalf("execute after shutdown: %+v", out)
	}
	if n := len(f.api.Todos()); n != 0 {
		t.Fatal("side effect after shutdown")
	}
}

// Waiting for approval does not count against the execution's wall time;
// the 300ms wait stands for a human taking longer than the limit.
func TestApprovalWaitDoesNotCountAgainstWallTime(t *testing.T) {
	// The wall time bounds the run's own work, which must fit in it even
	// on an oversubscribed machine (100 ms did not, at load 40); the wait
	// for the human is what must not count, so it outlasts the limit.
	const wall = 2 * time.Second
	f := newFixtureLimits(t, nil, sandbox.Limits{WallTime: wall})
	out := f.run(t, `return await tools.demo.createTodo({title: "slow human"})`)
	if out.Status != engine.StatusPaused {
		t.Fatalf("want a pause: %+v", out)
	}
	time.Sleep(wall + 500*time.Millisecond) // the human's wait: longer than the wall time (not a synchronisation)
	out, _ = f.e.Resume(context.Background(), out.Pause.ID, engine.System, engine.Response{Action: engine.Accept})
	if out.Status != engine.StatusCompleted {
		t.Fatalf("after a wait longer than WallTime: %+v", out)
	}
}

func TestExecuteDecidesApprovalsInline(t *testing.T) {
	f := newFixture(t, nil)
	var asked []string
	out := f.e.Execute(context.Background(), `
		const a = await tools.demo.createTodo({title: "one"});
		let b = "declined";
		try { await tools.demo.createTodo({title: "two"}); b = "created"; } catch (e) { b = e.message; }
		return [a.title, b];`, alice, func(_ context.Context, p engine.Pause) engine.Response {
		asked = append(asked, p.Address)
		if len(asked) == 1 {
			return engine.Response{Action: engine.Accept}
		}
		return engine.Response{Action: engine.Decline, Reason: "not twice"}
	})
	if out.Status != engine.StatusCompleted || len(asked) != 2 {
		t.Fatalf("execute: %+v, asked %v", out, asked)
	}
	if got := fmt.Sprint(out.Result.Value); !strings.HasPrefix(got, "[one ") || !strings.Contains(got, "not twice") {
		t.Fatalf("result %s", got)
	}
	if todos := f.api.Todos(); len(todos) != 1 || todos[0].Title != "one" {
		t.Fatalf("todos %+v", todos)
	}
	// Without an approver, calls needing approval are cancelled.
	out = f.e.Execute(context.Background(), `return await tools.demo.createTodo({title: "three"})`, alice, nil)
	if out.Status != engine.StatusError || !strings.Contains(out.Error, "no approver") {
		t.Fatalf("no approver: %+v", out)
	}
	if n := len(f.api.Todos()); n != 1 {
		t.Fatalf("cancelled call ran: %d todos", n)
	}
}

// An engine without a deadline reminder (a continuation grain's) declines
// a decision that comes after the pause's deadline, whatever it says: the
// client was told the deadline. One that has a reminder (sessions) leaves
// the deadline to it.
func TestLateDecisionIsATimeoutWhenTheEngineEnforcesDeadlines(t *testing.T) {
	for _, enforce := range []bool{true, false} {
		f := newFixtureWith(t, nil, sandbox.Limits{WallTime: 10 * time.Second}, func(c *engine.Config) { c.EnforceDeadlines = enforce })
		code := `try { await tools.demo.createTodo({title: "late"}); return "created" } catch (e) { return "refused: " + e.message }`
		early := f.run(t, code)
		if early.Status != engine.StatusPaused {
			t.Fatalf("outcome %+v, want paused", early)
		}
		// Within the window an accept runs.
		f.clk.Advance(59 * time.Second)
		out, _ := f.e.Resume(context.Background(), early.Pause.ID, engine.System, engine.Response{Action: engine.Accept})
		if out.Status != engine.StatusCompleted || out.Result.Value != "created" {
			t.Fatalf("enforce=%v: accept within the window: %+v", enforce, out)
		}
		late := f.run(t, code)
		f.clk.Advance(time.Minute + time.Millisecond)
		out, _ = f.e.Resume(context.Background(), late.Pause.ID, engine.System, engine.Response{Action: engine.Accept})
		got, _ := out.Result.Value.(string)
		if enforce {
			if !strings.HasPrefix(got, "refused") || !strings.Contains(got, "approval_timeout") || len(f.api.Todos()) != 1 {
				t.Fatalf("late accept with deadlines enforced: %+v, %d todos", out, len(f.api.Todos()))
			}
		} else if got != "created" || len(f.api.Todos()) != 2 {
			t.Fatalf("late accept without enforcement: %+v, %d todos", out, len(f.api.Todos()))
		}
	}
}

// Executions are capped per principal by the sandbox pool: over the cap a
// fresh execution fails with the retryable "busy" kind before it runs; a
// paused execution does not count, and another principal is not affected.
func TestPrincipalCapIsBusyAndPausesDoNotCount(t *testing.T) {
	pool, err := sandbox.NewPool(sandbox.PoolOptions{MaxRunningPerTenant: 1, Spares: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f := newFixtureLimits(t, nil, sandbox.Limits{WallTime: 10 * time.Second, Pool: pool})
	if out := f.run(t, `await tools.demo.createTodo({title: "waits"})`); out.Status != engine.StatusPaused {
		t.Fatalf("want a pause: %+v", out)
	}
	if out := f.run(t, `return 1`); out.Status != engine.StatusCompleted {
		t.Fatalf("beside a paused execution: %+v", out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	looping := make(chan engine.Outcome, 1)
	go func() { looping <- f.e.ExecuteWithPause(ctx, `while (true) {}`, alice) }()
	for tick := time.NewTicker(time.Millisecond); pool.Stats().Running == 0; <-tick.C {
	}
	if out := f.run(t, `return 2`); out.Status != engine.StatusError || out.ErrorKind != sandbox.KindBusy {
		t.Fatalf("over the cap: %+v", out)
	}
	bob := engine.Principal{User: "bob", Org: "other", Role: "admin"}
	if out := f.e.ExecuteWithPause(context.Background(), `return 3`, bob); out.Status != engine.StatusCompleted {
		t.Fatalf("another principal: %+v", out)
	}
	cancel()
	if out := <-looping; out.Status == engine.StatusCompleted {
		t.Fatalf("the loop completed: %+v", out)
	}
}

// Each sandbox limit names itself in the outcome (ErrorKind and
// ErrorLimit), so disabling a limit fails its case: another limit
// standing in names another.
func TestOutcomesNameTheLimitThatStoppedThem(t *testing.T) {
	// The memory bomb gets a wall time it cannot reach (near the heap limit
	// the worker's GC runs hard: seconds on loaded cores); the others a short one.
	heap := newFixtureLimits(t, nil, sandbox.Limits{WallTime: time.Minute, MaxHeapGrowth: 64 << 20})
	out := heap.run(t, `const m = new Map(); for (let i = 0; ; i++) m.set(i, {i, s: "v" + i});`)
	if out.Status != engine.StatusError || out.ErrorKind != sandbox.KindLimit || out.ErrorLimit != sandbox.LimitHeap {
		t.Errorf("memory bomb: %+v, want a limit error of the heap limit", out)
	}
	f := newFixtureLimits(t, nil, sandbox.Limits{WallTime: 3 * time.Second, MaxToolCalls: 2, MaxOutput: 1 << 10})
	for _, tc := range []struct{ code, kind, limit string }{
		{`emit("x".repeat(2000))`, sandbox.KindLimit, sandbox.LimitOutput},
		{`for (let i = 0; i < 5; i++) await tools.demo.listTodos({}); return "all"`, sandbox.KindLimit, sandbox.LimitToolCalls},
		{`while (true) {}`, sandbox.KindTimeout, sandbox.LimitWallTime},
	} {
		out := f.run(t, tc.code)
		if out.Status != engine.StatusError || out.ErrorKind != tc.kind || out.ErrorLimit != tc.limit {
			t.Errorf("%s: %+v, want a %s error of the %s limit", tc.limit, out, tc.kind, tc.limit)
		}
	}
}
