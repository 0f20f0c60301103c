// Package lazylog attaches attributes to a logger without formatting them
// up front: for the per-session and per-activation loggers of which most
// never log.
package lazylog

import (
	"context"
	"log/slog"
	"slices"
)

// With returns a logger that adds args (as slog.Logger.With takes them)
// to every record it logs. slog's text and JSON handlers format With's
// attributes at once into a copy of their state, a few hundred bytes per
// logger; here they are kept as they are until a record is logged. The
// output is the same as l.With(args...)'s.
func With(l *slog.Logger, args ...any) *slog.Logger {
	var r slog.Record
	r.Add(args...)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	return slog.New(handler{inner: l.Handler(), attrs: attrs})
}

// handler adds attrs to every record before inner handles it.
type handler struct {
	inner slog.Handler
	attrs []slog.Attr
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(h.attrs...)
	r.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
	return h.inner.Handle(ctx, out)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	return handler{inner: h.inner, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return h.inner.WithAttrs(h.attrs).WithGroup(name)
}
