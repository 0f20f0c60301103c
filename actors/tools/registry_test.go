package tools_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// clock is a small in-memory source without scored search: the Registry
// scores its results itself.
type clock struct{ name string }

func (c clock) Name() string { return c.name }

var clockTools = map[string]tools.Tool{
	"now":      {Description: "Current time of day", Idempotent: true},
	"setAlarm": {Description: "Set an alarm clock", RequiresApproval: true, ApprovalText: "Set an alarm"},
}

func (c clock) Lookup(_ context.Context, name string) (tools.Tool, bool) {
	t, ok := clockTools[name]
	if !ok {
		return tools.Tool{}, false
	}
	t.Path, t.Source, t.Name = c.name+"."+name, c.name, name
	return t, true
}

func (c clock) Call(_ context.Context, name string, args map[string]any) (any, error) {
	if _, ok := clockTools[name]; !ok {
		return nil, fmt.Errorf("%w: %s.%s", tools.ErrUnknownTool, c.name, name)
	}
	return map[string]any{"tool": name, "args": len(args)}, nil
}

func (c clock) Search(ctx context.Context, _ string, limit int) []tools.Tool {
	var out []tools.Tool
	for _, name := range []string{"now", "setAlarm"} {
		t, _ := c.Lookup(ctx, name)
		out = append(out, t)
	}
	return out[:min(limit, len(out))]
}

func newDemoRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	api := demo.NewAPI()
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(file, api.Spec(srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "demo", Spec: file, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(src, clock{"clock"})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestNewRegistryRejects(t *testing.T) {
	cases := map[string][]tools.Source{
		"duplicate": {clock{"a"}, clock{"a"}},
		"empty":     {clock{""}},
		"digit":     {clock{"1a"}},
		"dot":       {clock{"a.b"}},
		"dash":      {clock{"a-b"}},
		"nil":       {nil},
	}
	for name, srcs := range cases {
		if _, err := tools.NewRegistry(srcs...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	reg, err := tools.NewRegistry(clock{"b_2"}, clock{"A"})
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Sources(); !reflect.DeepEqual(got, []string{"A", "b_2"}) {
		t.Fatalf("Sources = %v", got)
	}
}

func TestParsePath(t *testing.T) {
	good := map[string][2]string{
		"demo.createTodo": {"demo", "createTodo"},
		"a.b.c":           {"a", "b.c"},
		"x_1.y-z":         {"x_1", "y-z"},
	}
	for path, want := range good {
		s, n, err := tools.ParsePath(path)
		if err != nil || s != want[0] || n != want[1] {
			t.Errorf("ParsePath(%q) = %q, %q, %v", path, s, n, err)
		}
	}
	for _, path := range []string{"", "demo", ".x", "demo.", "1demo.x", "de mo.x", "-.x"} {
		if _, _, err := tools.ParsePath(path); !errors.Is(err, tools.ErrUnknownTool) {
			t.Errorf("ParsePath(%q) err = %v", path, err)
		}
	}
}

func TestRegistryLookupAndCall(t *testing.T) {
	reg := newDemoRegistry(t)
	ctx := t.Context()
	tool, ok := reg.Lookup(ctx, "demo.createTodo")
	if !ok || !tool.RequiresApproval || tool.ApprovalText != "POST /todos" {
		t.Fatalf("Lookup(demo.createTodo) = %+v, %v", tool, ok)
	}
	for _, path := range []string{"demo.nope", "nosource.x", "bad", "demo."} {
		if _, ok := reg.Lookup(ctx, path); ok {
			t.Errorf("Lookup(%q) found", path)
		}
	}
	out, err := reg.Call(ctx, "demo.createTodo", map[string]any{"title": "via registry"})
	if err != nil || out.(map[string]any)["title"] != "via registry" {
		t.Fatalf("Call(demo.createTodo) = %v, %v", out, err)
	}
	out, err = reg.Call(ctx, "demo.listTodos", nil)
	if err != nil || len(out.([]any)) != 1 {
		t.Fatalf("Call(demo.listTodos) = %v, %v", out, err)
	}
	_, err = reg.Call(ctx, "demo.getTodo", map[string]any{"id": "99"})
	if err == nil || err.Error() != `HTTP 404 from GET /todos/{id}: {"error":"not found"}` || errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("Call(getTodo 99) err = %v", err)
	}
	unknown := map[string]string{
		"demo.nope":   "no operation",
		"nosource.x":  `no source "nosource" (sources: clock, demo)`,
		"bad":         "want <source>.<name>",
		"clock.never": "clock.never",
	}
	for path, want := range unknown {
		_, err := reg.Call(ctx, path, nil)
		if !errors.Is(err, tools.ErrUnknownTool) || !strings.Contains(err.Error(), want) {
			t.Errorf("Call(%q) err = %v, want ErrUnknownTool containing %q", path, err, want)
		}
	}
}

func TestRegistryDescribe(t *testing.T) {
	reg := newDemoRegistry(t)
	d, ok := reg.Describe(t.Context(), "demo.getTodo")
	if !ok {
		t.Fatal("Describe(demo.getTodo) not found")
	}
	want := map[string]any{
		"path":        "demo.getTodo",
		"description": "Get a to-do",
		"inputSchema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"id": map[string]any{"type": "string", "description": "The to-do's id."}},
			"required":   []any{"id"},
		},
		"requiresApproval": false,
		"approvalText":     "GET /todos/{id}",
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("Describe = %#v", d)
	}
	d, ok = reg.Describe(t.Context(), "clock.setAlarm")
	if !ok || d["requiresApproval"] != true || !reflect.DeepEqual(d["inputSchema"], map[string]any{"type": "object"}) {
		t.Fatalf("Describe(clock.setAlarm) = %#v", d)
	}
	if _, ok := reg.Describe(t.Context(), "demo.nope"); ok {
		t.Fatal("Describe(demo.nope) found")
	}
}

func TestRegistrySearch(t *testing.T) {
	reg := newDemoRegistry(t)
	ctx := t.Context()
	paths := func(ts []tools.Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Path)
		}
		return out
	}
	if got := paths(reg.Search(ctx, "delete todo", 2)); !reflect.DeepEqual(got, []string{"demo.deleteTodo", "demo.createTodo"}) {
		t.Errorf("Search(delete todo) = %v", got)
	}
	if got := paths(reg.Search(ctx, "alarm", 0)); !reflect.DeepEqual(got, []string{"clock.setAlarm"}) {
		t.Errorf("Search(alarm) = %v", got)
	}
	if got := paths(reg.Search(ctx, "clock", 0)); !slices.Equal(got, []string{"clock.setAlarm", "clock.now"}) {
		t.Errorf("Search(clock) = %v", got) // setAlarm also says "clock"
	}
	if got := reg.Search(ctx, "", 0); len(got) != 6 {
		t.Errorf("Search(\"\") = %v, want all 6", paths(got))
	}
	if got := reg.Search(ctx, "", 3); len(got) != 3 {
		t.Errorf("Search(\"\", 3) = %d tools", len(got))
	}
	if got := reg.Search(ctx, "nothing matches this", 0); len(got) != 0 {
		t.Errorf("Search(no match) = %v", paths(got))
	}
}

func TestSearchTerms(t *testing.T) {
	cases := map[string][]string{
		"createTodo":          {"create", "todo"},
		"create todo":         {"create", "todo"},
		"HTTPServer get_user": {"http", "server", "get", "user"},
		"todo TODO todos":     {"todo", "todos"},
		"a b":                 {"a", "b"},
		"a tool":              {"tool"},
		"v2Items":             {"v2", "items"},
		"  ":                  nil,
	}
	for q, want := range cases {
		if got := tools.SearchTerms(q); !reflect.DeepEqual(got, want) {
			t.Errorf("SearchTerms(%q) = %v, want %v", q, got, want)
		}
	}
	st := tools.NewSearchText("createTodo", "Create a to-do", "demo.createTodo POST /todos", "Adds a to-do.")
	// create: name 5 + summary 3 + path 2; todo: name 5 + path 2 ("/todos");
	// the terms joined equal the name: 10.
	if got := st.Score(tools.SearchTerms("createTodo")); got != 10+7+10 {
		t.Errorf("exact name score = %d", got)
	}
	if got := st.Score(tools.SearchTerms("zebra")); got != 0 {
		t.Errorf("no-match score = %d", got)
	}
	if got := tools.ClampSearchLimit(0); got != 12 {
		t.Errorf("ClampSearchLimit(0) = %d", got)
	}
	if got := tools.ClampSearchLimit(1000); got != 100 {
		t.Errorf("ClampSearchLimit(1000) = %d", got)
	}
}

func TestTruncateText(t *testing.T) {
	if got := tools.TruncateText("short", 10); got != "short" {
		t.Errorf("short: %q", got)
	}
	got := tools.TruncateText(strings.Repeat("é", 10), 5) // 20 bytes; cut inside a rune
	if got != "éé… (truncated, 20 bytes)" {
		t.Errorf("utf-8 cut: %q", got)
	}
}
