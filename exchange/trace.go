package exchange

import (
	"bytes"
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// traced starts the gateway's span of the request to t (tracing is on:
// the caller checked) and returns the writer that records the status the
// client got and the function that ends the span. Its trace context goes
// to the grain in HttpExchange.trace_context (see outbound).
func traced(w http.ResponseWriter, r *http.Request, t Target) (http.ResponseWriter, *http.Request, func()) {
	ctx, span := tracing.StartServer(r.Context(), tracing.Request{HTTP: r, Body: t.Body, Session: sessionOf(t), Parsed: t.Trace})
	sw := &statusWriter{ResponseWriter: w}
	return sw, r.WithContext(ctx), func() { tracing.EndServer(span, sw.status, sw.rpcCode) }
}

// sessionOf is the MCP session id a request to t belongs to, if any.
func sessionOf(t Target) string {
	if t.Kind == KindSession {
		return t.ID
	}
	return ""
}

// statusWriter records the response status for the gateway's span, and
// the JSON-RPC error code of the answer (rpc.response.status_code).
type statusWriter struct {
	http.ResponseWriter
	status  int
	rpcCode string // the answer's JSON-RPC error code ("" for none)
	rpcSeen bool   // the answer (a result or an error) was written
}

// WriteHeader implements http.ResponseWriter.
func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if !s.rpcSeen {
		s.rpcCode, s.rpcSeen = rpcErrorCode(b)
	}
	return s.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (s *statusWriter) Flush() {
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the client's writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// serveSpan gives the exchange's handler (ctx) the owner node's span of
// the request: the grain.receive span of the grain's turn (turn), taken
// over, so that it lasts until the handler returns (one span for the
// message and its handler); a span of its own, a child of the gateway's
// span whose context m carries, when the turn has none to hand over.
// injectSpan puts its context in the request's headers. With tracing off
// or no trace context in m it returns ctx and a no-op end.
func serveSpan(turn, ctx context.Context, m *pb.HttpExchange) (context.Context, func()) {
	if !tracing.On() || len(m.GetTraceContext()) == 0 {
		return ctx, func() {}
	}
	var span trace.Span
	if s, ok := tracing.TakeReceive(turn); ok {
		span = s
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(m.GetMethod()))
		if b := baggage.FromContext(turn); b.Len() > 0 {
			ctx = baggage.ContextWithBaggage(ctx, b)
		}
		ctx = trace.ContextWithSpan(ctx, span)
	} else {
		ctx = tracing.Extract(ctx, m.GetTraceContext())
		ctx, span = tracing.Start(ctx, serveName(m.GetMethod()), trace.WithSpanKind(trace.SpanKindInternal))
	}
	return ctx, func() { span.End() }
}

// injectSpan puts the span context serveSpan gave ctx in the request's
// header too (traceparent, tracestate, baggage): go-sdk hands a handler
// the request's headers, not its context. Nothing with tracing off or no
// trace context in m (serveSpan made no span).
func injectSpan(ctx context.Context, m *pb.HttpExchange, header http.Header) {
	if !tracing.On() || len(m.GetTraceContext()) == 0 {
		return
	}
	otel.GetTextMapPropagator().Inject(ctx, tracing.Header(header))
}

// serveName is the exchange span's name for an HTTP method: the methods
// MCP uses from the name cache, anything else made afresh (a client's
// method must not grow the cache).
func serveName(method string) string {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
		return tracing.Name("mcpgrain.exchange.serve", method)
	}
	return "mcpgrain.exchange.serve " + method
}

var (
	rpcErrorMark  = []byte(`"error":{"code":`)
	rpcResultMark = []byte(`"result":`)
)

// rpcErrorCode reads one written chunk of an MCP answer (a JSON body, or
// an SSE event's data: go-sdk writes compact JSON): the JSON-RPC error
// code when the chunk holds an error, and whether it holds the answer
// (a result or an error; a notification before it holds neither). Only
// the first of the two marks counts: a result may carry an "error" key of
// its own. Text in a string is escaped (\"error\") and never matches.
func rpcErrorCode(b []byte) (code string, answered bool) {
	e, r := bytes.Index(b, rpcErrorMark), bytes.Index(b, rpcResultMark)
	switch {
	case e < 0 && r < 0:
		return "", false
	case e < 0 || (r >= 0 && r < e):
		return "", true
	}
	rest := b[e+len(rpcErrorMark):]
	n := 0
	for n < len(rest) && n < 12 && (rest[n] == '-' || rest[n] >= '0' && rest[n] <= '9') {
		n++
	}
	return string(rest[:n]), true
}
