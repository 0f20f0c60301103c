package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// TestOverloadShedsTheExcessAndAdmitsWhatSettlesWork saturates a node
// whose in-flight bound is 2 with two calls that wait on their client
// (test_elicitation: the client holds its answer until the test lets it
// go). Meanwhile new work (an initialize, a tools/call) gets 503 with
// Retry-After and a retryable JSON-RPC error, while what continues or
// settles existing work (a code-mode resume, tasks/cancel, DELETE of a
// session, and the clients' elicitation answers themselves) is admitted;
// then both saturating calls complete. Every wait is on progress (the
// clients were asked; a gauge moved), none on the machine's speed: the
// shed answers must arrive while the admitted calls still hold their
// slots, which they do until the test releases them.
func TestOverloadShedsTheExcessAndAdmitsWhatSettlesWork(t *testing.T) {
	info := startNodeInfo(t, func(c *app.Config) { c.MCP.MaxInFlight, c.MCP.QueueWait, c.MCP.SchedLagTarget = 2, -1, -1 })
	addr := info.HTTPAddr
	probe := metricsProbe{t: t, addr: addr}
	release := make(chan struct{})
	var asked sync.WaitGroup
	asked.Add(2)
	opts := &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Done()
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "bob", "email": "bob@example.com"}}, nil
	}}
	sessions := []*mcp.ClientSession{connect(t, addr, bobToken, "2025-11-25", opts), connect(t, addr, bobToken, "2025-11-25", opts)}
	spare := connect(t, addr, bobToken, "2025-11-25", nil)
	results := make(chan string, 2)
	for _, cs := range sessions {
		go func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "who?"}})
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			results <- mcpclient.Text(res)
		}()
	}
	asked.Wait()
	probe.waitFor("both calls hold their slots", "mcpgrain_requests_in_flight", nil, exactly(2))

	h := map[string]string{"Authorization": "Bearer " + bobToken, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}
	newWork := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
	}
	h["Mcp-Session-Id"] = spare.ID()
	for _, body := range newWork {
		assertShed(t, raw(t, "POST", addr, h, body))
	}
	settling := []string{
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"resume","arguments":{"executionId":"none"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{"taskId":"none"}}`,
	}
	for _, body := range settling {
		if r := raw(t, "POST", addr, h, body); r.status == http.StatusServiceUnavailable {
			t.Fatalf("%s was shed on a saturated node: %s", body, r.body)
		}
	}
	if r := raw(t, "DELETE", addr, h, ""); r.status == http.StatusServiceUnavailable {
		t.Fatalf("DELETE of a session was shed on a saturated node: %s", r.body)
	}
	if n := probe.get("mcpgrain_requests_in_flight", nil); n != 2 {
		t.Fatalf("the shed answers came after a slot was freed: %v in flight", n)
	}
	close(release) // the answers are POSTs too: admitted on the saturated node
	for range sessions {
		if got := <-results; !strings.Contains(got, "User response") {
			t.Fatalf("an admitted call did not complete: %s", got)
		}
	}
	if n := probe.get("mcpgrain_requests_shed_total", map[string]string{"reason": "queue_full"}); n != float64(len(newWork)) {
		t.Fatalf("mcpgrain_requests_shed_total{reason=queue_full} = %v, want %d", n, len(newWork))
	}
	probe.waitFor("the slots are free again", "mcpgrain_requests_in_flight", nil, exactly(0))
	if res, err := sessions[0].CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}}); err != nil || res.IsError {
		t.Fatalf("a call after the load: %v %v", res, err)
	}
}

// assertShed checks a shed answer: 503, Retry-After, and a JSON-RPC error
// whose data says it is retryable.
func assertShed(t *testing.T, r rawResponse) {
	t.Helper()
	var body struct {
		Error struct {
			Message string `json:"message"`
			Data    struct {
				Retryable bool `json:"retryable"`
			} `json:"data"`
		} `json:"error"`
	}
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("not shed: %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if err := json.Unmarshal(r.body, &body); err != nil || !body.Error.Data.Retryable || !strings.Contains(body.Error.Message, "busy") {
		t.Fatalf("shed body: %s (%v)", r.body, err)
	}
}
