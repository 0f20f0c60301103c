package systemtest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// logSignal is a slog handler that closes a channel the first time a
// record with a given message is logged (and discards everything).
type logSignal struct {
	msg  string
	seen chan struct{}
	once *sync.Once
}

func (l logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (l logSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == l.msg {
		l.once.Do(func() { close(l.seen) })
	}
	return nil
}
func (l logSignal) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logSignal) WithGroup(string) slog.Handler      { return l }

// TestGracefulStopLetsARunningSessionlessExecutionFinish: a node stopping
// gracefully (SIGTERM, a rolling deploy) lets a sessionless (2026-07-28)
// execution that is running a tool call finish, as sessions do, instead of
// cutting the call (an unknown outcome) and having the client run the code
// again from the start.
func TestGracefulStopLetsARunningSessionlessExecutionFinish(t *testing.T) {
	testGracefulStopLetsARunningExecutionFinish(t, "", "continuation: waiting for requests in flight before deactivating")
}

// The same for an MCP session (2025-11-25).
func TestGracefulStopLetsARunningSessionExecutionFinish(t *testing.T) {
	testGracefulStopLetsARunningExecutionFinish(t, "2025-11-25", "session: waiting for running executions before disposing")
}

func testGracefulStopLetsARunningExecutionFinish(t *testing.T, version, drainLog string) {
	entered, release, cut := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1)
	up := mcp.NewServer(&mcp.Implementation{Name: "slow"}, nil)
	up.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			entered <- struct{}{}
			select {
			case <-release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done"}}}, nil
			case <-ctx.Done():
				cut <- struct{}{}
				return nil, ctx.Err()
			}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(ts.Close)

	draining := make(chan struct{})
	info, stop := startNodeStoppable(t, codeNode(t, func(c *app.Config) {
		c.MCP.Code.Upstreams = []app.UpstreamSource{{Name: "up", URL: ts.URL}}
		c.Logger = slog.New(logSignal{msg: drainLog, seen: draining, once: &sync.Once{}})
	}))
	cs := connect(t, info.HTTPAddr, aliceToken, version, nil)

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{
			"code": `const r = await tools.up.slow({}); return r;`}})
		done <- outcome{res, err}
	}()
	select {
	case <-entered:
	case o := <-done:
		t.Fatalf("execute ended before its tool call: %+v %v", o.res, o.err)
	case <-time.After(20 * time.Second):
		t.Fatal("the tool call did not start")
	}

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case <-draining:
	case <-cut:
		t.Fatal("the graceful stop cut the running tool call")
	case <-time.After(20 * time.Second):
		t.Fatal("the node neither drained nor cut the execution")
	}
	// While it drains, the node still serves, but tells load balancers to
	// send it nothing new.
	if resp, err := http.Get("http://" + info.HTTPAddr + "/readyz"); err != nil {
		t.Errorf("/readyz while draining: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "draining") {
			t.Errorf("/readyz while draining: %d %s", resp.StatusCode, body)
		}
	}
	close(release)
	o := <-done
	if o.err != nil {
		t.Fatalf("execute: %v", o.err)
	}
	if o.res.IsError || !strings.Contains(mcpclient.Text(o.res), "slow done") {
		t.Fatalf("execute: %s", mcpclient.Text(o.res))
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestSessionlessApprovalAfterItsDeadlineIsATimeout: a sessionless pause
// has no deadline reminder (nothing fires while nobody retries), so the
// deadline the client was told is enforced when its retry comes: an accept
// after it is a decline with reason approval_timeout, and the call is
// never made.
func TestSessionlessApprovalAfterItsDeadlineIsATimeout(t *testing.T) {
	clk := clock.NewFake(time.Now())
	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.Code.Clock = clk
		c.MCP.Code.Window = time.Minute
	})
	raw := mrtrClient(t, info.HTTPAddr, aliceToken)
	first, err := raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": createCode}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first call: %+v %v", first, err)
	}
	clk.Advance(time.Minute + time.Second)
	res, err := raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": createCode},
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}, RequestState: first.RequestState})
	if err != nil {
		t.Fatalf("late retry: %v", err)
	}
	if !res.IsError || !strings.Contains(mcpclient.Text(res), "approval_timeout") {
		t.Fatalf("late accept: %s", mcpclient.Text(res))
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("the late accept ran the call: %d todos", n)
	}
}
