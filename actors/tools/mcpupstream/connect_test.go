package mcpupstream_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/mcpupstream"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// guarded serves u's MCP server at /mcp to requests bearing token only
// (401 without it, 403 with another), and answers everything else with the
// status the test sets (0: 404 from the mux).
func guarded(t *testing.T, u *upstream, token string) *httptest.Server {
	t.Helper()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer " + token:
			handler.ServeHTTP(w, r)
		case "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="up"`)
			http.Error(w, "sign in", http.StatusUnauthorized)
		default:
			http.Error(w, "not for you", http.StatusForbidden)
		}
	}))
	mux.Handle("/down", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// closedURL is an http URL nothing listens on (a port just released).
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr + "/mcp"
}

// A failed connection says what it means: a refusal (credentials, path) is
// a configuration to fix and fails New even with RetryUnavailable; an
// upstream that is down or answers 5xx is unavailable.
func TestConnectErrorsSayWhatFailed(t *testing.T) {
	u := newUpstream(t)
	srv := guarded(t, u, "right")
	cases := []struct {
		name        string
		url, token  string
		status      int
		unavailable bool
		says        string
	}{
		{"no credentials", srv.URL + "/mcp", "", 401, false, "refused the credentials sent"},
		{"wrong credentials", srv.URL + "/mcp", "wrong", 403, false, "may not use it"},
		{"wrong path", srv.URL + "/nope", "right", 404, false, "is the URL its MCP endpoint"},
		{"maintenance", srv.URL + "/down", "right", 503, true, "HTTP 503 Service Unavailable (down or overloaded)"},
		{"nothing listening", closedURL(t), "right", 0, true, "the upstream is unreachable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.token != "" {
				h.Set("Authorization", "Bearer "+tc.token)
			}
			src, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "files", Endpoint: tc.url, Headers: h})
			var ce *mcpupstream.ConnectError
			if src != nil || !errors.As(err, &ce) {
				t.Fatalf("New = %v, %v; want a *ConnectError", src, err)
			}
			if ce.Source != "files" || ce.Status != tc.status || ce.Unavailable != tc.unavailable ||
				!strings.Contains(err.Error(), "mcpupstream files: ") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %+v (%v); want status %d, unavailable %v, saying %q", ce, err, tc.status, tc.unavailable, tc.says)
			}
			if strings.Contains(err.Error(), "right") {
				t.Fatalf("error %v shows the credential", err)
			}
			// A refusal fails New even when unavailable upstreams are retried.
			if !tc.unavailable {
				src, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "files", Endpoint: tc.url, Headers: h, RetryUnavailable: true})
				if src != nil || !errors.As(err, &ce) || ce.Status != tc.status {
					t.Fatalf("with RetryUnavailable: New = %v, %v", src, err)
				}
			}
		})
	}
	// The right credentials connect.
	src, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "files", Endpoint: srv.URL + "/mcp", Headers: http.Header{"Authorization": {"Bearer right"}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
}

// An upstream that is down when the source starts is connected in the
// background, with backoff, and its tools appear once it answers. The
// retries are timed by a fake clock, so the test moves time instead of
// waiting; each Advance runs the attempt it makes due before returning.
func TestUnavailableUpstreamConnectsInTheBackground(t *testing.T) {
	endpoint := closedURL(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	src, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "files", Endpoint: endpoint, RetryUnavailable: true,
		Clock: clk, RetryMin: time.Second, RetryMax: 4 * time.Second})
	if err != nil {
		t.Fatalf("New with the upstream down: %v", err)
	}
	t.Cleanup(func() { _ = src.Close() })
	ctx := t.Context()

	// Meanwhile: no tools, and a call says why.
	if err := src.Unavailable(); !errors.Is(err, mcpupstream.ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") ||
		strings.Contains(err.Error(), endpoint) {
		t.Fatalf("Unavailable() = %v", err)
	}
	if _, ok := src.Lookup(ctx, "read_file"); ok {
		t.Fatal("a tool found before the upstream was reached")
	}
	if got := src.Search(ctx, "", 0); len(got) != 0 {
		t.Fatalf("Search = %v before the upstream was reached", got)
	}
	if _, err := src.Call(ctx, "read_file", nil); !errors.Is(err, mcpupstream.ErrUnavailable) || errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("Call before the upstream was reached: %v", err)
	}
	reg, err := tools.NewRegistry(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Unavailable("files.read_file"); !errors.Is(err, mcpupstream.ErrUnavailable) {
		t.Fatalf("Registry.Unavailable = %v", err)
	}
	changed := make(chan struct{}, 4)
	reg.OnChange(func() { changed <- struct{}{} })

	// Still down: each failed attempt arms the next, waiting twice as long
	// up to RetryMax.
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		if clk.Pending() != 1 {
			t.Fatalf("%d retries armed, want 1", clk.Pending())
		}
		clk.Advance(wait - time.Millisecond)
		if clk.Pending() != 1 || src.Unavailable() == nil {
			t.Fatalf("an attempt before its wait of %s", wait)
		}
		clk.Advance(time.Millisecond)
	}

	select {
	case <-changed:
		t.Fatal("OnChange called while the upstream is down")
	default:
	}

	// The upstream comes up on that address; the next attempt connects,
	// and the registry's OnChange hears of the tools.
	u := newUpstream(t)
	ln, err := net.Listen("tcp", strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil)}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })
	clk.Advance(4 * time.Second)
	if err := src.Unavailable(); err != nil {
		t.Fatalf("still unavailable after the upstream came up: %v", err)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d retries armed after connecting", clk.Pending())
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("OnChange not called after the background connection")
	}
	tool, ok := src.Lookup(ctx, "read_file")
	if !ok || tool.RequiresApproval {
		t.Fatalf("read_file = %+v, %v after connecting", tool, ok)
	}
	if out, err := src.Call(ctx, "read_file", map[string]any{"path": "/a"}); err != nil || out != "contents of /a\nline 2" {
		t.Fatalf("read_file = %#v, %v", out, err)
	}
	if err := reg.Unavailable("files.read_file"); err != nil {
		t.Fatalf("Registry.Unavailable after connecting = %v", err)
	}
}

// Closing a source that is still connecting stops its retries.
func TestCloseStopsBackgroundConnecting(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	src, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "files", Endpoint: closedURL(t), RetryUnavailable: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if clk.Pending() != 1 {
		t.Fatalf("%d retries armed, want 1", clk.Pending())
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d retries armed after Close", clk.Pending())
	}
}
