package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Handler wraps an slog.Handler so that a record logged with a context
// holding a span (logger.InfoContext(ctx, ...)) carries trace_id and
// span_id: a log line leads to its trace. Records without a span pass
// through unchanged.
type Handler struct {
	slog.Handler
}

// NewHandler returns h stamping records with their trace ids.
func NewHandler(h slog.Handler) *Handler { return &Handler{Handler: h} }

// Handle adds trace_id and span_id when ctx holds a valid span context.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r = r.Clone()
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{Handler: h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{Handler: h.Handler.WithGroup(name)}
}
