package mcpruntime_test

import (
	"context"
	"database/sql"
	"encoding/json"
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

type exchanger interface {
	ServeExchange(w http.ResponseWriter, req *http.Request)
}

func post(t *testing.T, rt exchanger, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set(exchange.HeaderIdentity, exchange.Caller{Session: "s1"}.Encode()) // as the session grain sets it
	if !strings.Contains(body, `"initialize"`) {
		req.Header.Set("Mcp-Session-Id", "s1")
	}
	w := httptest.NewRecorder()
	rt.ServeExchange(w, req)
	return w
}

// testBuilder is a node's runtime builder on a fresh SQLite store at
// path, serving a server with no tools.
func testBuilder(t *testing.T, path string) *mcpruntime.Builder {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := mcpruntime.NewBuilder(mcpruntime.Config{Store: st,
		NewServer: func(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
			return mcp.NewServer(&mcp.Implementation{Name: "t"}, opts), func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Regression (chaos, kill rounds): the grain accepted an exchange just
// before it disposed the runtime (its ownership was lost); go-sdk, whose
// session the disposal had ended, answered that request 404, and go-sdk's
// client took the 404 as the end of its session — a live session lost. A
// request that reaches a closed runtime now gets the restart envelope.
func TestClosedRuntimeAnswersRestartingNotSessionNotFound(t *testing.T) {
	b := testBuilder(t, filepath.Join(t.TempDir(), "s.db"))
	built, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	rt := built.(exchanger)
	if w := post(t, rt, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`); w.Code != http.StatusOK {
		t.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	if w := post(t, rt, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); w.Code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", w.Code, w.Body)
	}
	if w := post(t, rt, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`); w.Code != http.StatusOK {
		t.Fatalf("tools/list on the live runtime: %d %s", w.Code, w.Body)
	}
	if err := built.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := post(t, rt, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`)
	var env struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &env)
	if w.Code != http.StatusServiceUnavailable || env.Error.Code != -32001 || w.Header().Get("Retry-After") == "" {
		t.Fatalf("request to a closed runtime: %d %q, want the 503 restart envelope", w.Code, w.Body)
	}
}

// A created session writes no events for its initialize answer (the
// restore replays the handshake); the streams of its later requests, and
// every stream of a restored runtime, are stored.
func TestCreatedRuntimeStoresNoEventsForItsHandshake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := testBuilder(t, path)
	var state []byte
	streams := func() int {
		t.Helper()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(`SELECT COUNT(DISTINCT stream) FROM mcp_events WHERE session = 's1'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, in := range []func() session.BuildInput{
		func() session.BuildInput {
			return session.BuildInput{SessionID: "s1", StateChanged: func(s []byte) error { state = s; return nil }}
		},
		func() session.BuildInput {
			return session.BuildInput{SessionID: "s1", State: state, UntrimmedEventBytes: 1000}
		},
	} {
		if i == 1 && len(state) == 0 {
			t.Fatal("the created runtime reported no state to restore from")
		}
		built, err := b.Build(context.Background(), in())
		if err != nil {
			t.Fatal(err)
		}
		rt := built.(exchanger)
		if i == 0 {
			if w := post(t, rt, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`); w.Code != http.StatusOK {
				t.Fatalf("initialize: %d %s", w.Code, w.Body)
			}
			post(t, rt, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
		}
		if w := post(t, rt, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`); w.Code != http.StatusOK {
			t.Fatalf("runtime %d: tools/list: %d %s", i, w.Code, w.Body)
		}
		if err := built.Close(context.Background()); err != nil { // flushes its events
			t.Fatal(err)
		}
		if n := streams(); n != i+1 {
			t.Fatalf("after runtime %d: %d streams stored, want %d (the tools/list answers, not initialize's)", i, n, i+1)
		}
		// The count of untrimmed bytes goes on from what the record said.
		if got, from := built.UntrimmedEventBytes(), in().UntrimmedEventBytes; got <= from {
			t.Fatalf("runtime %d: %d untrimmed event bytes after a stored answer, built with %d", i, got, from)
		}
	}
}
