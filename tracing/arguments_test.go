package tracing

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// recordingWith is recording with o.
func recordingWith(t *testing.T, o Options) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	uninstall := InstallWith(tp, o)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	return rec
}

// serverSpanAttrs is the attributes of the gateway span of one request
// with body (parsed by the gateway or not), as strings.
func serverSpanAttrs(t *testing.T, rec *tracetest.SpanRecorder, body string, parsed *Message) map[string]string {
	t.Helper()
	r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	_, span := StartServer(context.Background(), Request{HTTP: r, Body: []byte(body), Session: "s1", Parsed: parsed})
	EndServer(span, 200, "")
	spans := rec.Ended()
	got := map[string]string{}
	for _, kv := range spans[len(spans)-1].Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	return got
}

const secretArgs = `{"token":"s3cr3t-value","text":"héllo wörld"}`

func toolCall(args string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`
}

// By default no span attribute carries a tool call's arguments, whatever
// they hold.
func TestToolArgumentsAreNotRecordedByDefault(t *testing.T) {
	rec := recording(t)
	for _, parsed := range []*Message{nil, {Method: "tools/call", Name: "echo", ID: []byte("1")}} {
		got := serverSpanAttrs(t, rec, toolCall(secretArgs), parsed)
		if got["gen_ai.tool.name"] != "echo" {
			t.Fatalf("not the tools/call span: %v", got)
		}
		for k, v := range got {
			if strings.HasPrefix(k, "gen_ai.tool.call.arguments") || strings.HasPrefix(k, "mcpgrain.tool.call.arguments") {
				t.Errorf("attribute %s = %q with tool arguments off", k, v)
			}
			if strings.Contains(v, "s3cr3t") || strings.Contains(v, "wörld") {
				t.Errorf("attribute %s = %q carries an argument value", k, v)
			}
		}
	}
}

// With Options.ToolArguments a tools/call's span has its arguments' JSON,
// whole when it fits, else a prefix cut at a UTF-8 boundary with the
// truncation marked and the whole size given.
func TestToolArgumentsAreRecordedWhenAskedAndCapped(t *testing.T) {
	t.Run("fits", func(t *testing.T) {
		rec := recordingWith(t, Options{ToolArguments: 1024})
		got := serverSpanAttrs(t, rec, toolCall(secretArgs), nil)
		if got["gen_ai.tool.call.arguments"] != secretArgs {
			t.Errorf("arguments %q, want %q", got["gen_ai.tool.call.arguments"], secretArgs)
		}
		if _, ok := got["mcpgrain.tool.call.arguments.truncated"]; ok {
			t.Errorf("whole arguments marked truncated: %v", got)
		}
	})
	// "héllo wörld": the cap falls inside the two-byte ö.
	cut := strings.Index(secretArgs, "ö") + 1
	for _, c := range []struct {
		name   string
		max    int
		parsed *Message
		want   string
	}{
		{"cut inside a rune, body decoded by the span", cut, nil, secretArgs[:cut-1]},
		{"cut inside a rune, parsed by the gateway", cut, &Message{Method: "tools/call", Name: "echo"}, secretArgs[:cut-1]},
		{"cut at a rune start", cut - 1, nil, secretArgs[:cut-1]},
		{"one byte", 1, nil, "{"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := recordingWith(t, Options{ToolArguments: c.max})
			got := serverSpanAttrs(t, rec, toolCall(secretArgs), c.parsed)
			a := got["gen_ai.tool.call.arguments"]
			if a != c.want || len(a) > c.max || !utf8.ValidString(a) {
				t.Errorf("arguments %q (%d bytes, valid UTF-8 %v), want %q (≤ %d bytes)", a, len(a), utf8.ValidString(a), c.want, c.max)
			}
			if got["mcpgrain.tool.call.arguments.truncated"] != "true" {
				t.Errorf("truncation not marked: %v", got)
			}
			if got["mcpgrain.tool.call.arguments.size"] != "47" || len(secretArgs) != 47 {
				t.Errorf("size %q, want the whole arguments' %d", got["mcpgrain.tool.call.arguments.size"], len(secretArgs))
			}
		})
	}
}

// Only a tools/call records arguments: a prompts/get's (it has
// params.arguments too) and a call without arguments record none.
func TestToolArgumentsOnlyOnToolCalls(t *testing.T) {
	rec := recordingWith(t, Options{ToolArguments: 1024})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p","arguments":{"token":"s3cr3t-value"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":null}}`,
	} {
		got := serverSpanAttrs(t, rec, body, nil)
		if a, ok := got["gen_ai.tool.call.arguments"]; ok {
			t.Errorf("%s: arguments %q recorded", body, a)
		}
	}
}
