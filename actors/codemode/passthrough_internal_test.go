package codemode

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A pass-through call's program names the tool as a string (any name the
// upstream uses is safe in it) and passes the arguments as a literal;
// arguments that are not an object are refused.
func TestPassthroughCode(t *testing.T) {
	for _, tc := range []struct {
		tool, args, want string
	}{
		{"read_graph", "", `return await tools.mem["read_graph"]({});`},
		{"x\"); evil(); (\"", `{"a":[1,"b"]}`, `return await tools.mem["x\"); evil(); (\""]({"a":[1,"b"]});`},
		{"n", "null", `return await tools.mem["n"]({});`},
		{"big", `{ "id": 12345678901234567890 }`, `return await tools.mem["big"]({"id":12345678901234567890});`},
	} {
		got, err := passthroughCode("mem", tc.tool, json.RawMessage(tc.args))
		if err != nil || got != tc.want {
			t.Errorf("passthroughCode(%q, %s) = %s, %v; want %s", tc.tool, tc.args, got, err, tc.want)
		}
	}
	if _, err := passthroughCode("mem", "t", json.RawMessage(`[1]`)); err == nil {
		t.Error("an array of arguments was accepted")
	}
}

// Set lists the source's tools under their namespaced names with the
// upstream's schema and annotations, leaves out names MCP does not allow,
// and removes the tools a later list no longer has.
func TestPassthroughSetFollowsTheList(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "node"}, nil)
	p := NewPassthrough(server, Options{}, "up")
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	schema := map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}
	p.Set([]*mcp.Tool{{Name: "search", InputSchema: schema, Annotations: ro, Description: "Search."}, {Name: "has space"}, {Name: "drop"}})
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list := func() map[string]*mcp.Tool {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			out[tool.Name] = tool
		}
		return out
	}
	got := list()
	if s := got["up.search"]; len(got) != 2 || s == nil || got["up.drop"] == nil || s.Description != "Search." ||
		s.Annotations == nil || !s.Annotations.ReadOnlyHint {
		t.Fatalf("listed %v", got)
	}
	p.Set([]*mcp.Tool{{Name: "search", InputSchema: schema}, {Name: "new"}})
	got = list()
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"up.new", "up.search"}) {
		t.Fatalf("after the change: %v", names)
	}
}
