package systemtest

import (
	"testing"

	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// A request that restored its session's runtime says so in a response
// header (the scale benchmark tells warm answers from cold ones by it);
// the next one, served warm, does not.
func TestRestoringRequestIsMarked(t *testing.T) {
	addr := startNode(t, func(c *app.Config) { c.NodeID = "r1"; c.MCP.SoftCap = 1 })
	a := connect(t, addr, aliceToken, "2025-11-25", nil)
	p := metricsProbe{t, addr}
	p.handshakesEnded(map[string]string{"node": "r1"}, 1)
	connect(t, addr, bobToken, "2025-11-25", nil) // over the cap: evicts alice's
	p.waitFor("alice's session evicted", "mcpgrain_runtime_disposals_total", map[string]string{"node": "r1", "reason": "cap"}, exactly(1))
	call := func() rawResponse {
		return raw(t, "POST", addr, map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Mcp-Session-Id": a.ID(), "Mcp-Protocol-Version": "2025-11-25"},
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	}
	if r := call(); r.status != 200 || r.header.Get(exchange.HeaderRestored) != "1" {
		t.Fatalf("the restoring call: %d, %s=%q", r.status, exchange.HeaderRestored, r.header.Get(exchange.HeaderRestored))
	}
	if r := call(); r.status != 200 || r.header.Get(exchange.HeaderRestored) != "" {
		t.Fatalf("the warm call: %d, %s=%q", r.status, exchange.HeaderRestored, r.header.Get(exchange.HeaderRestored))
	}
}
