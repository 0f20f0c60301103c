package placement

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/cluster/store"
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

// ActivateSpan (+ " " + the grain kind) is a grain's activation on the
// node placement chose for it: ownership taken in the store (the epoch)
// and the grain's record loaded and handed to its Activate — the restore
// of a passivated, evicted or moved grain. It is recorded once the first
// request reaches the activation, as a child of that request's caller
// (the same parent as the grain.receive span that follows it), with the
// times the start took; a root when the request carries no trace context.
// An ephemeral activation, or one started for a request that creates its
// grain, reads nothing from the store and has no span.
const ActivateSpan = "mcpgrain.grain.activate"

// The attributes of an activation's span.
const (
	// ActivateRestoredKey: the store held the grain's record (a restore),
	// false for a grain not written yet.
	ActivateRestoredKey = attribute.Key("mcpgrain.grain.restored")
	// ActivateEpochKey is the ownership epoch the activation holds (0:
	// none yet, a CreatedByWrite grain not written).
	ActivateEpochKey = attribute.Key("mcpgrain.grain.epoch")
	// ActivateIdentityKey is the grain's identity within its kind (a
	// session's is its MCP session id).
	ActivateIdentityKey = attribute.Key("mcpgrain.grain.identity")
	errorTypeKey        = attribute.Key("error.type")
)

// startTrace is what an activation's start did, kept (tracing on only)
// until its first request gives the span a parent.
type startTrace struct {
	began, ended time.Time
	restored     bool
	epoch        uint64
	failed       bool
}

func newStartTrace(began time.Time, own store.Ownership, state activationState) *startTrace {
	return &startTrace{began: began, ended: time.Now(), restored: len(own.Record) > 0,
		epoch: own.Epoch, failed: state == stateFailed}
}

// traceStart records st as the activation's span, under the trace context
// msg (the activation's first request) carries.
func traceStart(ctx context.Context, kind, identity string, msg any, st *startTrace) {
	parent := tracing.Remote(ctx, msg)
	opts := []trace.SpanStartOption{trace.WithTimestamp(st.began), trace.WithAttributes(tracing.ReceiveKey.String(kind),
		ActivateIdentityKey.String(identity), ActivateRestoredKey.Bool(st.restored), ActivateEpochKey.Int64(int64(st.epoch)))}
	if !trace.SpanContextFromContext(parent).IsValid() {
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := tracing.Start(parent, ActivateSpan+" "+kind, opts...)
	if st.failed {
		span.SetAttributes(errorTypeKey.String("activation_failed"))
		span.SetStatus(codes.Error, "activation failed")
	}
	span.End(trace.WithTimestamp(st.ended))
}
