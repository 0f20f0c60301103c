package toolpacks_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// A program's own packs are known beside the built-ins: they are listed
// after them, selected by name alone or with built-ins, and checked
// (named, set up, no name twice).
func TestOwnPacksAreKnownBesideTheBuiltins(t *testing.T) {
	hello := toolpacks.NewPack("hello", func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "greet"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil, nil
		})
	})
	own := []toolpacks.Pack{hello}
	if got := toolpacks.NamesWith(own); !slices.Equal(got, []string{"code", "demo", "conformance", "hello"}) {
		t.Fatalf("NamesWith = %v", got)
	}
	if got := len(toolpacks.Builtin()); got != len(toolpacks.Names()) {
		t.Fatalf("Builtin has %d packs, Names %d", got, len(toolpacks.Names()))
	}
	if err := toolpacks.Validate([]string{"hello"}); err == nil {
		t.Fatal("Validate knows a program's pack without being told of it")
	}
	for name, extra := range map[string][]toolpacks.Pack{
		"builtin name": {toolpacks.NewPack("demo", func(*mcp.Server) {})},
		"twice":        {hello, hello},
		"no name":      {toolpacks.NewPack("", func(*mcp.Server) {})},
		"no setup":     {{Name: "bare"}},
	} {
		if err := toolpacks.ValidateWith(nil, extra); err == nil {
			t.Errorf("%s: ValidateWith accepted %v", name, extra)
		}
	}
	for _, packs := range [][]string{{"hello"}, {"hello", "demo"}} {
		s, closer, err := toolpacks.NewServer(testImpl, packs, toolpacks.Options{Packs: own})
		if err != nil {
			t.Fatalf("NewServer(%v): %v", packs, err)
		}
		t.Cleanup(closer)
		cs := connect(t, s, nil, "")
		names := toolNames(t, cs)
		if !slices.Contains(names, "greet") || slices.Contains(names, "echo") != slices.Contains(packs, "demo") {
			t.Fatalf("packs %v: tools %v", packs, names)
		}
		wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "greet"}), "hello")
	}
	if _, _, err := toolpacks.NewServer(testImpl, []string{"hello"}, toolpacks.Options{}); err == nil || !strings.Contains(err.Error(), `"hello"`) {
		t.Fatalf("NewServer without the pack known: %v, want unknown hello", err)
	}
}

// Packs register schedule callbacks through their Handlers: NewServer
// binds the merged callbacks to the server it builds (SchedulesOf) until
// it is closed, and two packs registering one name is a conflict.
func TestPacksRegisterScheduleCallbacks(t *testing.T) {
	noop := func(context.Context, app.ScheduleCall) error { return nil }
	withSchedules := func(name string, callbacks ...string) toolpacks.Pack {
		fs := map[string]app.ScheduleFunc{}
		for _, c := range callbacks {
			fs[c] = noop
		}
		return toolpacks.Pack{Name: name, Setup: func(toolpacks.Env) (toolpacks.Handlers, func(*mcp.Server) func()) {
			return toolpacks.Handlers{Schedules: fs}, func(*mcp.Server) func() { return nil }
		}}
	}
	packs := []toolpacks.Pack{withSchedules("one", "a", "b"), withSchedules("two", "c")}
	srv, closeSrv, err := toolpacks.NewServer(&mcp.Implementation{Name: "t"}, []string{"one", "two"}, toolpacks.Options{Packs: packs})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolpacks.SchedulesOf(srv); len(got) != 3 || got["a"] == nil || got["c"] == nil {
		t.Fatalf("SchedulesOf: %v, want a, b, c", got)
	}
	closeSrv()
	if got := toolpacks.SchedulesOf(srv); got != nil {
		t.Fatalf("SchedulesOf a closed server: %v", got)
	}
	packs = append(packs, withSchedules("three", "a"))
	_, _, err = toolpacks.NewServer(&mcp.Implementation{Name: "t"}, []string{"one", "three"}, toolpacks.Options{Packs: packs})
	if err == nil || !strings.Contains(err.Error(), "schedule a") {
		t.Fatalf("two packs with callback a: %v, want a conflict", err)
	}
}
