//lint:file-ignore SA1019 the session's log level (SEP-2577 deprecates logging) is part of what a restore replays.

package mcpruntime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"lifecycle-client","version":"7"}}}`

// loggingBuilder is a node's runtime builder whose shared server has one
// tool, "say", that logs at info and at error level (go-sdk drops what is
// below the session's level, and everything when none was set); it
// returns the server too.
func loggingBuilder(t *testing.T) (*mcpruntime.Builder, *mcp.Server) {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var srv *mcp.Server
	b, err := mcpruntime.NewBuilder(mcpruntime.Config{Store: st,
		NewServer: func(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
			srv = mcp.NewServer(&mcp.Implementation{Name: "t"}, opts)
			mcp.AddTool(srv, &mcp.Tool{Name: "say"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				for _, level := range []string{"info", "error"} {
					_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(level), Data: "said at " + level})
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "said"}}}, nil, nil
			})
			return srv, func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, srv
}

// sessions are the server's live sessions.
func sessions(srv *mcp.Server) []*mcp.ServerSession {
	var out []*mcp.ServerSession
	for ss := range srv.Sessions() {
		out = append(out, ss)
	}
	return out
}

// handshake initializes the session on rt and sets its log level; it
// returns the last state the runtime asked to store.
func handshake(t *testing.T, b *mcpruntime.Builder, level string) (session.Runtime, func() []byte) {
	t.Helper()
	var state []byte
	rt, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", StateChanged: func(s []byte) error {
		state = s
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if w := post(t, rt.(exchanger), initialize); w.Code != http.StatusOK {
		t.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	if w := post(t, rt.(exchanger), `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); w.Code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", w.Code, w.Body)
	}
	if level != "" {
		if w := post(t, rt.(exchanger), `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"`+level+`"}}`); w.Code != http.StatusOK {
			t.Fatalf("setLevel: %d %s", w.Code, w.Body)
		}
	}
	return rt, func() []byte { return state }
}

// A session's runtime records its handshake (initialize, log level) as it
// happens; a runtime built from that record serves the session's next
// request without a new initialize, with the same server session state:
// the client's initialize params and its log level (the restored session
// logs at error, not at info).
func TestRestoredRuntimeHasTheRecordedSessionState(t *testing.T) {
	b, srv := loggingBuilder(t)
	first, state := handshake(t, b, "error")
	var recorded mcp.ServerSessionState
	if err := json.Unmarshal(state(), &recorded); err != nil || recorded.LogLevel != "error" ||
		recorded.InitializeParams == nil || recorded.InitializeParams.ClientInfo.Name != "lifecycle-client" {
		t.Fatalf("recorded state %s (%v): want the client's initialize and level error", state(), err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sessions(srv)); n != 0 {
		t.Fatalf("%d server sessions after the runtime closed, want 0", n)
	}
	rt, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", State: state()})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	live := sessions(srv)
	if len(live) != 1 {
		t.Fatalf("%d server sessions after the restore, want 1", len(live))
	}
	if p := live[0].InitializeParams(); p == nil || p.ClientInfo.Name != "lifecycle-client" || p.ClientInfo.Version != "7" || p.ProtocolVersion != "2025-11-25" {
		t.Fatalf("restored initialize params %+v", p)
	}
	w := post(t, rt.(exchanger), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"say","arguments":{}}}`)
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `"said"`) {
		t.Fatalf("call on the restored runtime: %d %s", w.Code, body)
	}
	if !strings.Contains(body, "said at error") || strings.Contains(body, "said at info") {
		t.Fatalf("the restored session does not log at its recorded level (error): %s", body)
	}
}

// A session that never set a log level is restored without one: the
// restored session logs nothing (go-sdk sends no log before a level is
// set), so the replay did not invent a setLevel.
func TestRestoredRuntimeWithoutALevelLogsNothing(t *testing.T) {
	b, _ := loggingBuilder(t)
	first, state := handshake(t, b, "")
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", State: state()})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	w := post(t, rt.(exchanger), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"say","arguments":{}}}`)
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "said at") {
		t.Fatalf("call on the restored runtime: %d %s (want the answer and no log)", w.Code, w.Body)
	}
}

// A runtime built from a record with no handshake (a session whose
// initialize never completed) replays nothing; one built from a record it
// cannot read fails the build rather than serve a session without state.
func TestRestoreOfAnEmptyOrUnreadableRecord(t *testing.T) {
	b, srv := loggingBuilder(t)
	rt, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", State: []byte(`{}`)})
	if err != nil {
		t.Fatalf("build from a record without a handshake: %v", err)
	}
	if n := len(sessions(srv)); n != 0 {
		t.Fatalf("%d server sessions after building from an empty record, want 0 (nothing replayed)", n)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Build(context.Background(), session.BuildInput{SessionID: "s2", State: []byte(`not json`)}); err == nil {
		t.Fatal("a record that is not a session state built a runtime")
	}
}

// Disposing a runtime ends its go-sdk session on the shared server, and a
// second Close is a no-op.
func TestClosedRuntimeEndsItsServerSession(t *testing.T) {
	b, srv := loggingBuilder(t)
	rt, _ := handshake(t, b, "")
	if n := len(sessions(srv)); n != 1 {
		t.Fatalf("%d server sessions after initialize, want 1", n)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sessions(srv)); n != 0 {
		t.Fatalf("%d server sessions after Close, want 0", n)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
