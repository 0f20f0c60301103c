package mcpgrain_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// shipper is the ship tool of one test: shipped counts the effects of
// its step; runs is told when a run of its handler ends. Each test makes
// its own: a count or a run's end left by another test (or by the same
// test's previous -count run) must not be read as this one's.
type shipper struct {
	shipped atomic.Int32
	runs    chan error
}

func newShipper() *shipper { return &shipper{runs: make(chan error, 4)} }

// tool asks, then ships in a step (the effect counted).
func (sh *shipper) tool(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (res *mcp.CallToolResult, _ any, err error) {
	defer func() { sh.runs <- err }()
	d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{Summary: "Ship it?"})
	if err != nil {
		return nil, nil, err
	}
	n, err := mcpgrain.Step(ctx, req, "ship", func(context.Context) (int32, error) { return sh.shipped.Add(1), nil })
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("shipped %d %v", n, d.Accepted)}}}, nil, nil
}

// The request that carries a call waiting in Ask ends without the client
// cancelling it (its connection cut, as when the session's node stops and
// the client is told to retry): go-sdk does not cancel the handler then.
// A decision accepted afterwards must not let that run go on — it would
// run the step and complete the call with a result nobody receives, and
// the client's retry would be a new call, asked and run again (the double
// deploy the chaos run's deploy worker found). The run ends; the retry
// gets the journaled decision without a new question, and the step runs
// once.
func TestACallWhoseRequestEndedIsContinuedByTheRetry(t *testing.T) {
	sh := newShipper()
	origin := runNode(t, mcpgrain.Server{Name: "ship", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "ship"}, sh.tool)
	}})
	c := mcp.NewClient(&mcp.Implementation{Name: "ask-cut-test"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp", DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// The first run, over a raw request cut without notifications/cancelled.
	ctx, cut := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, origin+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":91,"method":"tools/call","params":{"name":"ship","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	id := pausedID(t, origin, "Ship it?")
	cut()
	<-sent
	ended := false
	select { // the run ends with its request, before any decision
	case err := <-sh.runs:
		ended = true
		if err == nil {
			t.Error("the cut run returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Error("the run whose request ended still waits for a decision 10s later")
	}
	resp, err := http.Post(origin+"/api/executions/"+id+"/resume", "application/json", strings.NewReader(`{"action":"accept"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("accept: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	if !ended { // (without the fix) the decision wakes the cut run: it ships and completes the call
		<-sh.runs
	}
	rctx, rcancel := context.WithCancel(t.Context())
	defer rcancel() // before cs.Close: a retry that asked again gives up
	retry := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(rctx, &mcp.CallToolParams{Name: "ship", Arguments: map[string]any{}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		retry <- res
	}()
	var res *mcp.CallToolResult
	for res == nil {
		select {
		case res = <-retry:
		case <-time.After(100 * time.Millisecond):
			if pausedCount(t, origin) > 0 {
				t.Fatalf("the retry asked again (a new call: the effect ran %d times so far)", sh.shipped.Load())
			}
		}
	}
	if res.IsError || mcpclient.Text(res) != "shipped 1 true" {
		t.Fatalf("the retry: %q, want %q", mcpclient.Text(res), "shipped 1 true")
	}
	if n := sh.shipped.Load(); n != 1 {
		t.Fatalf("shipped %d times, want once", n)
	}
}
