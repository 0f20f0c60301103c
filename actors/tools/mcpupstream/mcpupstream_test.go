package mcpupstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/mcpupstream"
)

// upstream is a real go-sdk MCP server behind the streamable HTTP handler.
type upstream struct {
	server *mcp.Server
	srv    *httptest.Server
	lists  atomic.Int32 // tools/list requests served

	mu    sync.Mutex
	auths map[string]int // Authorization header values seen, by count
}

var objectSchema = map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{server: mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil), auths: map[string]int{}}
	u.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				u.lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	yes, no := true, false
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	u.server.AddTool(&mcp.Tool{
		Name: "read_file", Title: "Read file", Description: "Read a file's contents.",
		InputSchema: objectSchema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Path string }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "contents of " + args.Path}, &mcp.TextContent{Text: "line 2"},
		}}, nil
	})
	u.server.AddTool(&mcp.Tool{
		Name: "delete_file", Description: "Delete a file permanently.",
		InputSchema: objectSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"deleted":true}`}},
			StructuredContent: map[string]any{"deleted": args["path"], "ok": true},
		}, nil
	})
	u.server.AddTool(&mcp.Tool{
		Name: "touch", Description: "Create an empty file.",
		InputSchema: objectSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: &no},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("touched"), nil })
	u.server.AddTool(&mcp.Tool{Name: "screenshot", Description: "Take a screenshot.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"}}}, nil
		})
	u.server.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r := text("disk on fire")
			r.IsError = true
			return r, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths[r.Header.Get("Authorization")]++
		u.mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) connect(t *testing.T, opts mcpupstream.Options) *mcpupstream.Source {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "files"
	}
	opts.Endpoint = u.srv.URL
	opts.Client = u.srv.Client()
	src, err := mcpupstream.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// protocols runs f for the SDK's default protocol version and for the
// 2025-11-25 session-based one.
func protocols(t *testing.T, f func(t *testing.T, version string)) {
	for _, v := range []string{"", "2025-11-25"} {
		name := v
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) { f(t, v) })
	}
}

func TestListAndMetadata(t *testing.T) {
	protocols(t, func(t *testing.T, version string) {
		u := newUpstream(t)
		src := u.connect(t, mcpupstream.Options{ProtocolVersion: version})
		ctx := t.Context()
		want := map[string]struct {
			requires, idempotent bool
		}{
			"read_file":   {false, true},
			"delete_file": {true, false},
			"touch":       {true, false}, // destructiveHint false: additive, still a write
			"screenshot":  {true, false}, // no annotations: presumed destructive
			"fail":        {true, false},
		}
		for name, w := range want {
			tool, ok := src.Lookup(ctx, name)
			if !ok {
				t.Fatalf("Lookup(%s) not found", name)
			}
			if tool.Path != "files."+name || tool.Source != "files" || tool.Name != name ||
				tool.ApprovalText != "Call upstream tool "+name ||
				tool.RequiresApproval != w.requires || tool.Idempotent != w.idempotent {
				t.Errorf("%s = %+v", name, tool)
			}
			var schema map[string]any
			if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || !reflect.DeepEqual(schema, objectSchema) {
				t.Errorf("%s schema %s", name, tool.InputSchema)
			}
		}
		names := func(ts []tools.Tool) []string {
			var out []string
			for _, t := range ts {
				out = append(out, t.Name)
			}
			return out
		}
		if got := names(src.Search(ctx, "", 0)); !reflect.DeepEqual(got, []string{"delete_file", "fail", "read_file", "screenshot", "touch"}) {
			t.Errorf("Search(\"\") = %v", got)
		}
		// read_file also matches in its title.
		if got := names(src.Search(ctx, "file", 2)); !reflect.DeepEqual(got, []string{"read_file", "delete_file"}) {
			t.Errorf("Search(file, 2) = %v", got)
		}
		if got := names(src.Search(ctx, "read file", 0)); len(got) < 1 || got[0] != "read_file" {
			t.Errorf("Search(read file) = %v", got)
		}
	})
}

func TestCall(t *testing.T) {
	protocols(t, func(t *testing.T, version string) {
		u := newUpstream(t)
		src := u.connect(t, mcpupstream.Options{ProtocolVersion: version, Headers: http.Header{"Authorization": {"Bearer up-secret"}}})
		ctx := t.Context()

		out, err := src.Call(ctx, "read_file", map[string]any{"path": "/a"})
		if err != nil || out != "contents of /a\nline 2" {
			t.Fatalf("read_file = %#v, %v", out, err)
		}
		out, err = src.Call(ctx, "delete_file", map[string]any{"path": "/b"})
		if err != nil || !reflect.DeepEqual(out, map[string]any{"deleted": "/b", "ok": true}) {
			t.Fatalf("delete_file = %#v, %v", out, err)
		}
		out, err = src.Call(ctx, "screenshot", nil)
		want := []any{map[string]any{"type": "image", "data": "AQID", "mimeType": "image/png"}}
		if err != nil || !reflect.DeepEqual(out, want) {
			t.Fatalf("screenshot = %#v, %v", out, err)
		}
		_, err = src.Call(ctx, "fail", nil)
		var te *mcpupstream.ToolError
		if !errors.As(err, &te) || te.Text != "disk on fire" || err.Error() != "files.fail: disk on fire" {
			t.Fatalf("fail err = %v", err)
		}
		_, err = src.Call(ctx, "no_such_tool", nil)
		if !errors.Is(err, tools.ErrUnknownTool) {
			t.Fatalf("unknown tool err = %v", err)
		}

		u.mu.Lock()
		defer u.mu.Unlock()
		for auth, n := range u.auths {
			if auth != "Bearer up-secret" {
				t.Errorf("%d requests with Authorization %q", n, auth)
			}
		}
	})
}

func TestRefreshOnMiss(t *testing.T) {
	protocols(t, func(t *testing.T, version string) {
		u := newUpstream(t)
		src := u.connect(t, mcpupstream.Options{ProtocolVersion: version, MissRefreshEvery: -1})
		ctx := t.Context()
		if _, ok := src.Lookup(ctx, "new_tool"); ok {
			t.Fatal("new_tool found before it was added")
		}
		u.server.AddTool(&mcp.Tool{Name: "new_tool", Description: "Added later.", InputSchema: objectSchema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil
			})
		if _, ok := src.Lookup(ctx, "new_tool"); !ok {
			t.Fatal("new_tool not found after the upstream added it")
		}
		if out, err := src.Call(ctx, "new_tool", nil); err != nil || out != "new" {
			t.Fatalf("new_tool = %#v, %v", out, err)
		}
	})
}

func TestMissRefreshRateLimited(t *testing.T) {
	u := newUpstream(t)
	src := u.connect(t, mcpupstream.Options{MissRefreshEvery: time.Hour})
	ctx := t.Context()
	if n := u.lists.Load(); n != 1 {
		t.Fatalf("%d tools/list after New, want 1", n)
	}
	for range 10 {
		if _, ok := src.Lookup(ctx, "missing"); ok {
			t.Fatal("found")
		}
	}
	// The first miss refreshes; the rest are within MissRefreshEvery.
	if n := u.lists.Load(); n != 2 {
		t.Fatalf("%d tools/list after 10 misses, want 2", n)
	}
	// Hits never refresh within RefreshEvery.
	for range 10 {
		if _, ok := src.Lookup(ctx, "read_file"); !ok {
			t.Fatal("read_file not found")
		}
	}
	if n := u.lists.Load(); n != 2 {
		t.Fatalf("%d tools/list after 10 hits, want 2", n)
	}
}

func TestPeriodicRefresh(t *testing.T) {
	u := newUpstream(t)
	// RefreshEvery of 1ns: every use finds the list out of date.
	src := u.connect(t, mcpupstream.Options{RefreshEvery: time.Nanosecond, MissRefreshEvery: time.Hour})
	ctx := t.Context()
	u.server.AddTool(&mcp.Tool{Name: "zeta_tool", Description: "Added later.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	if got := src.Search(ctx, "zeta", 5); len(got) != 1 || got[0].Name != "zeta_tool" {
		t.Fatalf("Search(zeta) = %v", got)
	}
	u.server.RemoveTools("zeta_tool")
	if _, ok := src.Lookup(ctx, "zeta_tool"); ok {
		t.Fatal("zeta_tool still found after the upstream removed it")
	}
}

func TestNewErrorsAndClose(t *testing.T) {
	if _, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "bad name", Endpoint: "http://x"}); err == nil {
		t.Fatal("bad name accepted")
	}
	if _, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "x"}); err == nil {
		t.Fatal("missing endpoint accepted")
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	if _, err := mcpupstream.New(t.Context(), mcpupstream.Options{Name: "x", Endpoint: dead.URL}); err == nil {
		t.Fatal("unreachable upstream accepted")
	}

	u := newUpstream(t)
	src := u.connect(t, mcpupstream.Options{})
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Call(t.Context(), "read_file", nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Call after Close err = %v", err)
	}
}

func TestReconnectAfterUpstreamForgetsSession(t *testing.T) {
	u := newUpstream(t)
	src := u.connect(t, mcpupstream.Options{ProtocolVersion: "2025-11-25", MissRefreshEvery: -1})
	ctx := t.Context()
	forget := func() {
		for ss := range u.server.Sessions() {
			_ = ss.Close()
		}
	}
	// A destructive (not idempotent) call is sent again too: the upstream
	// refused the old session before running anything.
	forget()
	out, err := src.Call(ctx, "delete_file", map[string]any{"path": "/x"})
	if err != nil || !reflect.DeepEqual(out, map[string]any{"deleted": "/x", "ok": true}) {
		t.Fatalf("delete_file after the upstream forgot the session = %#v, %v", out, err)
	}
	// Listing reconnects as well.
	forget()
	u.server.AddTool(&mcp.Tool{Name: "later", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	if _, ok := src.Lookup(ctx, "later"); !ok {
		t.Fatal("later not found after reconnecting")
	}
}

func TestOnChangeAfterListChanged(t *testing.T) {
	protocols(t, func(t *testing.T, version string) {
		u := newUpstream(t)
		src := u.connect(t, mcpupstream.Options{ProtocolVersion: version, MissRefreshEvery: time.Hour})
		changed := make(chan struct{}, 4)
		src.OnChange(func() { changed <- struct{}{} })
		// The list is read once a session stream is up: a use first.
		if _, ok := src.Lookup(t.Context(), "read_file"); !ok {
			t.Fatal("read_file not found")
		}
		u.server.AddTool(&mcp.Tool{Name: "announced", Description: "Added later.", InputSchema: objectSchema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		select {
		case <-changed:
		case <-time.After(20 * time.Second):
			t.Fatal("OnChange not called after the upstream announced a new tool list")
		}
		lists := u.lists.Load()
		if got := src.Search(t.Context(), "announced", 5); len(got) != 1 || got[0].Name != "announced" {
			t.Fatalf("Search(announced) = %v", got)
		}
		if n := u.lists.Load(); n != lists {
			t.Errorf("the search refetched the list (%d tools/list, want %d): the change was not stored", n, lists)
		}
	})
}
