package mcpupstream_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/actors/tools/mcpupstream"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// A call to an upstream MCP tool is a CLIENT span `tools/call {name}`
// whose context the upstream gets in params._meta.traceparent (as MCP
// specifies), so the upstream's span is its child; the span names the
// tool, never its arguments.
func TestAnUpstreamCallCarriesItsSpanInMeta(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })

	u := newUpstream(t)
	var mu sync.Mutex
	var got map[string]any
	u.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				mu.Lock()
				got = req.GetParams().GetMeta()
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	src := u.connect(t, mcpupstream.Options{})
	ctx, root := tracing.Start(t.Context(), "dispatch")
	if _, err := src.Call(ctx, "read_file", map[string]any{"path": "/secret-path-77"}); err != nil {
		t.Fatal(err)
	}
	root.End()
	var call sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "tools/call read_file" {
			call = s
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "secret-path-77") {
				t.Errorf("span %s attribute %s carries the argument", s.Name(), kv.Key)
			}
		}
	}
	if call == nil {
		t.Fatal("no tools/call read_file span")
	}
	if call.SpanKind() != trace.SpanKindClient || call.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("span kind %v parent %s, want a CLIENT span under the dispatch span", call.SpanKind(), call.Parent().SpanID())
	}
	mu.Lock()
	defer mu.Unlock()
	if tp, _ := got["traceparent"].(string); !strings.Contains(tp, call.SpanContext().SpanID().String()) ||
		!strings.Contains(tp, call.SpanContext().TraceID().String()) {
		t.Errorf("the upstream got _meta %v, want the client span's traceparent", got)
	}
}
