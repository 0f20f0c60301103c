package mcpgrain_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

var stHandleNotes = mcpgrain.NewState[[]string]("test-handle-notes", mcpgrain.StateOptions[[]string]{})

type handleArgs struct {
	Handle string `json:"handle"`
	Text   string `json:"text,omitempty"`
}

type handleNotes struct {
	Notes []string `json:"notes"`
}

// handleServer keeps notes behind handles: new, add, list, drop.
func handleServer() mcpgrain.Server {
	fail := func(err error) (*mcp.CallToolResult, handleNotes, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, handleNotes{}, nil
	}
	onHandle := func(ctx context.Context, args handleArgs, f func(ctx context.Context) ([]string, error)) (*mcp.CallToolResult, handleNotes, error) {
		ctx, err := mcpgrain.OnHandle(ctx, args.Handle)
		if err != nil {
			return fail(err)
		}
		n, err := f(ctx)
		if err != nil {
			return fail(err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(len(n))}}}, handleNotes{Notes: append([]string{}, n...)}, nil
	}
	return mcpgrain.Server{Name: "handles", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "new"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			h, err := mcpgrain.NewHandle(ctx)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: h}}}, nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "add"}, func(ctx context.Context, _ *mcp.CallToolRequest, args handleArgs) (*mcp.CallToolResult, handleNotes, error) {
			return onHandle(ctx, args, func(ctx context.Context) ([]string, error) {
				return stHandleNotes.Update(ctx, func(n *[]string) error { *n = append(*n, args.Text); return nil })
			})
		})
		mcp.AddTool(s, &mcp.Tool{Name: "list"}, func(ctx context.Context, _ *mcp.CallToolRequest, args handleArgs) (*mcp.CallToolResult, handleNotes, error) {
			return onHandle(ctx, args, stHandleNotes.Get)
		})
		mcp.AddTool(s, &mcp.Tool{Name: "mine"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, handleNotes, error) {
			hs, err := mcpgrain.Handles(ctx)
			if err != nil {
				return fail(err)
			}
			ids := []string{}
			for _, h := range hs {
				ids = append(ids, h.ID)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(len(ids))}}}, handleNotes{Notes: ids}, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "drop"}, func(ctx context.Context, _ *mcp.CallToolRequest, args handleArgs) (*mcp.CallToolResult, handleNotes, error) {
			if err := mcpgrain.DropHandle(ctx, args.Handle); err != nil {
				return fail(err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dropped"}}}, handleNotes{}, nil
		})
	}}
}

func connectEra(t *testing.T, endpoint, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "handle-test", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%s): %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callHandle(t *testing.T, cs *mcp.ClientSession, tool string, args handleArgs) (*mcp.CallToolResult, []string) {
	t.Helper()
	var a any = args
	if args == (handleArgs{}) {
		a = nil
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: a})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	n, _ := mcpclient.Structured(res)["notes"].([]any)
	out := make([]string, 0, len(n))
	for _, v := range n {
		out = append(out, fmt.Sprint(v))
	}
	return res, out
}

// On a dev node, in the sessionless 2026-07-28 era: a handle is minted,
// concurrent Updates of its state (each request reads its own snapshot
// first, so all but the first save over a stale revision and must take
// the grain's conflict answer) lose nothing and add each note once, a stateful session of the same principal reads the same handle,
// the principal's handles (Handles) list it in both eras, and a dropped
// handle is unknown and listed no more.
func TestHandlesOnADevNode(t *testing.T) {
	endpoint := runDev(t, handleServer(), io.Discard)
	cs := connectEra(t, endpoint, "2026-07-28")
	res, _ := callHandle(t, cs, "new", handleArgs{})
	if res.IsError {
		t.Fatalf("new: %s", mcpclient.Text(res))
	}
	h := mcpclient.Text(res)
	const n = 20
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			if res, _ := callHandle(t, cs, "add", handleArgs{Handle: h, Text: fmt.Sprint(i)}); res.IsError {
				t.Errorf("add %d: %s", i, mcpclient.Text(res))
			}
		})
	}
	wg.Wait()
	t.Logf("%d concurrent adds took %v", n, time.Since(start))
	_, got := callHandle(t, cs, "list", handleArgs{Handle: h})
	slices.Sort(got)
	want := make([]string, 0, n)
	for i := range n {
		want = append(want, fmt.Sprint(i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after %d concurrent adds the handle has %v", n, got)
	}
	// The same principal's stateful session (2025-11-25) reaches it too.
	if _, got := callHandle(t, connectEra(t, endpoint, "2025-11-25"), "list", handleArgs{Handle: h}); len(got) != n {
		t.Fatalf("a stateful session reads %d notes, want %d", len(got), n)
	}
	// Both eras list it among the principal's handles (Handles).
	for _, c := range []*mcp.ClientSession{cs, connectEra(t, endpoint, "2025-11-25")} {
		if _, mine := callHandle(t, c, "mine", handleArgs{}); !slices.Equal(mine, []string{h}) {
			t.Fatalf("the principal's handles: %v, want [%s]", mine, h)
		}
	}
	if res, _ := callHandle(t, cs, "drop", handleArgs{Handle: h}); res.IsError {
		t.Fatalf("drop: %s", mcpclient.Text(res))
	}
	if _, mine := callHandle(t, cs, "mine", handleArgs{}); len(mine) != 0 {
		t.Fatalf("a dropped handle is listed: %v", mine)
	}
	for _, tool := range []string{"list", "drop", "add"} {
		if res, _ := callHandle(t, cs, tool, handleArgs{Handle: h, Text: "x"}); !res.IsError || mcpclient.Text(res) != mcpgrain.ErrUnknownHandle.Error() {
			t.Errorf("%s of a dropped handle: %s", tool, mcpclient.Text(res))
		}
	}
}
