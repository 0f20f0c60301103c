package exchange

import "testing"

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
