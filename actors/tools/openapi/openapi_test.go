package openapi_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// recorded is what the recording middleware saw of one request.
type recorded struct {
	Method, EscapedPath, RawQuery, Body string
	Header                              http.Header
}

// recorder wraps a handler and keeps the requests it served.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []recorded
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(body), r.Header.Clone()})
	rc.mu.Unlock()
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	rc.next.ServeHTTP(w, r)
}

func (rc *recorder) last(t *testing.T) recorded {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) == 0 {
		t.Fatal("no request recorded")
	}
	return rc.reqs[len(rc.reqs)-1]
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// demoServer serves the demo API at / and its document at /openapi.json.
type demoServer struct {
	api  *demo.API
	srv  *httptest.Server
	rec  *recorder
	file string // the document, written to a temp file
}

func newDemoServer(t *testing.T) *demoServer {
	t.Helper()
	d := &demoServer{api: demo.NewAPI()}
	d.rec = &recorder{next: d.api.Handler()}
	mux := http.NewServeMux()
	mux.Handle("/", d.rec)
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Spec-Token") != "spec-secret" {
			http.Error(w, "no spec for you", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(d.api.Spec(d.srv.URL))
	})
	d.srv = httptest.NewServer(mux)
	t.Cleanup(d.srv.Close)
	d.file = filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(d.file, d.api.Spec(d.srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *demoServer) load(t *testing.T, opts openapi.Options) *openapi.Source {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "demo"
	}
	if opts.Spec == "" {
		opts.Spec = d.file
	}
	if opts.Client == nil {
		opts.Client = d.srv.Client()
	}
	src, err := openapi.Load(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestDemoCalls(t *testing.T) {
	d := newDemoServer(t)
	src := d.load(t, openapi.Options{Headers: http.Header{"Authorization": {"Bearer api-secret"}}})
	ctx := t.Context()

	out, err := src.Call(ctx, "createTodo", map[string]any{"title": "buy milk"})
	if err != nil {
		t.Fatal(err)
	}
	todo, ok := out.(map[string]any)
	if !ok || todo["title"] != "buy milk" || todo["id"] != "1" || todo["done"] != false {
		t.Fatalf("createTodo = %#v", out)
	}
	r := d.rec.last(t)
	if r.Method != "POST" || r.EscapedPath != "/todos" || r.Body != `{"title":"buy milk"}` {
		t.Fatalf("createTodo sent %+v", r)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Fatalf("Content-Type %q", got)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer api-secret" {
		t.Fatalf("Authorization %q", got)
	}

	// An explicit body key is the whole body.
	if _, err := src.Call(ctx, "createTodo", map[string]any{"body": map[string]any{"title": "walk"}}); err != nil {
		t.Fatal(err)
	}
	if r := d.rec.last(t); r.Body != `{"title":"walk"}` {
		t.Fatalf("explicit body sent %q", r.Body)
	}

	out, err = src.Call(ctx, "listTodos", map[string]any{"done": false, "limit": float64(1)})
	if err != nil {
		t.Fatal(err)
	}
	if list, ok := out.([]any); !ok || len(list) != 1 || list[0].(map[string]any)["title"] != "buy milk" {
		t.Fatalf("listTodos = %#v", out)
	}
	if r := d.rec.last(t); r.RawQuery != "done=false&limit=1" || r.Body != "" {
		t.Fatalf("listTodos sent %+v", r)
	}

	out, err = src.Call(ctx, "getTodo", map[string]any{"id": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if out.(map[string]any)["title"] != "walk" {
		t.Fatalf("getTodo = %#v", out)
	}

	out, err = src.Call(ctx, "deleteTodo", map[string]any{"id": "1"})
	if err != nil || out != nil {
		t.Fatalf("deleteTodo = %#v, %v", out, err)
	}
	if r := d.rec.last(t); r.Method != "DELETE" || r.EscapedPath != "/todos/1" {
		t.Fatalf("deleteTodo sent %+v", r)
	}
	if todos := d.api.Todos(); len(todos) != 1 || todos[0].Title != "walk" {
		t.Fatalf("Todos = %v", todos)
	}

	// Path parameters are escaped.
	_, err = src.Call(ctx, "getTodo", map[string]any{"id": "a/b c?d"})
	if r := d.rec.last(t); r.EscapedPath != "/todos/a%2Fb%20c%3Fd" {
		t.Fatalf("escaped path %q", r.EscapedPath)
	}
	var he *openapi.HTTPError
	if !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("getTodo(escaped) err = %v", err)
	}
}

func TestDemoErrors(t *testing.T) {
	d := newDemoServer(t)
	src := d.load(t, openapi.Options{})
	ctx := t.Context()

	_, err := src.Call(ctx, "getTodo", map[string]any{"id": "404"})
	if err == nil || err.Error() != `HTTP 404 from GET /todos/{id}: {"error":"not found"}` {
		t.Fatalf("getTodo(missing) err = %v", err)
	}
	_, err = src.Call(ctx, "deleteTodo", map[string]any{"id": "404"})
	var he *openapi.HTTPError
	if !errors.As(err, &he) || he.Status != 404 || he.Method != "DELETE" || he.Path != "/todos/{id}" {
		t.Fatalf("deleteTodo(missing) err = %#v", err)
	}
	_, err = src.Call(ctx, "createTodo", map[string]any{"title": strings.Repeat("x", 201)})
	if err == nil || !strings.HasPrefix(err.Error(), "HTTP 400 from POST /todos: ") || !strings.Contains(err.Error(), "the limit is 200") {
		t.Fatalf("createTodo(long) err = %v", err)
	}

	n := d.rec.count()
	argErrs := map[string]struct {
		tool string
		args map[string]any
		want string
	}{
		"missing path param": {"getTodo", map[string]any{}, `demo.getTodo: missing required path parameter "id"`},
		"unknown query arg":  {"listTodos", map[string]any{"bogus": 1.0}, "demo.listTodos: unknown argument(s) bogus (parameters: done, limit)"},
		"body and fields":    {"createTodo", map[string]any{"body": map[string]any{}, "title": "x"}, "pass either body or the body's fields, not both (got body and title)"},
		"object in path":     {"getTodo", map[string]any{"id": []any{map[string]any{}}}, `parameter "id": want a scalar, got an object`},
	}
	for name, c := range argErrs {
		_, err := src.Call(ctx, c.tool, c.args)
		var ae *openapi.ArgumentError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
	if d.rec.count() != n {
		t.Fatalf("argument errors sent %d requests", d.rec.count()-n)
	}

	_, err = src.Call(ctx, "nope", nil)
	if !errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("unknown op err = %v", err)
	}
	if _, ok := src.Lookup(ctx, "nope"); ok {
		t.Fatal("Lookup(nope) found")
	}

	// A server that is gone: the error names the operation, not the URL.
	d.srv.Close()
	_, err = src.Call(ctx, "listTodos", map[string]any{"limit": 5.0})
	if err == nil || !strings.HasPrefix(err.Error(), "GET /todos: request failed: ") || strings.Contains(err.Error(), "limit=5") {
		t.Fatalf("closed server err = %v", err)
	}
}

func TestLoadFromURL(t *testing.T) {
	d := newDemoServer(t)
	_, err := openapi.Load(t.Context(), openapi.Options{Name: "demo", Spec: d.srv.URL + "/openapi.json", Client: d.srv.Client()})
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("without SpecHeaders: %v", err)
	}
	src := d.load(t, openapi.Options{
		Spec:        d.srv.URL + "/openapi.json",
		SpecHeaders: http.Header{"X-Spec-Token": {"spec-secret"}},
	})
	if src.Len() != 4 || src.BaseURL() != d.srv.URL || src.Version() != "3.0.3" {
		t.Fatalf("Len %d BaseURL %q Version %q", src.Len(), src.BaseURL(), src.Version())
	}
	if _, err := src.Call(t.Context(), "createTodo", map[string]any{"title": "from url"}); err != nil {
		t.Fatal(err)
	}
	if r := d.rec.last(t); r.Header.Get("X-Spec-Token") != "" {
		t.Fatal("SpecHeaders sent with an API request")
	}
}

func TestToolMetadata(t *testing.T) {
	d := newDemoServer(t)
	src := d.load(t, openapi.Options{})
	want := map[string]tools.Tool{
		"listTodos":  {Path: "demo.listTodos", ApprovalText: "GET /todos", Idempotent: true},
		"getTodo":    {Path: "demo.getTodo", ApprovalText: "GET /todos/{id}", Idempotent: true},
		"createTodo": {Path: "demo.createTodo", ApprovalText: "POST /todos", RequiresApproval: true},
		"deleteTodo": {Path: "demo.deleteTodo", ApprovalText: "DELETE /todos/{id}", RequiresApproval: true},
	}
	for name, w := range want {
		got, ok := src.Lookup(t.Context(), name)
		if !ok {
			t.Fatalf("Lookup(%s) not found", name)
		}
		if got.Path != w.Path || got.Source != "demo" || got.Name != name || got.ApprovalText != w.ApprovalText ||
			got.RequiresApproval != w.RequiresApproval || got.Idempotent != w.Idempotent {
			t.Errorf("%s = %+v, want %+v", name, got, w)
		}
	}
	create, _ := src.Lookup(t.Context(), "createTodo")
	if create.Description != "Create a to-do\n\nAdds a to-do that is not done yet and returns it." {
		t.Errorf("createTodo description %q", create.Description)
	}
	var schema map[string]any
	if err := json.Unmarshal(create.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	wantSchema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"title": map[string]any{"type": "string", "minLength": 1.0, "maxLength": 200.0, "description": "What to do."},
		},
		"required": []any{"title"},
	}
	if !reflect.DeepEqual(schema, wantSchema) {
		t.Errorf("createTodo schema %s", create.InputSchema)
	}
	get, _ := src.Lookup(t.Context(), "getTodo")
	if string(get.InputSchema) != `{"properties":{"id":{"description":"The to-do's id.","type":"string"}},"required":["id"],"type":"object"}` {
		t.Errorf("getTodo schema %s", get.InputSchema)
	}
}

func TestSearch(t *testing.T) {
	d := newDemoServer(t)
	src := d.load(t, openapi.Options{})
	ctx := t.Context()
	names := func(ts []tools.Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	cases := []struct {
		query string
		limit int
		want  []string
	}{
		{"delete todo", 0, []string{"deleteTodo", "createTodo", "getTodo", "listTodos"}},
		{"createTodo", 1, []string{"createTodo"}},
		{"list", 10, []string{"listTodos"}},
		{"todos", 2, []string{"listTodos", "createTodo"}}, // name match, then ties by path
		{"not done yet", 10, []string{"createTodo", "listTodos"}},
		{"zebra", 10, nil},
		{"", 3, []string{"listTodos", "createTodo", "deleteTodo"}}, // path, then method order
	}
	for _, c := range cases {
		if got := names(src.Search(ctx, c.query, c.limit)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Search(%q, %d) = %v, want %v", c.query, c.limit, got, c.want)
		}
	}
	hits := src.SearchScored(ctx, "delete todo", 2)
	if len(hits) != 2 || hits[0].Score <= hits[1].Score {
		t.Fatalf("SearchScored = %+v", hits)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]struct {
		opts openapi.Options
		want string
	}{
		"bad name":     {openapi.Options{Name: "1x", Spec: "x"}, "invalid source name"},
		"no spec":      {openapi.Options{Name: "x"}, "Spec is required"},
		"missing file": {openapi.Options{Name: "x", Spec: filepath.Join(dir, "none.json")}, "no such file"},
		"swagger 2": {openapi.Options{Name: "x", Spec: write("s2.json", `{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{}}`)},
			"Swagger 2.0 documents are not supported"},
		"swagger 2 yaml": {openapi.Options{Name: "x", Spec: write("s2.yaml", "# api\nswagger: '2.0'\ninfo: {title: t, version: '1'}\npaths: {}\n")},
			"Swagger 2.0 documents are not supported"},
		"openapi 4": {openapi.Options{Name: "x", Spec: write("o4.yaml", "openapi: 4.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n")},
			`OpenAPI version "4.0.0" is not supported`},
		"garbage": {openapi.Options{Name: "x", Spec: write("g.yaml", "::: not yaml [")}, "g.yaml"},
		"no servers": {openapi.Options{Name: "x", Spec: write("ns.yaml", "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n")},
			"no servers; set Options.BaseURL"},
		"relative server": {openapi.Options{Name: "x", Spec: write("rs.yaml", "openapi: 3.0.0\ninfo: {title: t, version: '1'}\nservers: [{url: /api}]\npaths: {}\n")},
			"is relative and the document is a file"},
		"bad base": {openapi.Options{Name: "x", Spec: write("bb.yaml", "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n"), BaseURL: "ftp://x"},
			"not an absolute http(s) URL"},
	}
	for name, c := range cases {
		_, err := openapi.Load(t.Context(), c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

func TestLoadDocumentInMemory(t *testing.T) {
	d := newDemoServer(t)
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "demo", Document: d.api.Spec(d.srv.URL), Client: d.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 4 || src.BaseURL() != d.srv.URL {
		t.Fatalf("Len %d BaseURL %q", src.Len(), src.BaseURL())
	}
	if _, err := src.Call(t.Context(), "createTodo", map[string]any{"title": "in memory"}); err != nil {
		t.Fatal(err)
	}
	if got := d.api.Todos(); len(got) != 1 || got[0].Title != "in memory" {
		t.Fatalf("todos %+v", got)
	}

	// External references are refused for in-memory documents.
	ext := []byte(`{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"operationId":"a","responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"other.json#/X"}}}}}}}}}`)
	if _, err := openapi.Load(t.Context(), openapi.Options{Name: "x", Document: ext}); err == nil {
		t.Fatal("external $ref in an in-memory document loaded")
	}
	if _, err := openapi.Load(t.Context(), openapi.Options{Name: "x"}); err == nil || !strings.Contains(err.Error(), "Spec is required") {
		t.Fatalf("no Spec nor Document: %v", err)
	}
}
