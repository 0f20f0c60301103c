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
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// echoYAML is an OpenAPI 3.0 document in YAML for the echo server: it
// exercises parameter styles, body kinds, derived names and every method.
const echoYAML = `openapi: 3.0.3
info: {title: echo, version: "1"}
servers:
  - url: /api
paths:
  /items/{itemId}:
    parameters:
      - {name: itemId, in: path, required: true, schema: {type: string}}
    get:
      operationId: getItem
      summary: Get an item
      parameters:
        - {name: tags, in: query, schema: {type: array, items: {type: string}}}
        - {name: ids, in: query, explode: false, schema: {type: array, items: {type: integer}}}
        - {name: filter, in: query, style: deepObject, schema: {type: object}}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: Authorization, in: header, schema: {type: string}}
        - {name: session, in: cookie, schema: {type: string}}
      responses: {"200": {description: ok}}
    put:
      operationId: putItem
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Item"}
      responses: {"200": {description: ok}}
    patch:
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              properties:
                name: {type: string}
                n: {type: integer}
      responses: {"200": {description: ok}}
    head:
      responses: {"200": {description: ok}}
    options:
      operationId: optionsItem
      responses: {"200": {description: ok}}
  /notes:
    post:
      operationId: createNote
      summary: Create a note
      requestBody:
        content:
          application/json:
            schema:
              type: object
              required: [title]
              properties:
                title: {type: string}
                body: {type: string}
      responses: {"201": {description: ok}}
  /raw:
    post:
      operationId: postRaw
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: array, items: {type: integer}}
      responses: {"200": {description: ok}}
  /users/{id}:
    post:
      operationId: updateUser
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                id: {type: string}
                name: {type: string}
      responses: {"200": {description: ok}}
  /text:
    get:
      operationId: getText
      responses: {"200": {description: ok}}
    post:
      operationId: postText
      requestBody:
        content:
          text/plain:
            schema: {type: string}
      responses: {"200": {description: ok}}
  /binary:
    get:
      operationId: getBinary
      responses: {"200": {description: ok}}
  /big-error:
    get:
      operationId: bigError
      responses: {"500": {description: boom}}
  /collide:
    get:
      responses: {"200": {description: ok}}
  /other:
    get:
      operationId: getCollide
      responses: {"200": {description: ok}}
  /:
    get:
      responses: {"200": {description: ok}}
components:
  schemas:
    Item:
      type: object
      required: [name]
      properties:
        name: {type: string, nullable: true}
        count: {type: integer, minimum: 0, exclusiveMinimum: true}
        owner: {$ref: "#/components/schemas/User"}
    User:
      type: object
      properties:
        name: {type: string}
        friends:
          type: array
          items: {$ref: "#/components/schemas/User"}
`

// echo answers every request under /api with a JSON description of it,
// except /api/text, /api/binary and /api/big-error.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/api/text":
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte("hello, text"))
			return
		}
	case "/api/binary":
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte{0x89, 'P', 'N', 'G', 0xff, 0xfe})
		return
	case "/api/big-error":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(strings.Repeat("e", 10000)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"method":        r.Method,
		"path":          r.URL.EscapedPath(),
		"query":         r.URL.RawQuery,
		"body":          string(body),
		"contentType":   r.Header.Get("Content-Type"),
		"authorization": r.Header.Get("Authorization"),
		"trace":         r.Header.Get("X-Trace"),
		"cookie":        r.Header.Get("Cookie"),
	})
}

// newEcho serves echo under /api and echoYAML at /spec.yaml.
func newEcho(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", echo)
	mux.HandleFunc("GET /spec.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write([]byte(echoYAML))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func loadEcho(t *testing.T, srv *httptest.Server, headers http.Header) *openapi.Source {
	t.Helper()
	file := filepath.Join(t.TempDir(), "echo.yaml")
	if err := os.WriteFile(file, []byte(echoYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := openapi.Load(t.Context(), openapi.Options{
		Name: "echo", Spec: file, BaseURL: srv.URL + "/api/", Headers: headers, Client: srv.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func call(t *testing.T, src *openapi.Source, name string, args map[string]any) map[string]any {
	t.Helper()
	out, err := src.Call(t.Context(), name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m, ok := out.(map[string]any)
	if !ok {
		t.Fatalf("%s = %#v", name, out)
	}
	return m
}

func TestParameterStyles(t *testing.T) {
	srv := newEcho(t)
	src := loadEcho(t, srv, http.Header{"Authorization": {"Bearer good"}})
	got := call(t, src, "getItem", map[string]any{
		"itemId":        "a b",
		"tags":          []any{"x", "y z"},
		"ids":           []any{1.0, 2.0},
		"filter":        map[string]any{"color": "red"},
		"X-Trace":       "t1",
		"Authorization": "Bearer evil", // the configured credential wins
		"session":       "s1",
	})
	want := map[string]any{
		"method": "GET", "path": "/api/items/a%20b",
		"query":         "tags=x&tags=y+z&ids=1%2C2&filter%5Bcolor%5D=red",
		"body":          "",
		"contentType":   "",
		"authorization": "Bearer good",
		"trace":         "t1",
		"cookie":        "session=s1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("getItem sent %v\nwant %v", got, want)
	}
}

func TestBodies(t *testing.T) {
	srv := newEcho(t)
	src := loadEcho(t, srv, nil)

	got := call(t, src, "putItem", map[string]any{"itemId": "1", "name": "n", "count": 2.0})
	if got["method"] != "PUT" || got["body"] != `{"count":2,"name":"n"}` || got["contentType"] != "application/json" {
		t.Fatalf("putItem sent %v", got)
	}
	// A body property named "body" is a field, never the whole body.
	got = call(t, src, "createNote", map[string]any{"title": "t", "body": "text"})
	if got["body"] != `{"body":"text","title":"t"}` {
		t.Fatalf("createNote sent %v", got)
	}
	got = call(t, src, "createNote", map[string]any{"body": "only"})
	if got["body"] != `{"body":"only"}` {
		t.Fatalf("createNote(body) sent %v", got)
	}
	// A non-object body goes in body.
	got = call(t, src, "postRaw", map[string]any{"body": []any{1.0, 2.0}})
	if got["body"] != `[1,2]` {
		t.Fatalf("postRaw sent %v", got)
	}
	if _, err := src.Call(t.Context(), "postRaw", map[string]any{}); err == nil || !strings.Contains(err.Error(), "missing required request body") {
		t.Fatalf("postRaw() err = %v", err)
	}
	// A field that collides with a parameter: the body must be explicit.
	got = call(t, src, "updateUser", map[string]any{"id": "7", "body": map[string]any{"id": "8", "name": "x"}})
	if got["path"] != "/api/users/7" || got["body"] != `{"id":"8","name":"x"}` {
		t.Fatalf("updateUser sent %v", got)
	}
	// Form and text bodies; derived name for the PATCH without operationId.
	got = call(t, src, "patchItemsByItemId", map[string]any{"itemId": "1", "name": "a&b", "n": 3.0})
	if got["body"] != "n=3&name=a%26b" || got["contentType"] != "application/x-www-form-urlencoded" {
		t.Fatalf("patch sent %v", got)
	}
	got = call(t, src, "postText", map[string]any{"body": "plain words"})
	if got["body"] != "plain words" || got["contentType"] != "text/plain" {
		t.Fatalf("postText sent %v", got)
	}
}

func TestResponses(t *testing.T) {
	srv := newEcho(t)
	src := loadEcho(t, srv, nil)
	ctx := t.Context()
	if out, err := src.Call(ctx, "getText", nil); err != nil || out != "hello, text" {
		t.Fatalf("getText = %#v, %v", out, err)
	}
	out, err := src.Call(ctx, "getBinary", nil)
	if err != nil || !reflect.DeepEqual(out, map[string]any{"contentType": "image/png", "base64": "iVBOR//+"}) {
		t.Fatalf("getBinary = %#v, %v", out, err)
	}
	_, err = src.Call(ctx, "bigError", nil)
	var he *openapi.HTTPError
	if !errors.As(err, &he) || he.Status != 500 {
		t.Fatalf("bigError err = %v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "HTTP 500 from GET /big-error: eeee") || !strings.HasSuffix(msg, "… (truncated, 10000 bytes)") || len(msg) > 2200 {
		t.Fatalf("bigError message (%d bytes) %q…%q", len(msg), msg[:40], msg[len(msg)-40:])
	}
}

func TestMethodsAndNames(t *testing.T) {
	srv := newEcho(t)
	src := loadEcho(t, srv, nil)
	ctx := t.Context()
	want := map[string]struct {
		approval   string
		requires   bool
		idempotent bool
	}{
		"getItem":            {"GET /items/{itemId}", false, true},
		"headItemsByItemId":  {"HEAD /items/{itemId}", false, true},
		"optionsItem":        {"OPTIONS /items/{itemId}", false, true},
		"putItem":            {"PUT /items/{itemId}", true, false},
		"patchItemsByItemId": {"PATCH /items/{itemId}", true, false},
		"createNote":         {"POST /notes", true, false},
		"getCollide":         {"GET /other", false, true},   // the explicit operationId keeps its name
		"getCollide2":        {"GET /collide", false, true}, // the derived one gets a suffix
		"getRoot":            {"GET /", false, true},
	}
	for name, w := range want {
		tool, ok := src.Lookup(ctx, name)
		if !ok {
			t.Errorf("Lookup(%s) not found", name)
			continue
		}
		if tool.ApprovalText != w.approval || tool.RequiresApproval != w.requires || tool.Idempotent != w.idempotent {
			t.Errorf("%s: %q requires=%v idempotent=%v", name, tool.ApprovalText, tool.RequiresApproval, tool.Idempotent)
		}
	}
	if src.Len() != 15 {
		t.Errorf("Len = %d, want 15", src.Len())
	}
	if _, err := src.Call(ctx, "headItemsByItemId", map[string]any{"itemId": "1"}); err != nil {
		t.Fatalf("HEAD: %v", err)
	}
}

func TestInputSchemaRefs(t *testing.T) {
	srv := newEcho(t)
	src := loadEcho(t, srv, nil)
	tool, _ := src.Lookup(t.Context(), "putItem")
	var got map[string]any
	if err := json.Unmarshal(tool.InputSchema, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"itemId": map[string]any{"type": "string"},
			"name":   map[string]any{"type": []any{"string", "null"}},
			"count":  map[string]any{"type": "integer", "exclusiveMinimum": 0.0},
			"owner":  map[string]any{"$ref": "#/$defs/User"},
		},
		"required": []any{"itemId", "name"},
		"$defs": map[string]any{
			"User": map[string]any{"type": "object", "properties": map[string]any{
				"name":    map[string]any{"type": "string"},
				"friends": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/User"}},
			}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("putItem schema:\n%s", tool.InputSchema)
	}
	user, _ := src.Lookup(t.Context(), "updateUser")
	if !strings.Contains(string(user.InputSchema), `"body":{"description":"Request body (application/json).","properties":{"id"`) {
		t.Fatalf("updateUser schema %s", user.InputSchema)
	}
}

func TestYAMLFromURLRelativeServer(t *testing.T) {
	srv := newEcho(t)
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "echo", Spec: srv.URL + "/spec.yaml", Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if src.BaseURL() != srv.URL+"/api" {
		t.Fatalf("BaseURL %q", src.BaseURL())
	}
	if got := call(t, src, "getItem", map[string]any{"itemId": "9"}); got["path"] != "/api/items/9" {
		t.Fatalf("getItem sent %v", got)
	}
}

// doc31 is an OpenAPI 3.1 document using 3.1-only schema features.
const doc31 = `{
  "openapi": "3.1.0",
  "info": {"title": "t31", "version": "1", "description": "Generated by swagger-codegen, swagger: 2 style"},
  "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
  "servers": [{"url": "{base}/api", "variables": {"base": {"default": "http://placeholder"}}}],
  "paths": {
    "/things/{id}": {
      "put": {
        "operationId": "putThing",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": ["integer", "null"]}}],
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing", "description": "sibling of $ref"}}}},
        "responses": {"200": {"description": "ok"}}
      }
    }
  },
  "webhooks": {"thingChanged": {"post": {"requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}}, "responses": {"200": {"description": "ok"}}}}},
  "components": {"schemas": {"Thing": {
    "type": "object",
    "properties": {
      "kind": {"const": "thing"},
      "score": {"type": "number", "exclusiveMinimum": 0, "examples": [1.5]},
      "label": {"type": ["string", "null"]}
    }
  }}}
}`

func TestOpenAPI31(t *testing.T) {
	srv := newEcho(t)
	file := filepath.Join(t.TempDir(), "t31.json")
	if err := os.WriteFile(file, []byte(doc31), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "t31", Spec: file, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if src.Version() != "3.1.0" || src.Len() != 1 || src.BaseURL() != "http://placeholder/api" {
		t.Fatalf("Version %q Len %d BaseURL %q (webhooks are not tools)", src.Version(), src.Len(), src.BaseURL())
	}
	tool, _ := src.Lookup(t.Context(), "putThing")
	var got map[string]any
	if err := json.Unmarshal(tool.InputSchema, &got); err != nil {
		t.Fatal(err)
	}
	props := got["properties"].(map[string]any)
	if !reflect.DeepEqual(props["id"], map[string]any{"type": []any{"integer", "null"}}) ||
		!reflect.DeepEqual(props["kind"], map[string]any{"const": "thing"}) ||
		!reflect.DeepEqual(props["score"], map[string]any{"type": "number", "exclusiveMinimum": 0.0, "examples": []any{1.5}}) ||
		!reflect.DeepEqual(props["label"], map[string]any{"type": []any{"string", "null"}}) {
		t.Fatalf("3.1 schema %s", tool.InputSchema)
	}

	// Calls work the same (with BaseURL pointing at the echo server).
	src, err = openapi.Load(t.Context(), openapi.Options{Name: "t31", Spec: file, BaseURL: srv.URL + "/api", Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	out := call(t, src, "putThing", map[string]any{"id": 5.0, "kind": "thing", "label": nil})
	if out["path"] != "/api/things/5" || out["body"] != `{"kind":"thing","label":null}` {
		t.Fatalf("putThing sent %v", out)
	}
}

func TestUnknownToolIsSentinel(t *testing.T) {
	srv := newEcho(t)
	src := loadEcho(t, srv, nil)
	_, err := src.Call(t.Context(), "getitem", nil) // names are case-sensitive
	if !errors.Is(err, tools.ErrUnknownTool) || !strings.Contains(err.Error(), "echo.getitem") {
		t.Fatalf("err = %v", err)
	}
}

func TestExternalRefsInFiles(t *testing.T) {
	srv := newEcho(t)
	dir := t.TempDir()
	main := `{"openapi": "3.0.3", "info": {"title": "multi", "version": "1"}, "servers": [{"url": "` + srv.URL + `/api"}],
  "paths": {"/things": {"post": {"operationId": "addThing",
    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "schemas/thing.json#/Thing"}}}},
    "responses": {"200": {"description": "ok"}}}}}}`
	thing := `{"Thing": {"type": "object", "required": ["label"], "properties": {"label": {"type": "string"}, "part": {"$ref": "#/Part"}}},
  "Part": {"type": "object", "properties": {"n": {"type": "integer"}}}}`
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"main.json": main, "schemas/thing.json": thing} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "multi", Spec: filepath.Join(dir, "main.json"), Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := src.Lookup(t.Context(), "addThing")
	var got map[string]any
	if err := json.Unmarshal(tool.InputSchema, &got); err != nil {
		t.Fatal(err)
	}
	props := got["properties"].(map[string]any)
	if props["label"] == nil || got["required"] == nil {
		t.Fatalf("external body schema not resolved: %s", tool.InputSchema)
	}
	// The external file's Part is named relative to the document's directory.
	if props["part"].(map[string]any)["$ref"] != "#/$defs/schemas_thing_Part" || got["$defs"].(map[string]any)["schemas_thing_Part"] == nil {
		t.Fatalf("external nested schema: %s", tool.InputSchema)
	}
	if out := call(t, src, "addThing", map[string]any{"label": "x"}); out["body"] != `{"label":"x"}` {
		t.Fatalf("addThing sent %v", out)
	}
}
