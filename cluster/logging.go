package cluster

import (
	"context"
	"log/slog"
)

// protoactorHandler adapts protoactor's logs to ours: it tags them with
// component=protoactor and demotes them one level (INFO→DEBUG, ERROR→WARN).
// protoactor logs routine events at INFO (endpoint connected, actor system
// started) and expected faults at ERROR (a connection to a member that just
// died), which membership and the request retry path already handle; at
// the default INFO level only its warnings and (demoted) errors show.
type protoactorHandler struct{ inner slog.Handler }

func (h protoactorHandler) demote(l slog.Level) slog.Level {
	switch {
	case l >= slog.LevelError:
		return slog.LevelWarn
	case l >= slog.LevelWarn:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}

func (h protoactorHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, h.demote(l))
}

func (h protoactorHandler) Handle(ctx context.Context, r slog.Record) error {
	r2 := slog.NewRecord(r.Time, h.demote(r.Level), r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool { r2.AddAttrs(a); return true })
	return h.inner.Handle(ctx, r2)
}

func (h protoactorHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return protoactorHandler{h.inner.WithAttrs(as)}
}

func (h protoactorHandler) WithGroup(name string) slog.Handler {
	return protoactorHandler{h.inner.WithGroup(name)}
}

func protoactorLogger(base *slog.Logger) *slog.Logger {
	return slog.New(protoactorHandler{base.Handler()}).With("component", "protoactor")
}
