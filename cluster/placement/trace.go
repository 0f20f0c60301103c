package placement

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// ReminderFiredSpan is the span of a grain handling one of its reminders:
// a root of its own (the firing is not part of the request that set the
// reminder, which ended long ago), linked to the span that set it when
// the reminder carries its trace context (ReminderFired.link_context).
const ReminderFiredSpan = "mcpgrain.reminder.fired"

// The attributes of a reminder's span.
const (
	ReminderNameKey  = attribute.Key("mcpgrain.reminder.name")
	ReminderLateKey  = attribute.Key("mcpgrain.reminder.tardiness_ms")
	ReminderLinksKey = attribute.Key("mcpgrain.reminder.linked")
)

// reminderSpan starts the span of a grain of kind handling f; with
// tracing off it returns ctx and a no-op end.
func reminderSpan(ctx context.Context, kind string, f *pb.ReminderFired) (context.Context, func()) {
	if !tracing.On() {
		return ctx, func() {}
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(tracing.ReceiveKey.String(kind),
		ReminderNameKey.String(f.GetName()), ReminderLateKey.Int64(f.GetFiredAtMs()-f.GetDueAtMs()))}
	sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), f.GetLinkContext()))
	if sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := tracing.Start(ctx, ReminderFiredSpan, opts...)
	span.SetAttributes(ReminderLinksKey.Bool(sc.IsValid()))
	return ctx, func() { span.End() }
}
