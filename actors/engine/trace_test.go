package engine_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// traced turns tracing on for the test with an in-memory recorder (the
// switch is global: the tests using it are not parallel).
func traced(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	return rec
}

// spanTree is the ended spans of one trace, by name.
type spanTree struct {
	t     *testing.T
	spans []sdktrace.ReadOnlySpan
}

func treeOf(t *testing.T, rec *tracetest.SpanRecorder, id trace.TraceID) spanTree {
	st := spanTree{t: t}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == id {
			st.spans = append(st.spans, s)
		}
	}
	return st
}

// one is the span named name, which must be the only one.
func (st spanTree) one(name string) sdktrace.ReadOnlySpan {
	st.t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range st.spans {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		st.t.Fatalf("%d spans named %q in the trace, want 1 (spans: %v)", len(found), name, st.names())
	}
	return found[0]
}

func (st spanTree) names() []string {
	var n []string
	for _, s := range st.spans {
		n = append(n, s.Name())
	}
	return n
}

// under checks that child's parent is parent.
func under(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("%s's parent is %s, want %s (%s)", child.Name(), child.Parent().SpanID(), parent.Name(), parent.SpanContext().SpanID())
	}
}

// attrOf is span s's attribute k, in string form ("" when it has none).
func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

// noSecret fails if any span attribute, event or status holds secret.
func noSecret(t *testing.T, st spanTree, secret string) {
	t.Helper()
	for _, s := range st.spans {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("span %s attribute %s carries a tool argument: %q", s.Name(), kv.Key, kv.Value.String())
			}
		}
		if strings.Contains(s.Status().Description, secret) || strings.Contains(s.Name(), secret) {
			t.Errorf("span %s (status %q) carries a tool argument", s.Name(), s.Status().Description)
		}
	}
}

// One execution is one trace: the execute span, the sandbox run under it
// with the worker process's part (timed by the worker, recorded by the
// node), the tools.* call, and the HTTP request to the API, whose
// traceparent header names the client span; the decision's resume span is
// a child of the decider's. No span carries the code's argument.
func TestAnExecutionIsOneTraceDownToTheAPIRequest(t *testing.T) {
	rec := traced(t)
	f := newDurableFixture(t)
	e := f.activate(&hookLog{})
	ctx, root := tracing.Start(context.Background(), "client")
	code := `const t = await tools.demo.createTodo({title: "secret-arg-9f3"}); return t.id`
	out := e.ExecuteWithPause(ctx, code, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	done, found := e.Resume(ctx, out.Pause.ID, engine.System, engine.Response{Action: engine.Accept})
	root.End()
	if !found || done.Status != engine.StatusCompleted {
		t.Fatalf("resume %v %+v", found, done)
	}
	st := treeOf(t, rec, root.SpanContext().TraceID())
	client := st.one("client")
	exec := st.one(engine.ExecuteSpan)
	under(t, exec, client)
	if attrOf(exec, engine.ModeKey) != "pausable" || attrOf(exec, engine.OutcomeKey) != "paused" ||
		attrOf(exec, engine.PausedExecutionKey) != out.Pause.ID || attrOf(exec, tracing.SessionKey) != "s1" {
		t.Errorf("execute span attributes %v", exec.Attributes())
	}
	run := st.one(sandbox.ExecSpan)
	under(t, run, exec)
	worker := st.one(sandbox.WorkerSpan)
	under(t, worker, run)
	under(t, st.one(sandbox.CompileSpan), worker)
	if attrOf(worker, sandbox.WorkerPIDKey) == "" || attrOf(run, sandbox.ToolCallsKey) != "1" {
		t.Errorf("run %v worker %v", run.Attributes(), worker.Attributes())
	}
	if worker.StartTime().Before(run.StartTime()) || worker.EndTime().After(run.EndTime()) {
		t.Errorf("the worker's span [%v, %v] is outside its run's [%v, %v]", worker.StartTime(), worker.EndTime(), run.StartTime(), run.EndTime())
	}
	dispatch := st.one(engine.DispatchSpan)
	under(t, dispatch, run)
	if attrOf(dispatch, tracing.ToolNameKey) != "demo.createTodo" || attrOf(dispatch, engine.PolicyKey) != "require_approval" {
		t.Errorf("dispatch attributes %v", dispatch.Attributes())
	}
	post := st.one("POST /todos")
	under(t, post, dispatch)
	if post.SpanKind() != trace.SpanKindClient || attrOf(post, "http.response.status_code") != "201" || attrOf(post, "url.template") != "/todos" {
		t.Errorf("client span %v %v", post.SpanKind(), post.Attributes())
	}
	h, _ := f.headers.Load(http.MethodPost)
	if tp := h.(http.Header).Get("Traceparent"); !strings.Contains(tp, post.SpanContext().SpanID().String()) {
		t.Errorf("the API got traceparent %q, want the client span %s", tp, post.SpanContext().SpanID())
	}
	resume := st.one(engine.ResumeSpan)
	under(t, resume, client)
	if attrOf(resume, engine.ExecutionKey) != out.Pause.ID || attrOf(resume, engine.DecisionKey) != "accept" ||
		attrOf(resume, engine.OutcomeKey) != "ok" || attrOf(resume, engine.JournalReplayKey) != "false" {
		t.Errorf("resume attributes %v", resume.Attributes())
	}
	noSecret(t, st, "secret-arg-9f3")
}

// A decision for a dormant durable pause (its runtime passivated) re-runs
// the code by replay: the resume span says so, and under it the replay
// span holds the sandbox run whose journaled calls are marked replayed.
func TestADormantPauseDecidedIsReplayedUnderItsResumeSpan(t *testing.T) {
	f := newDurableFixture(t)
	id := f.pausedThenShutDown()
	rec := traced(t)
	second := f.activate(&hookLog{})
	runs, err := runstore.New(f.st).PausedRuns(context.Background(), "s1")
	if err != nil || len(runs) != 1 {
		t.Fatalf("paused runs %v %v", runs, err)
	}
	run, entries, err := runstore.New(f.st).GetRun(context.Background(), runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if out := second.RestoreDormant(run, entries); out.Status != engine.StatusPaused {
		t.Fatalf("restore %+v", out)
	}
	ctx, root := tracing.Start(context.Background(), "decider")
	done, found := second.Resume(ctx, id, engine.System, engine.Response{Action: engine.Accept})
	root.End()
	if !found || done.Status != engine.StatusCompleted {
		t.Fatalf("resume %v %+v", found, done)
	}
	st := treeOf(t, rec, root.SpanContext().TraceID())
	resume := st.one(engine.ResumeSpan)
	under(t, resume, st.one("decider"))
	if attrOf(resume, engine.JournalReplayKey) != "true" || attrOf(resume, engine.OutcomeKey) != "ok" {
		t.Errorf("resume attributes %v", resume.Attributes())
	}
	replay := st.one(engine.ReplaySpan)
	under(t, replay, resume)
	if attrOf(replay, engine.ExecutionKey) != id || attrOf(replay, engine.ReplayedCallsKey) != "2" || attrOf(replay, engine.OutcomeKey) != "paused" {
		t.Errorf("replay attributes %v", replay.Attributes())
	}
	runSpan := st.one(sandbox.ExecSpan)
	under(t, runSpan, replay)
	if attrOf(runSpan, sandbox.ReplayKey) != "true" {
		t.Errorf("run attributes %v", runSpan.Attributes())
	}
	var replayed, live int
	for _, s := range st.spans {
		if s.Name() == engine.DispatchSpan {
			under(t, s, runSpan)
			if attrOf(s, engine.CallReplayedKey) == "true" {
				replayed++
			} else {
				live++
			}
		}
	}
	// listTodos answered from the journal; createTodo (decided) and the
	// last listTodos sent live.
	if replayed != 1 || live != 2 {
		t.Errorf("%d replayed and %d live dispatch spans, want 1 and 2", replayed, live)
	}
}

// With tracing off the engine's paths allocate nothing for tracing: the
// checks are one atomic load each.
func TestEngineTracingOffAllocatesNothing(t *testing.T) {
	if tracing.On() {
		t.Skip("tracing is on")
	}
	f := newFixture(t, nil)
	// Resume of an unknown id: the cheapest full path through Resume.
	allocs := testing.AllocsPerRun(100, func() {
		f.e.Resume(context.Background(), "exec_none", engine.System, engine.Response{Action: engine.Accept})
	})
	if allocs != 0 {
		t.Errorf("Resume of an unknown id allocates %v times with tracing off, want 0", allocs)
	}
}
