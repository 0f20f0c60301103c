package mcpruntime_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// deadlines records the approval deadlines a runtime armed on its
// session's side.
type deadlines struct {
	leaseLog
	mu sync.Mutex
	at map[string]time.Time
}

func (d *deadlines) Paused(id string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at[id] = at
}

// A session's pending questions tell time by the runtime's clock
// (Config.Clock, as a grain's by GrainCallsConfig.Now): the deadline that
// AskLater answers and the session arms is the injected clock's plus the
// window, and AskStatus reads the question pending until that clock
// passes it, then expired. (With time.Now, a clock set years back reads
// the question expired at once, its deadline the system clock's.)
func TestASessionsPendingQuestionsTellTimeByTheRuntimesClock(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_000_000_000_000)) // 2001: far from the system clock
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := mcpruntime.NewBuilder(mcpruntime.Config{Store: st, Clock: clk, AskWindow: time.Minute,
		NewServer: func(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "t"}, opts)
			mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				l, err := app.LaterOf(ctx)
				if err != nil {
					return nil, nil, err
				}
				p, err := l.AskLater(ctx, app.Question{Summary: "Ship it?"})
				if err != nil {
					return nil, nil, err
				}
				return textOf(fmt.Sprintf("%s %d", p.ID, p.Deadline.UnixMilli())), nil, nil
			})
			mcp.AddTool(srv, &mcp.Tool{Name: "status"}, func(ctx context.Context, _ *mcp.CallToolRequest, args struct {
				ID string `json:"id"`
			}) (*mcp.CallToolResult, any, error) {
				l, err := app.LaterOf(ctx)
				if err != nil {
					return nil, nil, err
				}
				s, err := l.AskStatus(ctx, args.ID)
				if err != nil {
					return nil, nil, err
				}
				return textOf(string(s.State)), nil, nil
			})
			return srv, func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	own, err := st.Acquire(context.Background(), "session/s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	armed := &deadlines{at: map[string]time.Time{}}
	built, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", Grain: own.Grain,
		Epoch: func() uint64 { return own.Epoch }, Leases: armed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = built.Close(context.Background()) })
	rt := built.(exchanger)
	if w := post(t, rt, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`); w.Code != http.StatusOK {
		t.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	post(t, rt, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	call := func(id int, tool, args string) string {
		t.Helper()
		w := post(t, rt, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
		_, text, ok := strings.Cut(w.Body.String(), `"text":"`)
		text, _, _ = strings.Cut(text, `"`)
		if w.Code != http.StatusOK || !ok {
			t.Fatalf("%s: %d %s", tool, w.Code, w.Body)
		}
		return text
	}
	id, deadline, _ := strings.Cut(call(2, "ask", `{}`), " ")
	want := clk.Now().Add(time.Minute)
	if deadline != fmt.Sprint(want.UnixMilli()) {
		t.Fatalf("AskLater's deadline %s, want the injected clock's %d", deadline, want.UnixMilli())
	}
	armed.mu.Lock()
	at := armed.at[id]
	armed.mu.Unlock()
	if !at.Equal(want) {
		t.Fatalf("the session armed the deadline at %v, want %v", at, want)
	}
	if got := call(3, "status", fmt.Sprintf(`{"id":%q}`, id)); got != string(app.AskWaiting) {
		t.Fatalf("status before the injected deadline: %q, want pending", got)
	}
	clk.Advance(time.Minute)
	if got := call(4, "status", fmt.Sprintf(`{"id":%q}`, id)); got != string(app.AskExpired) {
		t.Fatalf("status at the injected deadline: %q, want expired", got)
	}
}

// textOf is a tool result of text.
func textOf(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
