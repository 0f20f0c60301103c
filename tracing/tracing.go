// Package tracing is mcpgrain's OpenTelemetry tracing: the switch and the
// tracer (Install; package tracing/otlp builds the node's exporting
// provider from the OTEL_* environment variables and --trace-endpoint),
// the spans of
// an MCP request on the gateway (StartServer, per the OpenTelemetry MCP
// semantic conventions), the trace context carried in the gateway→grain
// exchange (Inject, Extract) and the slog handler that stamps log records
// with trace_id and span_id (Handler).
//
// Tracing is off unless Install turned it on: then every function here
// returns at once on a check of one atomic flag (On), without allocating,
// so the hot path costs nothing measurable.
package tracing

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the name of mcpgrain's tracer.
const instrumentation = "github.com/mcpgrain/mcpgrain"

var on atomic.Bool

// On reports whether tracing is on (Install turned it on and its
// uninstall has not run).
func On() bool { return on.Load() }

// Options configures what the spans record beyond their defaults. The
// zero value is the default: no tool arguments, at most one exemplar a
// second per histogram and latency range.
type Options struct {
	// ToolArguments is the most bytes of a tools/call's arguments (the
	// JSON of its params.arguments) the gateway's span records, as
	// gen_ai.tool.call.arguments, cut at a UTF-8 boundary (see
	// ArgumentsTruncatedKey). Zero or less: none are recorded (arguments
	// may carry secrets; the node's --trace-tool-arguments).
	ToolArguments int
	// ExemplarInterval is the least time between two exemplars of one
	// latency histogram's latency range (a power of two of the observed
	// value; see ObserveSpan). Zero: DefaultExemplarInterval; below zero:
	// every sampled observation carries one.
	ExemplarInterval time.Duration
}

// Install turns tracing on with tp's tracer and the W3C propagators
// (traceparent, tracestate, baggage), installed globally too
// (otel.SetTracerProvider, otel.SetTextMapPropagator), with the default
// Options. The returned function turns tracing off again (the provider's
// shutdown is the caller's).
func Install(tp trace.TracerProvider) (uninstall func()) { return InstallWith(tp, Options{}) }

// InstallWith is Install with o.
func InstallWith(tp trace.TracerProvider, o Options) (uninstall func()) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	tracer.Store(&holder{t: tp.Tracer(instrumentation), o: o})
	on.Store(true)
	return func() { on.Store(false) }
}

type holder struct {
	t trace.Tracer
	o Options
}

// options are the installed Options (the zero value while tracing is off).
func options() Options {
	if h := tracer.Load(); h != nil && On() {
		return h.o
	}
	return Options{}
}

var tracer atomic.Pointer[holder]

// Tracer is mcpgrain's tracer (a no-op one while tracing is off).
func Tracer() trace.Tracer {
	if h := tracer.Load(); h != nil && On() {
		return h.t
	}
	return otel.Tracer(instrumentation)
}

// Start starts a span named name under ctx's span when tracing is on; off,
// it returns ctx and a non-recording span without allocating.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !On() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return Tracer().Start(ctx, name, opts...)
}

// Inject returns ctx's trace context (traceparent, tracestate, baggage) as
// a carrier map, or nil when tracing is off or ctx has no span.
func Inject(ctx context.Context) map[string]string {
	if !On() || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, c)
	return c
}

// Extract returns ctx carrying the remote trace context in carrier (as
// Inject made it); ctx itself when tracing is off or carrier is empty.
func Extract(ctx context.Context, carrier map[string]string) context.Context {
	if !On() || len(carrier) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(carrier))
}

// carrierOf is a message that carries a trace context (HttpExchange).
type carrierOf interface {
	GetTraceContext() map[string]string
}

// Remote returns ctx carrying the trace context msg carries (a message
// with a trace_context field, e.g. HttpExchange, as Inject made it); ctx
// itself when tracing is off or msg carries none.
func Remote(ctx context.Context, msg any) context.Context {
	if c, ok := msg.(carrierOf); ok && On() {
		return Extract(ctx, c.GetTraceContext())
	}
	return ctx
}

// ReceiveKey names the attribute of a grain.receive span with the grain
// kind that received the message.
const ReceiveKey = attribute.Key("mcpgrain.grain.kind")

// Receive starts the span of a grain activation handling msg, a child of
// the trace context msg carries (see Inject); with tracing off, or a
// message without one, it returns ctx and a no-op end.
func Receive(ctx context.Context, kind string, msg any) (context.Context, func()) {
	if !On() {
		return ctx, func() {}
	}
	c, ok := msg.(carrierOf)
	if !ok || len(c.GetTraceContext()) == 0 {
		return ctx, func() {}
	}
	ctx = Extract(ctx, c.GetTraceContext())
	ctx, span := Tracer().Start(ctx, Name("mcpgrain.grain.receive", kind),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(ReceiveKey.String(kind)))
	h := &handoff{span: span}
	return context.WithValue(ctx, handoffKey{}, h), h.end
}

// The states of a receive span's handoff.
const (
	handoffOpen int32 = iota
	handoffTaken
	handoffEnded
)

// handoff is a grain.receive span that a handler started in the grain's
// turn may take over (TakeReceive), to end it when it finishes.
type handoff struct {
	span  trace.Span
	state atomic.Int32
}

type handoffKey struct{}

// end ends the span at the end of the grain's turn, unless it was taken.
func (h *handoff) end() {
	if h.state.CompareAndSwap(handoffOpen, handoffEnded) {
		h.span.End()
	}
}

// TakeReceive takes over the grain.receive span ctx's turn started
// (Receive), for a handler started in that turn that goes on after it —
// an exchange's (exchange.Start) — so that the owner node records one
// span for the message and its handler rather than one each: the turn's
// end no longer ends the span, the handler ends it when it finishes. ok is
// false (and the span a no-op) when tracing is off, ctx has no receive
// span, or it was taken or ended already.
func TakeReceive(ctx context.Context) (span trace.Span, ok bool) {
	if !On() {
		return trace.SpanFromContext(context.Background()), false
	}
	h, _ := ctx.Value(handoffKey{}).(*handoff)
	if h == nil || !h.state.CompareAndSwap(handoffOpen, handoffTaken) {
		return trace.SpanFromContext(context.Background()), false
	}
	return h.span, true
}
