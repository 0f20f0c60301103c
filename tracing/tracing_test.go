package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// recording installs a recording provider for the test and returns its recorder.
func recording(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	return rec
}

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
	headerTrace = "0af7651916cd43dd8448eb211c80319c"
)

func TestStartServerTakesTheParentFromMetaAndLinksTheHTTPOne(t *testing.T) {
	rec := recording(t)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"traceparent":"00-` + clientTrace + `-` + clientSpan + `-01"}}}`
	r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	r.Header.Set("Traceparent", "00-"+headerTrace+"-b7ad6b7169203331-01")
	r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	_, span := StartServer(context.Background(), Request{HTTP: r, Body: []byte(body), Session: "s1"})
	EndServer(span, 200, "")
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1", len(spans))
	}
	s := spans[0]
	if s.Name() != "tools/call echo" || s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q kind %v, want %q server", s.Name(), s.SpanKind(), "tools/call echo")
	}
	if got := s.Parent().TraceID().String(); got != clientTrace || s.Parent().SpanID().String() != clientSpan {
		t.Errorf("parent %s/%s, want the _meta traceparent %s/%s", got, s.Parent().SpanID(), clientTrace, clientSpan)
	}
	if len(s.Links()) != 1 || s.Links()[0].SpanContext.TraceID().String() != headerTrace {
		t.Errorf("links %v, want the HTTP traceparent", s.Links())
	}
	want := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "jsonrpc.request.id": "7",
		"mcp.session.id": "s1", "mcp.protocol.version": "2025-06-18"}
	for _, kv := range s.Attributes() {
		if w, ok := want[string(kv.Key)]; ok {
			if kv.Value.String() != w {
				t.Errorf("%s = %q, want %q", kv.Key, kv.Value.String(), w)
			}
			delete(want, string(kv.Key))
		}
	}
	if len(want) != 0 {
		t.Errorf("attributes missing: %v", want)
	}
}

// An initialize has no Mcp-Protocol-Version header yet: its span takes
// the version the client asks for from params.protocolVersion, whether the
// gateway parsed the body (Parsed) or the span decodes it; a string id is
// recorded unquoted, a numeric one as written.
func TestInitializeSpanHasTheRequestedProtocolVersion(t *testing.T) {
	rec := recording(t)
	body := `{"jsonrpc":"2.0","id":"a1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`
	r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	_, span := StartServer(context.Background(), Request{HTTP: r, Body: []byte(body)})
	EndServer(span, 200, "")
	_, span = StartServer(context.Background(), Request{HTTP: r, Body: []byte(body),
		Parsed: &Message{Method: "initialize", ProtocolVersion: "2025-11-25", ID: []byte("12")}})
	EndServer(span, 200, "")
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, id := range []string{"a1", "12"} {
		got := map[string]string{}
		for _, kv := range spans[i].Attributes() {
			got[string(kv.Key)] = kv.Value.String()
		}
		if spans[i].Name() != "initialize" || got["mcp.protocol.version"] != "2025-11-25" || got["jsonrpc.request.id"] != id {
			t.Errorf("span %d: %q %v, want initialize with version 2025-11-25 and id %s", i, spans[i].Name(), got, id)
		}
	}
}

func TestInjectExtractCarriesTheSpanAcrossAMessage(t *testing.T) {
	recording(t)
	ctx, span := Start(context.Background(), "gateway")
	defer span.End()
	carrier := Inject(ctx)
	got := trace.SpanContextFromContext(Extract(context.Background(), carrier))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsRemote() {
		t.Errorf("extracted %v, want the remote context of %v", got, span.SpanContext())
	}
}

func TestOffCostsNoAllocations(t *testing.T) {
	if On() {
		t.Fatal("tracing on without Install")
	}
	ctx := context.Background()
	msg := struct{}{}
	histogram := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h"})
	allocs := testing.AllocsPerRun(100, func() {
		c, end := Receive(ctx, "session", msg)
		end()
		_, s := Start(c, "x")
		s.End()
		_ = Inject(c)
		c2, slot := WithSlot(c)
		ObserveSpan(slot.SpanContext(), histogram, 1)
		Observe(c2, histogram, 1)
		_ = Remote(c2, msg)
		_, _ = TakeReceive(c2)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per call with tracing off, want 0", allocs)
	}
}

func TestHandlerStampsTraceAndSpanIDs(t *testing.T) {
	recording(t)
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewTextHandler(&buf, nil))).With("component", "x")
	ctx, span := Start(context.Background(), "op")
	log.InfoContext(ctx, "hello")
	span.End()
	log.Info("no span")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "trace_id="+span.SpanContext().TraceID().String()) || !strings.Contains(lines[0], "span_id="+span.SpanContext().SpanID().String()) {
		t.Errorf("line with a span lacks its ids: %q", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line without a span has a trace id: %q", lines[1])
	}
}

// The W3C keys go through an http.Header under their canonical names
// (what net/http and propagation.HeaderCarrier use), and reading them
// allocates nothing: the gateway reads them on every request.
func TestHeaderCarrierUsesCanonicalKeysWithoutAllocating(t *testing.T) {
	recording(t)
	ctx, span := Start(context.Background(), "s")
	defer span.End()
	h := http.Header{}
	otel.GetTextMapPropagator().Inject(ctx, Header(h))
	if h.Get("traceparent") == "" || len(h["Traceparent"]) != 1 {
		t.Fatalf("header after inject: %v", h)
	}
	back := otel.GetTextMapPropagator().Extract(context.Background(), Header(h))
	if got := trace.SpanContextFromContext(back); !got.Equal(span.SpanContext().WithRemote(true)) {
		t.Errorf("extracted %v, want %v", got, span.SpanContext())
	}
	if n := testing.AllocsPerRun(100, func() { _ = Header(h).Get("traceparent") }); n != 0 {
		t.Errorf("Get allocates %v times, want 0", n)
	}
	if a, b := Name("p", "k"), Name("p", "k"); a != "p k" || b != a {
		t.Errorf("Name: %q %q", a, b)
	}
}

// Exemplars are limited to one per histogram and latency range per
// interval: a second observation in the same range within the interval
// gets none, one in another range or on another histogram gets its own,
// and one after the interval gets one again; a negative interval lifts
// the limit.
func TestExemplarsAreLimitedPerHistogramAndRange(t *testing.T) {
	var now int64 = 1_000_000_000
	l := limiter{now: func() int64 { return now }}
	h1 := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "a"})
	h2 := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "b"})
	const every = time.Second
	steps := []struct {
		name    string
		o       prometheus.Observer
		v       float64
		advance time.Duration
		want    bool
	}{
		{"first", h1, 0.003, 0, true},
		{"same range, same instant", h1, 0.0031, 0, false},
		{"same range, within the interval", h1, 0.0035, 999 * time.Millisecond, false},
		// Two that share a slot (a hash collision, rare) share its limit.
		{"other histogram", h2, 0.003, 0, slotOf(h2, 0.003) != slotOf(h1, 0.003)},
		{"other range", h1, 0.5, 0, slotOf(h1, 0.5) != slotOf(h1, 0.003) && slotOf(h1, 0.5) != slotOf(h2, 0.003)},
		{"after the interval", h1, 0.003, time.Millisecond, true},
	}
	for _, s := range steps {
		now += int64(s.advance)
		if got := l.allow(s.o, s.v, every); got != s.want {
			t.Errorf("%s: allowed %v, want %v", s.name, got, s.want)
		}
	}
	for range 3 {
		if !l.allow(h1, 0.003, -1) {
			t.Fatal("a negative interval limited an exemplar")
		}
	}
}

// carrier is a message carrying a trace context (as HttpExchange does).
type carrier map[string]string

func (c carrier) GetTraceContext() map[string]string { return c }

// A handler started in a grain's turn takes over the turn's receive span:
// the turn's end then leaves it open, the handler ends it, and nobody can
// take it twice; a span not taken ends with the turn and cannot be taken
// after it.
func TestTakeReceiveHandsTheSpanToTheHandler(t *testing.T) {
	rec := recording(t)
	ctx, gw := Start(context.Background(), "gateway")
	msg := carrier(Inject(ctx))
	gw.End()

	turn, endTurn := Receive(context.Background(), "session", msg)
	span, ok := TakeReceive(turn)
	if !ok || !span.IsRecording() {
		t.Fatalf("TakeReceive: ok %v, recording %v; want the turn's span", ok, span.IsRecording())
	}
	if _, again := TakeReceive(turn); again {
		t.Error("the span was taken twice")
	}
	endTurn()
	if n := len(rec.Ended()); n != 1 {
		t.Fatalf("%d spans ended after the turn, want 1 (the gateway's): the taken span ended with the turn", n)
	}
	span.End()
	if got := rec.Ended(); len(got) != 2 || got[1].Name() != "mcpgrain.grain.receive session" || got[1].Parent().SpanID() != gw.SpanContext().SpanID() {
		t.Errorf("ended %v, want the receive span, the gateway's child, ended by the handler", got)
	}

	turn, endTurn = Receive(context.Background(), "session", msg)
	endTurn()
	if _, ok := TakeReceive(turn); ok {
		t.Error("a receive span was taken after its turn ended it")
	}
	if n := len(rec.Ended()); n != 3 {
		t.Errorf("%d spans ended, want 3", n)
	}
	if _, ok := TakeReceive(context.Background()); ok {
		t.Error("TakeReceive found a span in a context without one")
	}
}
