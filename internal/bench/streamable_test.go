package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgrain/mcpgrain/exchange"
)

func TestParseAnswer(t *testing.T) {
	const sse, js = "text/event-stream", "application/json"
	cases := []struct {
		name, contentType, body string
		id                      int64
		want                    string // the result, or
		err                     string // a substring of the error
	}{
		{"json", js, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}`, 1, `{"protocolVersion":"2025-11-25"}`, ""},
		{"json with charset", "application/json; charset=utf-8", `{"jsonrpc":"2.0","id":7,"result":{}}`, 7, `{}`, ""},
		{"sse after a priming event", sse, "id: 0_0\ndata:\n\nevent: message\nid: 0_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"ok\":true}}\n\n", 3, `{"ok":true}`, ""},
		{"sse with CRLF lines", sse, "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\r\n\r\n", 2, `{}`, ""},
		{"sse data split over lines", sse, "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":4,\"result\":[1,2]}\n\n", 4, `[1,2]`, ""},
		{"sse skips a notification first", sse, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n", 5, `{}`, ""},
		{"sse skips another id", sse, "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"no\":1}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{\"yes\":1}}\n\n", 6, `{"yes":1}`, ""},
		{"sse event cut off by the end", sse, "data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}", 8, `{}`, ""},
		{"string id is not a numeric id", js, `{"jsonrpc":"2.0","id":"1","result":{}}`, 1, "", "no response to request 1"},
		{"json-rpc error", js, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown tool"}}`, 1, "", "JSON-RPC error -32602: unknown tool"},
		{"no response on the stream", sse, "id: 0_0\ndata:\n\n", 1, "", "no response to request 1"},
		{"neither result nor error", js, `{"jsonrpc":"2.0","id":1}`, 1, "", "neither result nor error"},
		{"not json", js, `<html>`, 1, "", "bad response"},
		{"other content type", "text/plain", `{}`, 1, "", `Content-Type "text/plain"`},
		{"no content type", "", `{}`, 1, "", `Content-Type ""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAnswer(tc.contentType, []byte(tc.body), tc.id)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseAnswer = %s, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("ParseAnswer = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestSSEData(t *testing.T) {
	cases := []struct {
		name, stream string
		want         []string
	}{
		{"empty", "", nil},
		{"one event", "data: x\n\n", []string{"x"}},
		{"no space after the colon", "data:x\n\n", []string{"x"}},
		{"only the first space is dropped", "data:  x\n\n", []string{" x"}},
		{"comments and other fields ignored", ": keep-alive\nevent: message\nid: 3\nretry: 10\ndata: a\n\n", []string{"a"}},
		{"events without data left out", "id: 1\n\nid: 2\ndata:\n\ndata: b\n\n", []string{"b"}},
		{"several data lines joined", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"two events", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"last event without a blank line", "data: a\n\ndata: b", []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range SSEData([]byte(tc.stream)) {
				got = append(got, string(d))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Fatalf("SSEData(%q) = %q, want %q", tc.stream, got, tc.want)
			}
		})
	}
}

// Warm or cold is the Mcpgrain-Restored header of the answer, nothing
// else.
func TestRestoredClassifiesAnswers(t *testing.T) {
	cases := []struct {
		name   string
		header http.Header
		cold   bool
	}{
		{"no header: warm", http.Header{}, false},
		{"restored: cold", http.Header{exchange.HeaderRestored: {"1"}}, true},
		{"header names are case-insensitive", func() http.Header { h := http.Header{}; h.Set("mcpgrain-restored", "1"); return h }(), true},
		{"another value is not a restore", http.Header{exchange.HeaderRestored: {"0"}}, false},
		{"empty value is not a restore", http.Header{exchange.HeaderRestored: {""}}, false},
	}
	for _, tc := range cases {
		if got := Restored(tc.header); got != tc.cold {
			t.Errorf("%s: Restored = %v, want %v", tc.name, got, tc.cold)
		}
	}
	if got := ColdFraction(3, 1); got != 0.25 {
		t.Errorf("ColdFraction(3, 1) = %v", got)
	}
	if got := ColdFraction(0, 0); got != 0 {
		t.Errorf("ColdFraction(0, 0) = %v", got)
	}
}

func TestErrorKind(t *testing.T) {
	timeout := &net.OpError{Op: "read", Err: timeoutErr{}}
	refused := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	cases := []struct {
		err  error
		want string
	}{
		{failure("initialize: HTTP 503", "initialize: HTTP 503: restarting"), "initialize: HTTP 503"},
		{stepFailure("tools/call", fmt.Errorf("post: %w", context.DeadlineExceeded)), "tools/call: timeout"},
		{stepFailure("tools/call", timeout), "tools/call: timeout"},
		{stepFailure("initialize", refused), "initialize: connection"},
		{stepFailure("initialize", io.ErrUnexpectedEOF), "initialize: connection"},
		{stepFailure("ping", &rpcError{Code: -32601, Message: "no such method"}), "ping: JSON-RPC error -32601"},
		{stepFailure("initialize", fmt.Errorf("%w: junk", errBadAnswer)), "initialize: bad response"},
		{stepFailure("initialize", errors.New("strange")), "initialize: other"},
		{context.DeadlineExceeded, "timeout"},
		{errors.New("from elsewhere"), "other"},
	}
	for _, tc := range cases {
		if got := ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if err := stepFailure("tools/call", refused); !strings.HasPrefix(err.Error(), "tools/call: ") || !errors.Is(err, refused) {
		t.Errorf("stepFailure message %q or chain lost", err)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// fakeMCP is a minimal Streamable HTTP server for the raw client: it
// answers initialize as SSE (path /sse, with a priming event) or JSON
// (/json), checks the headers of later requests, and marks the first
// call of each session as a restore.
type fakeMCP struct {
	mu   sync.Mutex
	next int
	// visited holds the known sessions: whether they had a call yet.
	visited map[string]bool
	// forget makes the next initialize forget its session at once.
	forget bool
}

func (f *fakeMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "application/json, text/event-stream" {
		http.Error(w, "bad headers", http.StatusBadRequest)
		return
	}
	answer := func(result string) {
		m := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
		if r.URL.Path == "/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: p\ndata:\n\nevent: message\ndata: %s\n\n", m)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, m)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if msg.Method == "initialize" {
		if r.Header.Get("Mcp-Session-Id") != "" {
			http.Error(w, "initialize in a session", http.StatusBadRequest)
			return
		}
		f.next++
		sid := fmt.Sprintf("s%d", f.next)
		if !f.forget {
			f.visited[sid] = false
		}
		f.forget = false
		w.Header().Set("Mcp-Session-Id", sid)
		answer(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}`)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if _, ok := f.visited[sid]; !ok || r.Header.Get("Mcp-Protocol-Version") != "2025-11-25" {
		http.Error(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Session not found"}}`, http.StatusNotFound)
		return
	}
	switch msg.Method {
	case "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
	case "tools/call":
		if !f.visited[sid] {
			f.visited[sid] = true
			w.Header().Set(exchange.HeaderRestored, "1")
		}
		answer(`{"content":[{"type":"text","text":"bench"}]}`)
	case "ping":
		answer(`{}`)
	}
}

func TestRawClientCreatesAndRevisits(t *testing.T) {
	f := &fakeMCP{visited: map[string]bool{}, forget: true}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := &rawClient{hc: srv.Client()}
	// The server forgets the first session right after initialize: the
	// initialized notification fails with 404, and so does the creation.
	if _, _, err := c.create(t.Context(), srv.URL+"/sse"); ErrorKind(err) != "notifications/initialized: HTTP 404" {
		t.Fatalf("create on a server that forgot the session: %v (kind %q)", err, ErrorKind(err))
	}
	for _, path := range []string{"/sse", "/json"} {
		s, cold, err := c.create(t.Context(), srv.URL+path)
		if err != nil || cold {
			t.Fatalf("create via %s: cold %v, %v", path, cold, err)
		}
		if s.version != protocolVersion {
			t.Fatalf("session %+v", s)
		}
		if cold, err := c.revisit(t.Context(), srv.URL+path, s, RevisitEcho); err != nil || !cold {
			t.Fatalf("first echo on %s: cold %v, %v; want a cold answer", s.id, cold, err)
		}
		if cold, err := c.revisit(t.Context(), srv.URL+path, s, RevisitEcho); err != nil || cold {
			t.Fatalf("second echo on %s: cold %v, %v; want a warm answer", s.id, cold, err)
		}
		if cold, err := c.revisit(t.Context(), srv.URL+path, s, RevisitPing); err != nil || cold {
			t.Fatalf("ping on %s: cold %v, %v", s.id, cold, err)
		}
	}
	if _, err := c.revisit(t.Context(), srv.URL+"/json", rawSession{id: "gone", version: protocolVersion}, RevisitEcho); ErrorKind(err) != "tools/call: HTTP 404" {
		t.Fatalf("revisit of an unknown session: %v (kind %q)", err, ErrorKind(err))
	}
	noID := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}`)
	}))
	defer noID.Close()
	if _, _, err := c.create(t.Context(), noID.URL); ErrorKind(err) != "initialize: no session id" {
		t.Fatalf("initialize without a session id: %v (kind %q)", err, ErrorKind(err))
	}
}
