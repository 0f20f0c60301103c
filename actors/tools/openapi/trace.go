package openapi

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// do sends req, op's request, under its client span when tracing is on.
func (s *Source) do(req *http.Request, op *operation) (*http.Response, error) {
	if !tracing.On() {
		return s.client.Do(req)
	}
	span := s.startClient(req, op)
	resp, err := s.client.Do(req)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	endClient(req.Context(), span, status)
	return resp, err
}

// startClient starts the CLIENT span of an operation's HTTP request (the
// HTTP semantic conventions: named `{method} {url.template}`) and injects
// its context into the request's headers (traceparent, tracestate), so
// the API's server span is its child. Tracing on only: the caller checks.
// The span carries the method, the path template and the server, never
// the URL (its path and query hold the arguments) nor a header (the
// source's credentials).
func (s *Source) startClient(req *http.Request, op *operation) trace.Span {
	ctx, span := tracing.Start(req.Context(), op.method+" "+op.template, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(op.method), semconv.URLTemplate(op.template),
			semconv.ServerAddress(req.URL.Hostname()), tracing.ToolNameKey.String(op.tool.Path)))
	if p, err := strconv.Atoi(req.URL.Port()); err == nil {
		span.SetAttributes(semconv.ServerPort(p))
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	return span
}

// endClient ends an operation's span with the response's status (0: no
// response): a failure records error.type (the status code, or _OTHER).
func endClient(ctx context.Context, span trace.Span, status int) {
	switch {
	case status == 0:
		span.SetAttributes(semconv.ErrorTypeKey.String("_OTHER"))
		span.SetStatus(codes.Error, "request failed")
		if ctx.Err() != nil {
			span.SetStatus(codes.Error, "request cancelled")
		}
	case status >= 400:
		span.SetAttributes(semconv.HTTPResponseStatusCode(status), semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
	default:
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	span.End()
}
