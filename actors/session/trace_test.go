package session_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// traced turns tracing on for the test with an in-memory recorder (the
// tests using it are not parallel: the switch is global).
func traced(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() {
		uninstall()
		_ = tp.Shutdown(t.Context())
	})
	return rec
}

// spansOf lists the ended spans named name whose mcp.session.id is id.
func spansOf(rec *tracetest.SpanRecorder, name, id string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name && attr(s, tracing.SessionKey) == attribute.StringValue(id) {
			out = append(out, s)
		}
	}
	return out
}

// attr is span s's attribute k (the empty value when it has none).
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// awaitSpan waits for the first span named name of session id.
func awaitSpan(t *testing.T, rec *tracetest.SpanRecorder, name, id string) sdktrace.ReadOnlySpan {
	t.Helper()
	eventually(t, name+" of "+id, func() bool { return len(spansOf(rec, name, id)) > 0 })
	return spansOf(rec, name, id)[0]
}

// Seed case 26 as spans: C's build (McpSessionDO.init) names A as its
// eviction candidate; A's eviction is the span
// McpSessionDO.requestCapEviction linked to C's init span, and under it
// A's disposal, mcp.session.idle_runtime_dispose with dispose_reason=cap,
// the counts that allowed it and the node's residency after the release.
func TestCapEvictionIsTracedAndLinkedToTheEvictingBuild(t *testing.T) {
	rec := traced(t)
	e := newEnv(t, 2, shortPolicy())
	e.create("A")
	e.clk.Advance(time.Second)
	e.create("B")
	e.clk.Advance(time.Second)
	e.create("C")
	initC := awaitSpan(t, rec, session.InitSpan, "C")
	if got := attr(initC, session.EvictionCandidateKey).AsString(); got != "A" {
		t.Fatalf("C's init span names eviction candidate %q, want A", got)
	}
	if attr(initC, session.CapOverflowKey).AsBool() || attr(initC, session.ResidentKey).AsInt64() < 2 ||
		attr(initC, session.PeakResidentKey).AsInt64() < 3 || attr(initC, session.RestoreKey).Type() != attribute.BOOL {
		t.Fatalf("C's init span attributes: %v", initC.Attributes())
	}
	dispose := awaitSpan(t, rec, session.DisposeSpan, "A")
	if got := attr(dispose, session.DisposeReasonKey).AsString(); got != session.DisposeCap {
		t.Fatalf("A's dispose_reason %q, want cap", got)
	}
	if attr(dispose, session.StreamCountKey).Type() != attribute.INT64 || attr(dispose, session.PausedCountKey).Type() != attribute.INT64 ||
		attr(dispose, session.ResidentKey).AsInt64() != 2 {
		t.Fatalf("A's dispose span attributes: %v", dispose.Attributes())
	}
	req := awaitSpan(t, rec, session.CapEvictionSpan, "A")
	if dispose.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Fatal("A's disposal is not a child of its cap eviction request's span")
	}
	if req.Parent().IsValid() || len(req.Links()) != 1 || req.Links()[0].SpanContext.SpanID() != initC.SpanContext().SpanID() {
		t.Fatalf("eviction request span: parent %v, links %+v; want a root linked to C's init span %v",
			req.Parent(), req.Links(), initC.SpanContext().SpanID())
	}
	if !attr(req, session.EvictedKey).AsBool() {
		t.Fatal("eviction request span does not say it evicted")
	}
	if len(spansOf(rec, session.DisposeSpan, "B")) != 0 {
		t.Fatal("B, more recently active, was disposed")
	}
}

// Seed case 27 as spans: with nothing evictable the build proceeds and
// its init span says mcp.isolate.cap_overflow=true.
func TestOverflowIsOnTheInitSpan(t *testing.T) {
	rec := traced(t)
	e := newEnv(t, 1, shortPolicy())
	e.create("A")
	e.rt("A").streams.Store(1)
	e.create("B")
	if s := awaitSpan(t, rec, session.InitSpan, "B"); !attr(s, session.CapOverflowKey).AsBool() || attr(s, session.ResidentKey).AsInt64() != 2 {
		t.Fatalf("B's init span: %v", s.Attributes())
	}
	if s := awaitSpan(t, rec, session.InitSpan, "A"); attr(s, session.CapOverflowKey).AsBool() {
		t.Fatal("A's build, under the cap, says overflow")
	}
}

// A durable pause's lease, as the executor's spans: start (durable) when
// it is taken; after an idle passivation, the deadline restores the
// runtime for the pause (McpSessionDO.restore_runtime_for_approval, whose
// init span counts the restored pause) and declines it: expire, then
// begin_resume when the decline reaches the code (outcome timeout); an
// in-memory pause that settles ends its lease with finish.
func TestDurablePauseLeaseIsTraced(t *testing.T) {
	rec := traced(t)
	e := newEnv(t, 32, shortPolicy())
	e.durablePause("s1", "exec-1")
	e.mu.Lock()
	e.restored["s1"] = []string{"exec-1"}
	e.mu.Unlock()
	start := awaitSpan(t, rec, session.LeaseStartSpan, "s1")
	if attr(start, session.ExecutionKey).AsString() != "exec-1" || !attr(start, session.DurableKey).AsBool() ||
		attr(start, session.LeaseDeadlineMsKey).AsInt64() != t0.Add(4*time.Minute).UnixMilli() {
		t.Fatalf("lease start span: %v", start.Attributes())
	}
	e.clk.Advance(3 * time.Minute)
	if d := awaitSpan(t, rec, session.DisposeSpan, "s1"); attr(d, session.DisposeReasonKey).AsString() != session.DisposeIdle ||
		attr(d, session.DurablePausedKey).AsInt64() != 1 {
		t.Fatalf("idle dispose span: %v", d.Attributes())
	}
	e.clk.Advance(time.Minute) // the deadline
	restore := awaitSpan(t, rec, session.RestoreForApprovalSpan, "s1")
	expire := awaitSpan(t, rec, session.LeaseExpireSpan, "s1")
	resume := awaitSpan(t, rec, session.LeaseBeginResumeSpan, "s1")
	if attr(expire, session.ExecutionKey).AsString() != "exec-1" || attr(resume, session.DecisionKey).AsString() != "timeout" {
		t.Fatalf("expire %v, begin_resume %v", expire.Attributes(), resume.Attributes())
	}
	var restoredInit sdktrace.ReadOnlySpan
	for _, s := range spansOf(rec, session.InitSpan, "s1") {
		if s.Parent().SpanID() == restore.SpanContext().SpanID() {
			restoredInit = s
		}
	}
	if restoredInit == nil || attr(restoredInit, session.DurablePausedKey).AsInt64() != 1 || !attr(restoredInit, session.RestoreKey).AsBool() {
		t.Fatalf("no init span under the restore for the approval deadline counting the restored pause: %v", restoredInit)
	}
	// The deadline's decline released the lease (expire includes the
	// release); an in-memory pause that settles releases it with finish.
	e.create("s2")
	e.rt("s2").hooks.Paused("exec-2", e.clk.Now().Add(4*time.Minute))
	if s := awaitSpan(t, rec, session.LeaseStartSpan, "s2"); attr(s, session.DurableKey).AsBool() {
		t.Fatal("an in-memory pause's lease says durable")
	}
	e.rt("s2").hooks.Settled("exec-2")
	if f := awaitSpan(t, rec, session.LeaseFinishSpan, "s2"); attr(f, session.ExecutionKey).AsString() != "exec-2" {
		t.Fatalf("finish span: %v", f.Attributes())
	}
}

// With tracing off (installed, then turned off) the lifecycle records
// nothing: builds, a cap eviction and its disposal run no span code.
func TestLifecycleTracingOffRecordsNothing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracing.Install(tp)() // installed, then off again
	e := newEnv(t, 2, shortPolicy())
	e.create("A")
	e.create("B")
	e.create("C")
	eventually(t, "cap eviction", func() bool { return e.disposals("cap") == 1 })
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("tracing off recorded %d spans", n)
	}
}

// The executor's markActivity writes the last activity durably; here the
// idle alarm writes it when it finds the session active within the
// timeout: that write is the span McpSessionDO.markActivity of the
// session, a root (the idle alarm, like the idle disposal's), with the
// idle time the alarm saw, once for one write.
func TestPersistedActivityIsTheMarkActivitySpan(t *testing.T) {
	rec := traced(t)
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	e.clk.Advance(2 * time.Minute)
	e.access("s1", alice) // activity at t0+2m
	e.clk.Advance(time.Minute)
	s := awaitSpan(t, rec, session.MarkActivitySpan, "s1")
	if got := attr(s, session.IdleMsKey).AsInt64(); got != time.Minute.Milliseconds() {
		t.Errorf("idle_ms %d, want %d", got, time.Minute.Milliseconds())
	}
	if s.Parent().IsValid() {
		t.Errorf("parent %s, want a root (the idle alarm is the activation's own timer)", s.Parent().SpanID())
	}
	if n := len(spansOf(rec, session.MarkActivitySpan, "s1")); n != 1 {
		t.Errorf("%d markActivity spans, want 1", n)
	}
}
