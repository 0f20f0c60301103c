package systemtest

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// A real code-mode node's execute call that pauses, and its resume, as
// spans (in-process recorder; the Jaeger test reads the same back from a
// collector): the engine's spans continue the execute tool's trace, the
// sandbox worker process's part is the run's child, the tool call is
// dispatched under the run and the OpenAPI request under the dispatch;
// the decision's resume span is under the resume tool's span.
func TestCodeModeSpansOfARealNode(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %v", sc)
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
		byName[s.Name()] = s
	}
	for child, parent := range map[string]string{
		"mcp.execute":                     "execute_tool execute",
		"executor.code.exec":              "mcp.execute",
		"executor.code.untrusted-sandbox": "executor.code.exec",
		"mcpgrain.sandbox.compile":        "executor.code.untrusted-sandbox",
		"mcp.tool.dispatch":               "executor.code.exec",
		"POST /todos":                     "mcp.tool.dispatch",
		"mcp.execute.resume":              "execute_tool resume",
	} {
		s, ok := byName[child]
		if !ok {
			t.Errorf("no span %s", child)
			continue
		}
		if p, ok := byID[s.Parent().SpanID().String()]; !ok || p.Name() != parent {
			t.Errorf("%s's parent is not %s", child, parent)
		}
	}
	if s, ok := byName["mcp.execute"]; ok && attrOf(s, "mcp.execute.paused_execution_id") != id {
		t.Errorf("mcp.execute attributes %v, want the pause %s", s.Attributes(), id)
	}
}

// attrOf is span s's attribute key in string form ("" for none).
func attrOf(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
