package continuation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// grainNode is a real single cluster node hosting the continuation grains
// of a host whose server has one tool, "confirm": without a requestState
// it asks for input (its own state "asked"), with one it answers the
// state it was handed back. Requests reach the grains as the gateway
// sends them (exchange.Forwarder).
type grainNode struct {
	t    *testing.T
	host *Host
	fwd  *exchange.Forwarder
}

func confirmServer(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "t"}, opts)
	mcp.AddTool(s, &mcp.Tool{Name: "confirm"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if st := req.Params.RequestState; st != "" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "resumed with " + st}}}, nil, nil
		}
		return &mcp.CallToolResult{RequestState: "asked", InputRequests: mcp.InputRequestMap{
			"ok": &mcp.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}},
		}}, nil, nil
	})
	return s, func() {}, nil
}

func startGrainNode(t *testing.T) *grainNode {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := testHost(t, Config{NewServer: confirmServer, Logger: logger})
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	node, err := cluster.Start(context.Background(), cluster.Config{Kinds: []grain.Kind{h.Kind()}, Store: st, Logger: logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = node.Stop(ctx)
	})
	return &grainNode{t: t, host: h, fwd: exchange.NewForwarder(node, logger, 10*time.Second, 0)}
}

// rpcAnswer is the JSON-RPC answer to one call.
type rpcAnswer struct {
	Result *mcp.CallToolResult `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// call sends a sessionless tools/call of confirm as alice of acme to the
// continuation grain id, with requestState state ("" for none).
func (n *grainNode) call(id, state string) rpcAnswer {
	n.t.Helper()
	params := map[string]any{"name": "confirm", "arguments": map[string]any{}, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = map[string]any{"ok": map[string]any{"action": "accept", "content": map[string]any{}}}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
	req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "confirm")
	w := httptest.NewRecorder()
	n.fwd.Forward(w, req, exchange.Target{Kind: KindName, ID: id, Principal: &pb.Principal{User: "alice", Org: "acme", Role: "admin"},
		Body: body, RequestID: json.RawMessage("7")})
	raw := w.Body.Bytes()
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(d) != "" {
				raw = []byte(d)
			}
		}
	}
	var a rpcAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		n.t.Fatalf("answer %d %q: %v", w.Code, w.Body, err)
	}
	return a
}

// A sessionless call reaches its continuation grain on the node and is
// served by the node's shared server; an input request comes back with a
// requestState signed for that grain, and the retry that brings it to the
// same grain resumes the tool with its own state; the same state sent to
// another grain is refused before the tool runs. Each request counts as
// one continuation exchange.
func TestContinuationGrainServesARetryWithItsSignedState(t *testing.T) {
	n := startGrainNode(t)
	first := n.call("c1", "")
	if first.Error != nil || first.Result == nil || first.Result.InputRequests == nil || first.Result.RequestState == "" || first.Result.RequestState == "asked" {
		t.Fatalf("first call: %+v, want an input request with a sealed state", first)
	}
	other := n.call("c2", first.Result.RequestState)
	if other.Error == nil || other.Error.Code != -32602 {
		t.Fatalf("the state sent to another grain: %+v, want invalid params", other)
	}
	retry := n.call("c1", first.Result.RequestState)
	if retry.Error != nil || retry.Result == nil || len(retry.Result.Content) != 1 {
		t.Fatalf("retry: %+v", retry)
	}
	if tc, ok := retry.Result.Content[0].(*mcp.TextContent); !ok || tc.Text != "resumed with asked" {
		t.Fatalf("retry answered %+v, want the tool resumed with its own state", retry.Result.Content[0])
	}
	var m dto.Metric
	if err := n.host.exchanges.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 3 {
		t.Fatalf("%v continuation exchanges counted, want 3", got)
	}
}
