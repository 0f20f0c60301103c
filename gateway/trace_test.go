package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// With tracing on, a tools/call whose params._meta carries a traceparent is
// one trace through one node: the gateway's span (the client's span its
// parent), the grain's receive span — which the exchange's handler took
// over, so it lasts until the handler returned and carries the HTTP
// method — and the tool's execute_tool below it, with no separate
// exchange.serve span — for a stateful session (whose creation built its
// runtime in a McpSessionDO.init span) and for a sessionless call.
func TestToolCallSpansFollowTheRequest(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	addr := startNode(t, nil)
	for _, tc := range []struct{ name, version, kind, traceID string }{
		{"stateful", "2025-06-18", "session", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"sessionless", "", "continuation", "5bf92f3577b34da6a3ce929d0e0e4737"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := connect(t, addr, aliceToken, tc.version, nil)
			const clientSpan = "00f067aa0ba902b7"
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "traced"},
				Meta: mcp.Meta{"traceparent": "00-" + tc.traceID + "-" + clientSpan + "-01"}}
			if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
				t.Fatalf("echo: %+v %v", res, err)
			}
			receive := "mcpgrain.grain.receive " + tc.kind
			spans := awaitSpans(ctx, t, rec, tc.traceID, "tools/call echo", "execute_tool echo", receive)
			gw, rcv, tool := spans["tools/call echo"], spans[receive], spans["execute_tool echo"]
			if got := gw.Parent().SpanID().String(); got != clientSpan {
				t.Errorf("gateway span's parent %s, want the client's span %s from _meta", got, clientSpan)
			}
			if rcv.Parent().SpanID() != gw.SpanContext().SpanID() {
				t.Errorf("%s is not the gateway span's child", receive)
			}
			if tool.Parent().SpanID() != rcv.SpanContext().SpanID() {
				t.Errorf("execute_tool is not the %s span's child", receive)
			}
			if rcv.EndTime().Before(tool.EndTime()) {
				t.Errorf("%s ended before execute_tool: the handler did not take it over", receive)
			}
			if got := attrs(rcv)["http.request.method"]; got != "POST" {
				t.Errorf("%s: http.request.method %q, want POST", receive, got)
			}
			if _, ok := spans["mcpgrain.exchange.serve POST"]; ok {
				t.Errorf("a separate exchange.serve span beside %s", receive)
			}
		})
	}
	var init bool
	for _, s := range rec.Ended() {
		init = init || s.Name() == mcpruntime.InitSpan && s.Parent().IsValid()
	}
	if !init {
		t.Errorf("no %s span under the stateful session's creation", mcpruntime.InitSpan)
	}
}

// A request answered with a JSON-RPC error (here a tools/call of a tool
// that does not exist, on a stateful session) has the error's code on the
// gateway's span as rpc.response.status_code and error.type, with an
// error status; the HTTP status is 200 all the same.
func TestAJSONRPCErrorIsOnTheGatewaySpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	addr := startNode(t, nil)
	cs := connect(t, addr, aliceToken, "2025-06-18", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const traceID = "6bf92f3577b34da6a3ce929d0e0e4738"
	p := &mcp.CallToolParams{Name: "no-such-tool", Meta: mcp.Meta{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}}
	if _, err := cs.CallTool(ctx, p); err == nil {
		t.Fatal("a call of an unknown tool succeeded")
	}
	gw := awaitSpans(ctx, t, rec, traceID, "tools/call no-such-tool")["tools/call no-such-tool"]
	got := map[string]string{}
	for _, kv := range gw.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	if c := got["rpc.response.status_code"]; c == "" || c[0] != '-' || got["error.type"] != c || got["http.response.status_code"] != "200" {
		t.Errorf("gateway span attributes %v, want the JSON-RPC error code as rpc.response.status_code and error.type", got)
	}
	if gw.Status().Code != codes.Error {
		t.Errorf("status %v, want an error", gw.Status())
	}
}

// awaitSpans waits until spans with every name have ended in trace id (a
// gateway span ends just after the client has its answer) and returns
// them by name.
func awaitSpans(ctx context.Context, t *testing.T, rec *tracetest.SpanRecorder, id string, names ...string) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	for {
		got := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID().String() == id {
				got[s.Name()] = s
			}
		}
		complete := true
		for _, n := range names {
			_, ok := got[n]
			complete = complete && ok
		}
		if complete {
			return got
		}
		select {
		case <-ctx.Done():
			var all []string
			for _, s := range rec.Ended() {
				all = append(all, s.Name()+"@"+s.SpanContext().TraceID().String()[:6])
			}
			t.Fatalf("spans of trace %s: %v; want %v; all: %v", id, keys(got), names, all)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// attrs are s's attributes by key, as strings.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	got := map[string]string{}
	for _, kv := range s.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	return got
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// A tools/call's arguments are on no span by default; with
// tracing.Options.ToolArguments (the node's --trace-tool-arguments) the
// gateway's span has them as gen_ai.tool.call.arguments, cut to the cap
// and marked truncated, and still no other span of the call has them.
func TestToolArgumentsAreOnTheGatewaySpanOnlyWhenAsked(t *testing.T) {
	addr := startNode(t, nil)
	cs := connect(t, addr, aliceToken, "2025-06-18", nil)
	const secret = "s3cr3t-argument-value"
	for _, tc := range []struct {
		name, traceID string
		max           int
		want          string // the gateway span's gen_ai.tool.call.arguments ("": none)
	}{
		{"off", "7bf92f3577b34da6a3ce929d0e0e4739", 0, ""},
		{"on, capped", "8bf92f3577b34da6a3ce929d0e0e473a", 12, `{"text":"s3c`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			uninstall := tracing.InstallWith(tp, tracing.Options{ToolArguments: tc.max})
			defer func() { uninstall(); _ = tp.Shutdown(context.Background()) }()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": secret},
				Meta: mcp.Meta{"traceparent": "00-" + tc.traceID + "-00f067aa0ba902b7-01"}}
			if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
				t.Fatalf("echo: %+v %v", res, err)
			}
			spans := awaitSpans(ctx, t, rec, tc.traceID, "tools/call echo", "execute_tool echo",
				"mcpgrain.grain.receive session")
			for name, s := range spans {
				for _, kv := range s.Attributes() {
					v := kv.Value.String()
					switch {
					case name == "tools/call echo" && kv.Key == tracing.ArgumentsKey:
						if v != tc.want {
							t.Errorf("gateway span's arguments %q, want %q", v, tc.want)
						}
					case strings.Contains(v, "s3c"):
						t.Errorf("span %s: %s = %q carries the arguments", name, kv.Key, v)
					}
				}
			}
			got := map[string]string{}
			for _, kv := range spans["tools/call echo"].Attributes() {
				got[string(kv.Key)] = kv.Value.String()
			}
			if _, ok := got[string(tracing.ArgumentsKey)]; ok != (tc.want != "") {
				t.Errorf("gateway span has arguments: %v, want %v", ok, tc.want != "")
			}
			if tc.want != "" && got[string(tracing.ArgumentsTruncatedKey)] != "true" {
				t.Errorf("truncation not marked: %v", got)
			}
		})
	}
}
