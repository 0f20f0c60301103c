package demo_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// TestOrgAPIKeepsOneListPerOrganization: the openapi source over the
// in-process client, called as the engine calls it (the caller on the
// context). acme's to-do is invisible to globex in the list, by id and to
// delete; each organization numbers its own items.
func TestOrgAPIKeepsOneListPerOrganization(t *testing.T) {
	api := demo.NewOrgAPI()
	base := "http://127.0.0.1:1/demo" // never dialled: the client calls the API in process
	client, err := api.Client(base)
	if err != nil {
		t.Fatal(err)
	}
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "demo", Document: api.Spec(base), Client: client})
	if err != nil {
		t.Fatal(err)
	}
	as := func(org string) context.Context {
		return tools.WithCaller(t.Context(), tools.Caller{User: "u-" + org, Org: org, Role: "admin"})
	}
	acme, globex := as("acme"), as("globex")

	out, err := src.Call(acme, "createTodo", map[string]any{"title": "acme's secret"})
	if err != nil || out.(map[string]any)["id"] != "1" {
		t.Fatalf("acme creates: %v %v", out, err)
	}
	if out, err := src.Call(globex, "listTodos", nil); err != nil || len(out.([]any)) != 0 {
		t.Fatalf("globex lists: %v %v, want nothing", out, err)
	}
	var he *openapi.HTTPError
	if _, err := src.Call(globex, "getTodo", map[string]any{"id": "1"}); !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("globex gets acme's id: %v, want 404", err)
	}
	if _, err := src.Call(globex, "deleteTodo", map[string]any{"id": "1"}); !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("globex deletes acme's id: %v, want 404", err)
	}
	if out, err := src.Call(globex, "createTodo", map[string]any{"title": "globex's own"}); err != nil || out.(map[string]any)["id"] != "1" {
		t.Fatalf("globex creates: %v %v, want its own id 1", out, err)
	}
	if got := api.TodosOf("acme"); len(got) != 1 || got[0].Title != "acme's secret" {
		t.Fatalf("acme's list: %v", got)
	}
	if got := api.TodosOf("globex"); len(got) != 1 || got[0].Title != "globex's own" {
		t.Fatalf("globex's list: %v", got)
	}
	if got := api.Todos(); len(got) != 0 {
		t.Fatalf("no list without an organization: %v", got)
	}
	// Without a caller (or one without an organization) nothing is served.
	for _, ctx := range []context.Context{t.Context(), tools.WithCaller(t.Context(), tools.Caller{User: "x"})} {
		if _, err := src.Call(ctx, "listTodos", nil); !errors.As(err, &he) || he.Status != 401 {
			t.Fatalf("no organization: %v, want 401", err)
		}
	}
}

// TestOrgAPIOverHTTPRefusesEveryRequest: served over a network with no
// one putting a caller on the request's context, the per-organization API
// answers 401 to every operation.
func TestOrgAPIOverHTTPRefusesEveryRequest(t *testing.T) {
	srv := httptest.NewServer(demo.NewOrgAPI().Handler())
	defer srv.Close()
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/todos", ""}, {"POST", "/todos", `{"title":"x"}`}, {"GET", "/todos/1", ""}, {"DELETE", "/todos/1", ""},
	} {
		var e map[string]string
		if st := do(t, srv, c.method, c.path, c.body, &e); st != 401 || e["error"] == "" {
			t.Errorf("%s %s: %d %v, want 401", c.method, c.path, st, e)
		}
	}
}
