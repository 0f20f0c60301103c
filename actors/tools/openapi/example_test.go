package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// Load a document from a URL and call its operations over HTTP. The demo
// to-do API stands in for a real one; it only answers requests that carry
// the token, which Headers adds to every API request (not to the fetch of
// the document).
func ExampleLoad() {
	const token = "s3cret"
	api := demo.NewAPI()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(api.Spec(srv.URL))
	})
	mux.Handle("/", requireToken(token, api.Handler()))

	ctx := context.Background()
	src, err := openapi.Load(ctx, openapi.Options{
		Name:    "demo",
		Spec:    srv.URL + "/openapi.json",
		Headers: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		panic(err)
	}

	tool, _ := src.Lookup(ctx, "createTodo")
	fmt.Println(tool.Path, tool.RequiresApproval, tool.ApprovalText)
	if _, err := src.Call(ctx, "createTodo", map[string]any{"title": "x"}); err != nil {
		panic(err)
	}
	out, err := src.Call(ctx, "getTodo", map[string]any{"id": "1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.(map[string]any)["title"])

	_, err = src.Call(ctx, "getTodo", map[string]any{"id": "2"})
	fmt.Println(err)
	// Output:
	// demo.createTodo true POST /todos
	// x
	// HTTP 404 from GET /todos/{id}: {"error":"not found"}
}

// requireToken refuses requests without the bearer token.
func requireToken(token string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
