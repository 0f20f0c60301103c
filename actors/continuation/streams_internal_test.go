package continuation

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The continuation grains' streams count in mcpgrain_active_streams too
// (issue 27 edge, the sessionless era): a request answered with an SSE
// stream is an open stream until it ends.
func TestContinuationStreamsAreCounted(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	h, err := NewHost(Config{Key: bytes.Repeat([]byte{7}, 32),
		NewServer: func(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "t"}, opts)
			mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				// A progress notification starts the response stream.
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "p1", Progress: 1, Message: "holding"})
				entered <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
			})
			return srv, func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	done := make(chan struct{}, 1)
	identity := exchange.Identity(&pb.HttpExchange{Principal: &pb.Principal{User: "alice", Org: "acme", Role: "member"}, Host: "mcp.test"}, "cont-1", true)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range identity {
			r.Header[k] = v
		}
		h.serve(w, r)
		done <- struct{}{}
	}))
	t.Cleanup(ts.Close)
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before ts.Close: a failed check leaves no tool holding

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold","arguments":{},"_meta":{"progressToken":"p1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if n := h.OpenStreams(); n != 0 {
		t.Fatalf("%d open streams before the request", n)
	}
	call := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			resp = &http.Response{Header: http.Header{}, Body: io.NopCloser(strings.NewReader(err.Error()))}
		}
		call <- resp
	}()
	<-entered
	resp := <-call
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("tools/call answered %d %s %s, want an SSE stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if n := h.OpenStreams(); n != 1 {
		t.Fatalf("%d open streams while the call streams, want 1", n)
	}
	releaseOnce()
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	<-done
	if n := h.OpenStreams(); n != 0 || !strings.Contains(string(b), "released") {
		t.Fatalf("%d open streams after the call ended (%s), want 0", n, b)
	}
}
