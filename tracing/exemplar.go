package tracing

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// ExemplarLabel is the exemplar label of a latency histogram's
// observation made under a sampled span: the span's trace id, so a slow
// bucket on a dashboard leads to its trace. Exemplars are exposed only to a
// scraper that negotiates OpenMetrics (Accept:
// application/openmetrics-text), as Prometheus does.
const ExemplarLabel = "trace_id"

// Observe records v in o, with the trace id of ctx's span as its exemplar
// when tracing is on and that span is sampled (and o takes exemplars);
// off, it is o.Observe(v) after one atomic load, allocating nothing.
func Observe(ctx context.Context, o prometheus.Observer, v float64) {
	if !On() {
		o.Observe(v)
		return
	}
	ObserveSpan(trace.SpanContextFromContext(ctx), o, v)
}

// ObserveSpan is Observe with the span's context given.
func ObserveSpan(sc trace.SpanContext, o prometheus.Observer, v float64) {
	eo, ok := o.(prometheus.ExemplarObserver)
	if !On() || !ok || !sc.IsSampled() {
		o.Observe(v)
		return
	}
	eo.ObserveWithExemplar(v, prometheus.Labels{ExemplarLabel: sc.TraceID().String()})
}

// Slot receives the span context of the server span started under a
// request (StartServer), for a handler outside that span that observes
// the request's latency after it (its exemplar).
type Slot struct{ sc trace.SpanContext }

type slotKey struct{}

// WithSlot returns ctx with a new Slot for the server span that will be
// started under it, when tracing is on; ctx and nil when it is off.
func WithSlot(ctx context.Context) (context.Context, *Slot) {
	if !On() {
		return ctx, nil
	}
	s := &Slot{}
	return context.WithValue(ctx, slotKey{}, s), s
}

// SpanContext is the span context the slot received (invalid: none; nil
// slot: none).
func (s *Slot) SpanContext() trace.SpanContext {
	if s == nil {
		return trace.SpanContext{}
	}
	return s.sc
}

// fill gives ctx's slot, if any, the span context sc.
func fill(ctx context.Context, sc trace.SpanContext) {
	if s, ok := ctx.Value(slotKey{}).(*Slot); ok {
		s.sc = sc
	}
}
