package mcpruntime

import "testing"

// TestMethodNotFound: which of go-sdk's plain-text refusals become
// JSON-RPC's -32601 answer, and the answer's id.
func TestMethodNotFound(t *testing.T) {
	notHandled := []byte(`JSON RPC not handled: "nope/nope" unsupported` + "\n")
	cases := []struct {
		name    string
		refusal []byte
		body    string
		want    string // "" keeps go-sdk's refusal
	}{
		{"unknown method, number id", notHandled, `{"jsonrpc":"2.0","id":7,"method":"nope/nope"}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found: nope/nope"}}`},
		{"unknown method, string id", notHandled, `{"jsonrpc":"2.0","id":"a","method":"tasks/get","params":{"taskId":"t"}}`,
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"Method not found: tasks/get"}}`},
		{"unknown notification (no id)", notHandled, `{"jsonrpc":"2.0","method":"notifications/nope"}`, ""},
		{"null id", notHandled, `{"jsonrpc":"2.0","id":null,"method":"nope/nope"}`, ""},
		{"batch", notHandled, `[{"jsonrpc":"2.0","id":1,"method":"nope/nope"}]`, ""},
		{"not JSON", notHandled, `{"jsonrpc":`, ""},
		{"method not a string", notHandled, `{"jsonrpc":"2.0","id":1,"method":5}`, ""},
		{"another refusal", []byte("JSON RPC invalid request: missing id for \"tools/list\"\n"), `{"jsonrpc":"2.0","method":"tools/list"}`, ""},
		{"accept header refusal", []byte("Accept must contain both 'application/json' and 'text/event-stream'\n"), `{"jsonrpc":"2.0","id":1,"method":"nope/nope"}`, ""},
	}
	for _, c := range cases {
		got, ok := methodNotFound(c.refusal, []byte(c.body))
		if ok != (c.want != "") || string(got) != c.want {
			t.Errorf("%s: methodNotFound = %s, %v; want %s", c.name, got, ok, c.want)
		}
	}
}
