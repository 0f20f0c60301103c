package codemode_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// The executor's host tool spans in browser mode: the tool span
// (execute_tool, the executor's mcp.host.tool.execute / .resume) of a
// call that paused carries mcp.execute.paused, the paused execution id
// and where the pause came from (execute, browser_resume); a resume's wait
// for the user's decision is mcp.host.tool.resume.browser_approval (after
// its .start marker), and a wait that got no decision answers with
// mcp.host.tool.resume.user_approval_required — all under the resume's
// tool span, with the execution id.
func TestHostToolSpansOfABrowserModeResume(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	h := newHarness(t, harnessOptions{})
	h.server.AddReceivingMiddleware(mcpruntime.TraceTools)
	cs := h.connect(t, clientOptions{mode: "browser"})

	e1 := pauseBrowser(t, cs, orderTwo)
	h.rt.decisions <- decision{} // no decision: user_approval_required again
	call(t, cs, "resume", map[string]any{"executionId": e1})
	h.rt.decisions <- decision{resp: engine.Response{Action: engine.Accept}, ok: true}
	_, sc := call(t, cs, "resume", map[string]any{"executionId": e1})
	e2, _ := sc["executionId"].(string)
	if sc["status"] != "user_approval_required" || e2 == "" || e2 == e1 {
		t.Fatalf("resume after approval: %v, want the next pause", sc)
	}

	var tools, waits, marks, required []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "execute_tool execute", "execute_tool resume":
			tools = append(tools, s)
		case codemode.BrowserApprovalSpan:
			waits = append(waits, s)
		case codemode.BrowserApprovalStartSpan:
			marks = append(marks, s)
		case codemode.UserApprovalRequiredSpan:
			required = append(required, s)
		}
	}
	if len(tools) != 3 || len(waits) != 2 || len(marks) != 2 || len(required) != 1 {
		t.Fatalf("%d tool spans, %d waits, %d start markers, %d user_approval_required; want 3, 2, 2, 1",
			len(tools), len(waits), len(marks), len(required))
	}
	want := []map[string]string{
		{"mcp.execute.paused": "true", "mcp.execute.paused_execution_id": e1, "mcp.execute.pause_source": "execute"},
		{"mcp.execute.paused": ""}, // no decision: nothing ran, no pause answered
		{"mcp.execute.paused": "true", "mcp.execute.paused_execution_id": e2, "mcp.execute.pause_source": "browser_resume"},
	}
	for i, s := range tools {
		for k, v := range want[i] {
			if got := attrOf(s, k); got != v {
				t.Errorf("%s #%d: %s = %q, want %q", s.Name(), i, k, got, v)
			}
		}
	}
	resumes := map[string]bool{tools[1].SpanContext().SpanID().String(): true, tools[2].SpanContext().SpanID().String(): true}
	for _, s := range append(append(waits, marks...), required...) {
		if attrOf(s, "mcp.execution.id") != e1 {
			t.Errorf("%s: execution %q, want %s", s.Name(), attrOf(s, "mcp.execution.id"), e1)
		}
		if !resumes[s.Parent().SpanID().String()] {
			t.Errorf("%s: parent %s, not a resume's tool span", s.Name(), s.Parent().SpanID())
		}
	}
	if required[0].Parent().SpanID() != tools[1].SpanContext().SpanID() {
		t.Errorf("user_approval_required's parent %s, want the first resume's span", required[0].Parent().SpanID())
	}
	if attrOf(waits[0], "mcpgrain.approval.decided") != "false" || attrOf(waits[1], "mcpgrain.approval.decided") != "true" {
		t.Errorf("waits decided %q, %q; want false, true", attrOf(waits[0], "mcpgrain.approval.decided"), attrOf(waits[1], "mcpgrain.approval.decided"))
	}
}

func attrOf(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
