package gateway

import (
	"context"
	"reflect"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// With tracing on, the gateway hands its span what it parsed of the body
// (method, target, id, _meta), so the span does not decode the body a
// second time; off, or for a body it could not parse whole (a batch,
// params of another shape), nothing: the span decodes it itself.
func TestTheGatewaySpanReadsTheGatewaysParse(t *testing.T) {
	if parseBody([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)).trace() != nil {
		t.Fatal("tracing off: a parse was handed on")
	}
	tp := sdktrace.NewTracerProvider()
	uninstall := tracing.Install(tp)
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	for _, c := range []struct {
		body string
		want *tracing.Message
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`,
			&tracing.Message{Method: "tools/call", Name: "echo", ID: []byte("7"),
				Meta: map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}},
		{`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"test://x"}}`,
			&tracing.Message{Method: "resources/read", URI: "test://x", ID: []byte(`"a"`)}},
		{`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p\u00e9"}}`,
			&tracing.Message{Method: "prompts/get", Name: "pé", ID: []byte("2")}},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, &tracing.Message{Method: "notifications/initialized"}},
		{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			&tracing.Message{Method: "initialize", ProtocolVersion: "2025-11-25", ID: []byte("0")}},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, nil},
	} {
		if got := parseBody([]byte(c.body)).trace(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.body, got, c.want)
		}
	}
}
