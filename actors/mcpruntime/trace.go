package mcpruntime

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// InitSpan is the name of the span of a session runtime's build (a
// creation, or a restore after passivation or a move): the executor's
// session init span, so the same query finds both. The session grain
// records it (session.InitSpan, with the residency attributes), around
// Build.
const InitSpan = session.InitSpan

// Build implements session.Builder: a handler for the session on the
// shared server, restored from its recorded state.
func (b *Builder) Build(ctx context.Context, in session.BuildInput) (session.Runtime, error) {
	return b.build(ctx, in)
}

// TraceTools is a receiving middleware for a node's shared servers
// (sessions', continuations', tasks') that records a tools/call as the span `execute_tool {gen_ai.tool.name}` (gen-ai
// semantic conventions) on the owner node, a child of the exchange's span
// whose context the grain put in the request's headers (exchange.Start):
// go-sdk runs a stateful session's handlers in its connection's context,
// not the request's.
func TraceTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if !tracing.On() || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		var h http.Header
		if ex := req.GetExtra(); ex != nil {
			h = ex.Header
		}
		if len(h["Traceparent"]) > 0 {
			// The request's, set by exchange.Start: ctx is the session's
			// connection's (its initialize's span, if any).
			ctx = otel.GetTextMapPropagator().Extract(ctx, tracing.Header(h))
		}
		attrs := []attribute.KeyValue{tracing.OperationKey.String("execute_tool"),
			tracing.ToolNameKey.String(call.Params.Name), tracing.MethodKey.String(method)}
		if c := exchange.CallerOf(h); c.Session != "" && !c.Sessionless {
			attrs = append(attrs, tracing.SessionKey.String(c.Session))
		}
		ctx, span := tracing.Start(ctx, "execute_tool "+call.Params.Name, trace.WithAttributes(attrs...))
		defer span.End()
		res, err := next(ctx, method, req)
		switch r, _ := res.(*mcp.CallToolResult); {
		case err != nil:
			span.SetAttributes(semconv.ErrorTypeKey.String("_OTHER"))
			span.SetStatus(codes.Error, err.Error())
		case r != nil && r.IsError:
			span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
			span.SetStatus(codes.Error, "tool error")
		}
		return res, err
	}
}
