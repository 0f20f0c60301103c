package tracing

import (
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/propagation"
)

// Header is an http.Header as the propagators' carrier, like
// propagation.HeaderCarrier but without canonicalising the W3C keys on
// every Get and Set (traceparent, tracestate, baggage are looked up by
// their canonical forms, which allocates nothing): the gateway's span,
// the exchange's and execute_tool read and write these keys on every
// request.
type Header http.Header

var _ propagation.TextMapCarrier = Header(nil)

// canonical is the canonical header key of a propagator's key.
func canonical(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return http.CanonicalHeaderKey(key)
}

// Get implements propagation.TextMapCarrier.
func (h Header) Get(key string) string {
	if v := h[canonical(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (h Header) Set(key, value string) { h[canonical(key)] = []string{value} }

// Keys implements propagation.TextMapCarrier.
func (h Header) Keys() []string { return propagation.HeaderCarrier(h).Keys() }

// names caches span names made of a prefix and a short, bounded suffix
// (a grain kind, an HTTP method), so that a request does not allocate its
// span's name.
var names sync.Map // [2]string → string

// Name is prefix + " " + suffix, allocated once per pair. Only for
// suffixes from a small fixed set (kinds, methods), never from a request.
func Name(prefix, suffix string) string {
	k := [2]string{prefix, suffix}
	if n, ok := names.Load(k); ok {
		return n.(string)
	}
	n, _ := names.LoadOrStore(k, prefix+" "+suffix)
	return n.(string)
}
