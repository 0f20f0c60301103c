package exchange

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// The gateway's span reads the JSON-RPC error code of the answer from
// what is written (a JSON body or an SSE event): the first of a result
// or an error counts, a notification before the answer does not, and an
// "error" in a string or inside a result is not the answer's.
func TestRPCErrorCodeOfAWrittenAnswer(t *testing.T) {
	for _, c := range []struct {
		name, chunk, code string
		answered          bool
	}{
		{"error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`, "-32602", true},
		{"sse error", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32001,\"message\":\"x\"}}\n\n", "-32001", true},
		{"result", `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, "", true},
		{"result with an error key", `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"error":{"code":5}}}}`, "", true},
		{"escaped in a string", `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\"error\":{\"code\":1}"}}`, "", false},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, "", false},
		{"empty", ``, "", false},
	} {
		code, answered := rpcErrorCode([]byte(c.chunk))
		if code != c.code || answered != c.answered {
			t.Errorf("%s: (%q, %v), want (%q, %v)", c.name, code, answered, c.code, c.answered)
		}
	}
}

// The owner node's span of an exchange: started in a grain's turn that
// has a receive span, the handler takes that span over (no span of its
// own; the request's traceparent names the receive span, which ends when
// the handler returns, with the HTTP method); started without one, the
// handler gets an exchange.serve span, the gateway's child.
func TestTheHandlerTakesOverTheTurnsReceiveSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	gctx, gw := tracing.Start(context.Background(), "gateway")
	gw.End()
	sys, pid, got := frames(t)
	serveOnce := func(id string, turn context.Context) string { // the traceparent the handler saw
		m := exchangeTo(pid, id, false)
		m.TraceContext = tracing.Inject(gctx)
		seen := make(chan string, 1)
		_, err := Start(turn, sys, pid, m, "", func(w http.ResponseWriter, r *http.Request) {
			seen <- r.Header.Get("Traceparent")
			w.WriteHeader(http.StatusOK)
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		next(t, got)
		return <-seen
	}
	ended := func(name string) sdktrace.ReadOnlySpan {
		for _, s := range rec.Ended() {
			if s.Name() == name {
				return s
			}
		}
		return nil
	}

	m := exchangeTo(pid, "turn", false)
	m.TraceContext = tracing.Inject(gctx)
	turn, endTurn := tracing.Receive(context.Background(), "session", m)
	tp1 := serveOnce("t1", turn)
	endTurn()
	var rcv sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(5 * time.Second); rcv == nil && time.Now().Before(deadline); {
		rcv = ended("mcpgrain.grain.receive session") // the handler's goroutine ends it after the end frame
		time.Sleep(time.Millisecond)                  // polling, bounded by the deadline
	}
	if rcv == nil {
		t.Fatal("the receive span never ended")
	}
	if want := "00-" + rcv.SpanContext().TraceID().String() + "-" + rcv.SpanContext().SpanID().String() + "-01"; tp1 != want {
		t.Errorf("handler's traceparent %q, want the receive span's %q", tp1, want)
	}
	var method string
	for _, kv := range rcv.Attributes() {
		if kv.Key == "http.request.method" {
			method = kv.Value.AsString()
		}
	}
	if method != http.MethodPost || ended("mcpgrain.exchange.serve POST") != nil {
		t.Errorf("receive span's method %q (want POST), serve span %v (want none)", method, ended("mcpgrain.exchange.serve POST"))
	}

	tp2 := serveOnce("t2", context.Background())
	var serve sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(5 * time.Second); serve == nil && time.Now().Before(deadline); {
		serve = ended("mcpgrain.exchange.serve POST")
		time.Sleep(time.Millisecond) // polling, bounded by the deadline
	}
	if serve == nil || serve.Parent().SpanID() != gw.SpanContext().SpanID() || !strings.Contains(tp2, serve.SpanContext().SpanID().String()) {
		t.Errorf("without a receive span: serve span %v (want the gateway's child, named in the traceparent %q)", serve, tp2)
	}
}
