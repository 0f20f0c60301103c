package demo_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
)

// do sends one request to the API and decodes a JSON response into out
// (when non-nil), returning the status.
func do(t *testing.T, srv *httptest.Server, method, path, body string, out any) int {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, data)
		}
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

func TestCRUD(t *testing.T) {
	api := demo.NewAPI()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	var list []demo.Todo
	if st := do(t, srv, "GET", "/todos", "", &list); st != 200 || len(list) != 0 {
		t.Fatalf("empty list: %d %v", st, list)
	}
	var a, b demo.Todo
	if st := do(t, srv, "POST", "/todos", `{"title":"  buy milk "}`, &a); st != 201 {
		t.Fatalf("create: %d", st)
	}
	if a.ID != "1" || a.Title != "buy milk" || a.Done || a.CreatedAt.IsZero() {
		t.Fatalf("created %+v", a)
	}
	if st := do(t, srv, "POST", "/todos", `{"title":"walk"}`, &b); st != 201 || b.ID != "2" {
		t.Fatalf("create 2: %d %+v", st, b)
	}
	var got demo.Todo
	if st := do(t, srv, "GET", "/todos/2", "", &got); st != 200 || got.Title != "walk" {
		t.Fatalf("get: %d %+v", st, got)
	}
	if st := do(t, srv, "GET", "/todos?limit=1", "", &list); st != 200 || len(list) != 1 || list[0].ID != "1" {
		t.Fatalf("limit: %d %v", st, list)
	}
	if st := do(t, srv, "GET", "/todos?done=true", "", &list); st != 200 || len(list) != 0 {
		t.Fatalf("done=true: %d %v", st, list)
	}
	if st := do(t, srv, "GET", "/todos?done=false", "", &list); st != 200 || len(list) != 2 {
		t.Fatalf("done=false: %d %v", st, list)
	}
	if st := do(t, srv, "DELETE", "/todos/1", "", nil); st != 204 {
		t.Fatalf("delete: %d", st)
	}
	if todos := api.Todos(); len(todos) != 1 || todos[0].ID != "2" {
		t.Fatalf("Todos after delete: %v", todos)
	}
	var e map[string]string
	if st := do(t, srv, "DELETE", "/todos/1", "", &e); st != 404 || e["error"] != "not found" {
		t.Fatalf("delete again: %d %v", st, e)
	}
	if st := do(t, srv, "GET", "/todos/1", "", &e); st != 404 || e["error"] != "not found" {
		t.Fatalf("get deleted: %d %v", st, e)
	}
}

func TestValidation(t *testing.T) {
	api := demo.NewAPI()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	cases := []struct {
		name, body, want string
	}{
		{"missing title", `{}`, "title is required"},
		{"empty title", `{"title":"   "}`, "title must not be empty"},
		{"long title", `{"title":"` + strings.Repeat("é", demo.MaxTitleLen+1) + `"}`, "title is 201 characters; the limit is 200"},
		{"not JSON", `title=x`, "invalid JSON body"},
		{"wrong type", `{"title":5}`, "invalid JSON body"},
		{"unknown field", `{"title":"x","done":true}`, "unknown field"},
		{"trailing data", `{"title":"x"} {}`, "trailing data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e map[string]string
			if st := do(t, srv, "POST", "/todos", c.body, &e); st != 400 {
				t.Fatalf("status %d, want 400 (%v)", st, e)
			}
			if !strings.Contains(e["error"], c.want) {
				t.Fatalf("error %q, want it to contain %q", e["error"], c.want)
			}
		})
	}
	var ok demo.Todo
	if st := do(t, srv, "POST", "/todos", `{"title":"`+strings.Repeat("é", demo.MaxTitleLen)+`"}`, &ok); st != 201 {
		t.Fatalf("200-character title: %d", st)
	}
	var e map[string]string
	for _, q := range []string{"done=maybe", "limit=0", "limit=101", "limit=x"} {
		if st := do(t, srv, "GET", "/todos?"+q, "", &e); st != 400 {
			t.Fatalf("%s: status %d", q, st)
		}
	}
	if n := len(api.Todos()); n != 1 {
		t.Fatalf("%d todos after invalid requests, want 1", n)
	}
}

func TestConcurrentCreates(t *testing.T) {
	api := demo.NewAPI()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			// Not do: t.Fatal must not be called off the test goroutine.
			resp, err := srv.Client().Post(srv.URL+"/todos", "application/json", strings.NewReader(`{"title":"x"}`))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 201 {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	todos := api.Todos()
	seen := map[string]bool{}
	for _, td := range todos {
		seen[td.ID] = true
	}
	if len(todos) != 20 || len(seen) != 20 {
		t.Fatalf("%d todos, %d distinct ids", len(todos), len(seen))
	}
}

func TestSpec(t *testing.T) {
	spec := demo.NewAPI().Spec("http://127.0.0.1:9999")
	var doc struct {
		OpenAPI string `json:"openapi"`
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.0.3" || len(doc.Servers) != 1 || doc.Servers[0].URL != "http://127.0.0.1:9999" {
		t.Fatalf("openapi %q servers %v", doc.OpenAPI, doc.Servers)
	}
	ids := map[string]string{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				OperationID string `json:"operationId"`
			}
			if err := json.Unmarshal(raw, &op); err != nil || op.OperationID == "" {
				continue // path-level parameters
			}
			ids[op.OperationID] = strings.ToUpper(method) + " " + path
		}
	}
	want := map[string]string{
		"listTodos":  "GET /todos",
		"getTodo":    "GET /todos/{id}",
		"createTodo": "POST /todos",
		"deleteTodo": "DELETE /todos/{id}",
	}
	if len(ids) != len(want) {
		t.Fatalf("operations %v, want %v", ids, want)
	}
	for id, w := range want {
		if ids[id] != w {
			t.Fatalf("operation %s = %q, want %q", id, ids[id], w)
		}
	}
}
