package mcpupstream

import (
	"context"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// callTool sends one tools/call to the upstream, as a CLIENT span when
// tracing is on (the MCP semantic conventions: `tools/call {name}`) whose
// context travels in the request's params._meta (traceparent, tracestate,
// baggage, as MCP specifies), so the upstream's server span is its child.
// The span carries the tool's name and the upstream's session and host,
// never the arguments nor the result.
func (s *Source) callTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if !tracing.On() {
		return cs.CallTool(ctx, params)
	}
	ctx, span := tracing.Start(ctx, "tools/call "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.MethodKey.String("tools/call"), tracing.ToolNameKey.String(name),
			tracing.OperationKey.String("execute_tool"), tracing.SessionKey.String(cs.ID())))
	if u, err := url.Parse(s.endpoint); err == nil {
		span.SetAttributes(semconv.ServerAddress(u.Hostname()))
	}
	meta := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, meta)
	params.Meta = mcp.Meta{}
	for k, v := range meta {
		params.Meta[k] = v
	}
	res, err := cs.CallTool(ctx, params)
	switch {
	case err != nil:
		span.SetAttributes(semconv.ErrorTypeKey.String("_OTHER"))
		span.SetStatus(codes.Error, "tools/call failed")
	case res.IsError:
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		span.SetStatus(codes.Error, "tool error")
	}
	span.End()
	return res, err
}
