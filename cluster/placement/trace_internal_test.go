package placement

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// A grain's handling of a reminder is a root span linked to the span that
// set the reminder (its trace context in the ReminderFired), not its child:
// the request that set it ended long ago. Without a context it is an
// unlinked root.
func TestAReminderFiredSpanIsARootLinkedToItsSetter(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })

	sctx, setter := tracing.Start(context.Background(), "setter")
	setter.End()
	turn, current := tracing.Start(context.Background(), "the activation's context")
	fired := &pb.ReminderFired{Name: "approval/exec_1", DueAtMs: 1000, FiredAtMs: 1250, LinkContext: tracing.Inject(sctx)}
	_, end := reminderSpan(turn, "session", fired)
	end()
	_, end = reminderSpan(turn, "session", &pb.ReminderFired{Name: "expiry"})
	end()
	current.End()

	var got []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == ReminderFiredSpan {
			got = append(got, s)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d reminder spans, want 2", len(got))
	}
	linked, plain := got[0], got[1]
	if linked.Parent().IsValid() || plain.Parent().IsValid() {
		t.Errorf("parents %v %v, want roots", linked.Parent(), plain.Parent())
	}
	if l := linked.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != setter.SpanContext().SpanID() {
		t.Errorf("links %v, want the setter %s", l, setter.SpanContext().SpanID())
	}
	if len(plain.Links()) != 0 {
		t.Errorf("links %v without a context, want none", plain.Links())
	}
	want := map[string]string{"mcpgrain.grain.kind": "session", "mcpgrain.reminder.name": "approval/exec_1",
		"mcpgrain.reminder.tardiness_ms": "250", "mcpgrain.reminder.linked": "true"}
	for _, kv := range linked.Attributes() {
		if w, ok := want[string(kv.Key)]; ok && kv.Value.String() != w {
			t.Errorf("%s = %s, want %s", kv.Key, kv.Value.String(), w)
		}
		delete(want, string(kv.Key))
	}
	if len(want) != 0 {
		t.Errorf("missing attributes %v", want)
	}
}
