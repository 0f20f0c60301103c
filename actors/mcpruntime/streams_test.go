package mcpruntime_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
)

// streamCounter is what the session host reads for
// mcpgrain_active_streams (open streams) and for pinning (POSTs).
type streamCounter interface {
	exchanger
	OpenStreams() int
	ActiveStreams() int
}

// streamSession is a built session runtime behind a real HTTP server (as
// the session grain serves it: its headers set), whose server has one tool,
// "hold", that runs until release is closed; entered gets a value when it
// starts. done gets a value when an exchange's ServeExchange returned.
type streamSession struct {
	rt      streamCounter
	url     string
	entered chan struct{}
	release chan struct{}
	done    chan string
}

func newStreamSession(t *testing.T) *streamSession {
	t.Helper()
	s := &streamSession{entered: make(chan struct{}, 1), release: make(chan struct{}), done: make(chan string, 4)}
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := mcpruntime.NewBuilder(mcpruntime.Config{Store: st,
		NewServer: func(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "t"}, opts)
			mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				s.entered <- struct{}{}
				select {
				case <-s.release:
				case <-ctx.Done():
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
			})
			return srv, func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	built, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = built.Close(context.Background()) })
	s.rt = built.(streamCounter)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set(exchange.HeaderIdentity, exchange.Caller{Session: "s1"}.Encode())
		if !strings.HasPrefix(r.URL.RawQuery, "init") {
			r.Header.Set("Mcp-Session-Id", "s1")
		}
		s.rt.ServeExchange(w, r)
		s.done <- r.Method
	}))
	t.Cleanup(ts.Close)
	s.url = ts.URL + "/mcp"
	s.post(t, "?init", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	s.post(t, "", `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	return s
}

// post sends a POST and reads its whole answer.
func (s *streamSession) post(t *testing.T, query, body string) string {
	t.Helper()
	resp := s.do(t, t.Context(), http.MethodPost, query, body)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	<-s.done
	return string(b)
}

func (s *streamSession) do(t *testing.T, ctx context.Context, method, query, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.url+query, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (s *streamSession) counts(t *testing.T, open, posts int, when string) {
	t.Helper()
	if got, gotPosts := s.rt.OpenStreams(), s.rt.ActiveStreams(); got != open || gotPosts != posts {
		t.Fatalf("%s: %d open streams, %d POSTs in flight; want %d and %d", when, got, gotPosts, open, posts)
	}
}

// mcpgrain_active_streams counts what docs/metrics.md says (issue 27
// edge): open response streams, POST SSE responses and GET listeners —
// it counted POST exchanges only. A GET listener open is +1 and back to 0
// once it closed, without pinning the runtime (ActiveStreams, what
// pinning reads, stays at the POSTs); a POST answered with an SSE stream
// counts while its stream lasts.
func TestOpenStreamsCountPostStreamsAndGetListeners(t *testing.T) {
	s := newStreamSession(t)
	s.counts(t, 0, 0, "idle")

	ctx, cancel := context.WithCancel(t.Context())
	listen := s.do(t, ctx, http.MethodGet, "", "")
	if listen.StatusCode != http.StatusOK || !strings.HasPrefix(listen.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET listener: %d %s", listen.StatusCode, listen.Header.Get("Content-Type"))
	}
	s.counts(t, 1, 0, "a GET listener open")

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url,
		strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	call := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			resp = &http.Response{Header: http.Header{}, Body: io.NopCloser(strings.NewReader(err.Error()))}
		}
		call <- resp
	}()
	<-s.entered
	post := <-call // its SSE header has come
	if !strings.HasPrefix(post.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("tools/call answered %s, want an SSE stream", post.Header.Get("Content-Type"))
	}
	s.counts(t, 2, 1, "a GET listener and a POST stream open")
	close(s.release)
	b, _ := io.ReadAll(post.Body)
	_ = post.Body.Close()
	if !strings.Contains(string(b), "released") {
		t.Fatalf("tools/call: %s", b)
	}
	if m := <-s.done; m != http.MethodPost {
		t.Fatalf("%s ended, want the POST", m)
	}
	s.counts(t, 1, 0, "the POST stream ended")

	cancel()
	_ = listen.Body.Close()
	if m := <-s.done; m != http.MethodGet {
		t.Fatalf("%s ended, want the GET", m)
	}
	s.counts(t, 0, 0, "the GET listener closed")
}
