package tasks

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// A task's run is a root span linked to the span that launched it and to
// the task's creation, and the tool's request carries the run's context
// (the tool's execute_tool span reads it from the headers): the round's
// work is one trace, linked back to the request that created the task.
func TestATaskRunIsARootLinkedToItsCreation(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })

	var mu sync.Mutex
	var seen string
	r := &runner{newServer: func() (*mcp.Server, func(), error) {
		s := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
		s.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				seen = req.GetExtra().Header.Get("Traceparent")
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
		return s, func() {}, nil
	}}
	t.Cleanup(r.close)

	_, creation := tracing.Start(context.Background(), "creation")
	creation.End()
	update, updater := tracing.Start(context.Background(), "tasks/update")
	ctx, span := startRun(update, creation.SpanContext(), 2, 1, "slow")
	out := r.run(ctx, nil, "task-1", []byte(`{"name":"slow","arguments":{"secret":"s3cr3t-arg"}}`), nil, "")
	endRun(span, out)
	updater.End()
	if out.err != nil {
		t.Fatalf("run: %+v", out.err)
	}
	var run sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == RunSpan {
			run = s
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "s3cr3t-arg") {
				t.Errorf("span %s attribute %s carries the argument", s.Name(), kv.Key)
			}
		}
	}
	if run == nil {
		t.Fatal("no run span")
	}
	if run.Parent().IsValid() {
		t.Errorf("the run's parent is %v, want a root", run.Parent())
	}
	links := map[trace.SpanID]bool{}
	for _, l := range run.Links() {
		links[l.SpanContext.SpanID()] = true
	}
	if len(links) != 2 || !links[creation.SpanContext().SpanID()] || !links[updater.SpanContext().SpanID()] {
		t.Errorf("links %v, want the creation %s and the launcher %s", run.Links(), creation.SpanContext().SpanID(), updater.SpanContext().SpanID())
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(seen, run.SpanContext().SpanID().String()) {
		t.Errorf("the tool's request had traceparent %q, want the run span %s", seen, run.SpanContext().SpanID())
	}
}
