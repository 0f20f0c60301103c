package tasks

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// RunSpan is the span of one run of a task's tool (a round: the first,
// one after tasks/update, or a re-run after its node was lost). It is a
// root of its own — the request that created the task was answered at
// once, long before the work ends — linked to the span that launched it
// (the creation, the tasks/update, or the lease reminder's firing, itself
// linked to the span that set the lease) and to the task's creation when
// this activation saw it. The tool call's spans (execute_tool, code mode's
// engine spans) are its children.
const RunSpan = "mcpgrain.task.run"

// The attributes of a run's span.
const (
	TaskRoundKey   = attribute.Key("mcpgrain.task.round")
	TaskAttemptKey = attribute.Key("mcpgrain.task.attempt")
	TaskOutcomeKey = attribute.Key("mcpgrain.task.outcome")
	errorTypeKey   = attribute.Key("error.type")
)

// startRun starts the span of a run launched under ctx (tracing on only:
// the caller checks); created is the task's creation span (invalid: not
// known here).
func startRun(ctx context.Context, created trace.SpanContext, round, attempt int, tool string) (context.Context, trace.Span) {
	var links []trace.Link
	launcher := trace.SpanContextFromContext(ctx)
	if launcher.IsValid() {
		links = append(links, trace.Link{SpanContext: launcher})
	}
	if created.IsValid() && !created.Equal(launcher) {
		links = append(links, trace.Link{SpanContext: created})
	}
	return tracing.Start(context.Background(), RunSpan, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(TaskRoundKey.Int(round), TaskAttemptKey.Int(attempt), tracing.ToolNameKey.String(tool)))
}

// endRun ends a run's span with its outcome: completed, input_required
// or failed (error.type: the JSON-RPC code; never the message).
func endRun(span trace.Span, out outcome) {
	switch {
	case out.err != nil:
		span.SetAttributes(TaskOutcomeKey.String(string(Failed)), errorTypeKey.Int(out.err.Code))
		span.SetStatus(codes.Error, "task run failed")
	case len(out.inputRequests) > 0:
		span.SetAttributes(TaskOutcomeKey.String(string(InputRequired)))
	default:
		span.SetAttributes(TaskOutcomeKey.String(string(Completed)))
	}
	span.End()
}

// injectRun puts ctx's trace context in the run's request headers: the
// tool's execute_tool span (mcpruntime.TraceTools) reads it there.
func injectRun(ctx context.Context, h http.Header) {
	if tracing.On() {
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// startContext is the trace context a TaskStart carries: ctx's span, else
// the request's traceparent header (the exchange's span), else none.
func startContext(ctx context.Context, h http.Header) map[string]string {
	if !tracing.On() {
		return nil
	}
	if c := tracing.Inject(ctx); c != nil {
		return c
	}
	if h.Get("Traceparent") == "" {
		return nil
	}
	return tracing.Inject(otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h)))
}
