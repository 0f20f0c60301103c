package tracing

import (
	"context"
	"math"
	"reflect"
	"sync/atomic"
	"time"

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

// ObserveSpan is Observe with the span's context given. Exemplars are
// rate-limited (Options.ExemplarInterval): an observation whose
// histogram and latency range (a power of two of v) had one less than the
// interval ago is observed without one. A histogram keeps the last
// exemplar of each bucket, and a scrape shows one per bucket, so the
// others would be overwritten unseen; each costs client_golang a labels
// map and a record.
func ObserveSpan(sc trace.SpanContext, o prometheus.Observer, v float64) {
	eo, ok := o.(prometheus.ExemplarObserver)
	if !On() || !ok || !sc.IsSampled() || !exemplars.allow(o, v, options().ExemplarInterval) {
		o.Observe(v)
		return
	}
	eo.ObserveWithExemplar(v, prometheus.Labels{ExemplarLabel: sc.TraceID().String()})
}

// DefaultExemplarInterval is the least time between two exemplars of one
// histogram's latency range unless Options.ExemplarInterval says
// otherwise: a second, well under any scrape interval.
const DefaultExemplarInterval = time.Second

// exemplarSlots is the number of (histogram, latency range) slots of the
// limiter: two that share a slot share its interval (exemplars only get
// rarer).
const exemplarSlots = 1024

// limiter allows one exemplar per slot per interval; its slots hold the
// time (now's nanoseconds) of their last exemplar.
type limiter struct {
	now   func() int64
	slots [exemplarSlots]atomic.Int64
}

var exemplars = limiter{now: func() int64 { return time.Now().UnixNano() }}

// allow reports whether observer o may take an exemplar for v now, and if
// so claims its slot. every is the interval: zero is
// DefaultExemplarInterval, below zero no limit.
func (l *limiter) allow(o prometheus.Observer, v float64, every time.Duration) bool {
	switch {
	case every < 0:
		return true
	case every == 0:
		every = DefaultExemplarInterval
	}
	slot := &l.slots[slotOf(o, v)]
	now, last := l.now(), slot.Load()
	if last != 0 && now-last < int64(every) {
		return false
	}
	return slot.CompareAndSwap(last, now)
}

// slotOf is the limiter slot of o's observation v: o's identity (the
// histogram's pointer) and v's binary exponent, hashed.
func slotOf(o prometheus.Observer, v float64) uint64 {
	var id uintptr
	if rv := reflect.ValueOf(o); rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Func {
		id = rv.Pointer()
	}
	_, exp := math.Frexp(v)
	h := (uint64(id)>>3)*0x9e3779b97f4a7c15 ^ uint64(int64(exp))*0xbf58476d1ce4e5b9
	return (h ^ h>>29) % exemplarSlots
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
