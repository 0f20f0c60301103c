package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/exchange"
)

// The gateway's own parsing of untrusted input (everything MCP-specific is
// go-sdk's): the one parse of a body (label, bounds, initialize, era, id)
// and the session id check must never panic and must agree with each
// other and with the exchange's own reading of the id.
func FuzzPeek(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"requestState":"v1.e30.AA","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
		`{"method":`, ``, `null`, `{"params":[]}`, `{"params":{"_meta":[]}}`, `{"id":7,"method":"initialize","params":[]}`, `{"id":null,"method":null}`, "\u00a0{\"id\":1}",
		`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 300) + `","method":"ping"}`,
		`[1,{"id":1,"method":"` + strings.Repeat("m", 300) + `"}]`,
	} {
		f.Add([]byte(s), "2025-11-25", "ABCDEF")
	}
	f.Fuzz(func(t *testing.T, body []byte, version, sid string) {
		r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(string(body)))
		if err != nil {
			t.Skip()
		}
		if version != "" {
			r.Header.Set("Mcp-Protocol-Version", version)
		}
		b := parseBody(body)
		// The metrics label of a hostile body stays in a fixed set: clients
		// cannot grow the series count.
		switch l := b.methodLabel(); {
		case knownMethods[l], l == "other", l == "batch", l == "response", l == "notification":
		default:
			t.Fatalf("method label %q for body %q", l, body)
		}
		modern := isModern(r, b)
		if b.initialize() && (!b.env || b.batch) {
			t.Fatalf("an initialize request whose envelope was not read: %q", body)
		}
		// The id the gateway passes along is the one the exchange would
		// read of the body itself.
		if got, want := b.requestID(), exchange.RequestID(body); !bytes.Equal(got, want) {
			t.Fatalf("request id %q, exchange.RequestID %q, body %q", got, want, body)
		}
		// Whatever passes the size check has an id and a method the
		// answer may echo without amplifying the request.
		if b.oversized() == "" {
			var one rpcEnvelope
			if json.Unmarshal(body, &one) == nil && (len(bytes.TrimSpace(one.ID)) > MaxRequestIDBytes || len(bytes.TrimSpace(one.Method)) > MaxMethodBytes) {
				t.Fatalf("an oversized id or method passed: %q", body)
			}
		}
		if version != "" && modern != (version >= modernVersion) {
			t.Fatalf("era from header %q: modern=%v", version, modern)
		}
		if validSessionID(sid) {
			for i := 0; i < len(sid); i++ {
				if sid[i] < 0x21 || sid[i] > 0x7e {
					t.Fatalf("accepted session id with byte %#x", sid[i])
				}
			}
			if len(sid) > 128 || sid == "" {
				t.Fatalf("accepted session id of length %d", len(sid))
			}
		}
	})
}
