package mcpruntime_test

import (
	"context"
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
	if !strings.Contains(body, `"initialize"`) {
		req.Header.Set("Mcp-Session-Id", "s1")
	}
	w := httptest.NewRecorder()
	rt.ServeExchange(w, req)
	return w
}

// Regression (chaos, kill rounds): the grain accepted an exchange just
// before it disposed the runtime (its ownership was lost); go-sdk, whose
// session the disposal had ended, answered that request 404, and go-sdk's
// client took the 404 as the end of its session — a live session lost. A
// request that reaches a closed runtime now gets the restart envelope.
func TestClosedRuntimeAnswersRestartingNotSessionNotFound(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
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
