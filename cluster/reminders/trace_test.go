package reminders_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// A reminder registered under a span fires with that span's trace
// context (ReminderFired.link_context), whether the node armed it when it
// was registered or found it by a scan of the store (the context is
// stored with the reminder, migration 18); registered with tracing off it
// carries none.
func TestAReminderCarriesTheSpanThatSetIt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	defer func() { _ = tp.Shutdown(context.Background()) }()
	defer uninstall()

	h := newHarness(t, 4)
	ctx, setter := tracing.Start(context.Background(), "setter")
	setter.End()
	want := setter.SpanContext().SpanID().String()
	o, err := h.st.Acquire(ctx, "probe/a", "n1")
	if err != nil {
		t.Fatal(err)
	}
	// Armed here at once (registered through the service) ...
	if err := h.svc.Register(ctx, "probe", "a", o.Epoch, store.Reminder{Name: "armed", DueAt: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	// ... and found by a scan (registered by another node).
	o2, _ := h.st.Acquire(ctx, "probe/b", "n2")
	if _, err := h.st.RegisterReminders(ctx, "probe/b", o2.Epoch, []store.Reminder{{Name: "scanned", DueAt: t0.Add(2 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	rs, err := h.st.Reminders(ctx, "probe/b")
	if err != nil || len(rs) != 1 || !strings.Contains(rs[0].Link, want) {
		t.Fatalf("stored %+v %v: want the setter's traceparent", rs, err)
	}
	h.svc.PollSync()
	h.clk.Advance(2 * time.Second)
	for range 2 {
		d := h.next()
		if tp := d.fired.GetLinkContext()["traceparent"]; !strings.Contains(tp, want) {
			t.Errorf("%s fired with link context %v, want the setter's span %s", d.fired.GetName(), d.fired.GetLinkContext(), want)
		}
	}

	uninstall() // tracing off: no context is stored nor carried
	if err := h.svc.Register(ctx, "probe", "a", o.Epoch, store.Reminder{Name: "untraced", DueAt: t0.Add(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(time.Second)
	if d := h.next(); len(d.fired.GetLinkContext()) != 0 {
		t.Errorf("fired with tracing off: link context %v, want none", d.fired.GetLinkContext())
	}
}
