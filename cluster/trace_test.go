package cluster_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/placement"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// exchangeGrain answers every request with an empty ProbeState: a durable
// grain that takes HttpExchanges (which carry a trace context).
type exchangeGrain struct{}

func (exchangeGrain) Activate(context.Context, grain.Context, []byte) error { return nil }
func (exchangeGrain) Receive(context.Context, grain.Context, proto.Message) (proto.Message, error) {
	return &pb.ProbeState{}, nil
}
func (exchangeGrain) Deactivate(context.Context, grain.Context, grain.Reason) {}

// A grain's activation on the node placement chose — ownership taken, its
// record loaded: the restore of a passivated grain — is a span of the
// request that caused it (mcpgrain.grain.activate {kind}, a child of the
// caller's span, ended before the grain.receive span began), saying
// whether a record was restored and with which epoch. An activation
// already resident adds no span; without tracing nothing is recorded.
func TestAnActivationIsASpanOfTheRequestThatCausedIt(t *testing.T) {
	st := openStore(t)
	kind := grain.Kind{Name: "traced", New: func(string) grain.Grain { return exchangeGrain{} }}
	node := startNode(t, cluster.Config{Kinds: []grain.Kind{kind}, Membership: membership.NewNetwork().Provider(), Store: st})
	ctx := context.Background()
	// "passivated" has a record (written by an earlier owner); "fresh" none.
	prev, err := st.Acquire(ctx, grain.Key("traced", "passivated"), "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Save(ctx, prev.Grain, prev.Epoch, []byte("record")); err != nil {
		t.Fatal(err)
	}
	ask := func(ctx context.Context, id string) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		if _, err := node.Request(rctx, "traced", id, &pb.HttpExchange{TraceContext: tracing.Inject(ctx)}); err != nil {
			t.Fatalf("request %s: %v", id, err)
		}
	}
	ask(ctx, "untraced") // tracing off: no span, nothing kept for later

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	cctx, client := tracing.Start(ctx, "client")
	ask(cctx, "passivated")
	ask(cctx, "passivated") // resident now: no second activation
	ask(cctx, "fresh")
	ask(cctx, "untraced")
	client.End()

	activations := map[string]sdktrace.ReadOnlySpan{}
	var receives []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case placement.ActivateSpan + " traced":
			restored := attr(s, string(placement.ActivateRestoredKey))
			if activations[restored] != nil {
				t.Errorf("two activation spans with restored=%s", restored)
			}
			activations[restored] = s
		case "mcpgrain.grain.receive traced":
			receives = append(receives, s)
		}
	}
	if len(activations) != 2 || len(receives) != 4 {
		t.Fatalf("%d activation spans (by restored) and %d receive spans, want 2 and 4", len(activations), len(receives))
	}
	for restored, s := range activations {
		if s.Parent().SpanID() != client.SpanContext().SpanID() {
			t.Errorf("activation (restored=%s): parent %s, want the client's span %s", restored, s.Parent().SpanID(), client.SpanContext().SpanID())
		}
		if s.EndTime().After(receives[0].StartTime()) && restored == "true" {
			t.Errorf("the restore's activation ended at %v, after the first receive began (%v)", s.EndTime(), receives[0].StartTime())
		}
	}
	if id := attr(activations["true"], string(placement.ActivateIdentityKey)); id != "passivated" {
		t.Errorf("restored activation's identity %q, want passivated", id)
	}
	if e := attr(activations["true"], string(placement.ActivateEpochKey)); e != "2" {
		t.Errorf("restored activation's epoch %s, want 2 (the earlier owner held 1)", e)
	}
}

// attr is s's attribute key as a string ("" when absent).
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
