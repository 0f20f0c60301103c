package demo_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// Serve the API over real HTTP and load its document as an openapi tool
// source: the arguments of createTodo are the request body.
func Example() {
	api := demo.NewAPI()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	ctx := context.Background()
	src, err := openapi.Load(ctx, openapi.Options{Name: "demo", Document: api.Spec(srv.URL)})
	if err != nil {
		panic(err)
	}
	out, err := src.Call(ctx, "createTodo", map[string]any{"title": "  buy milk "})
	if err != nil {
		panic(err)
	}
	todo := out.(map[string]any)
	fmt.Println(todo["id"], todo["title"], todo["done"])

	_, err = src.Call(ctx, "getTodo", map[string]any{"id": "42"})
	fmt.Println(err)
	fmt.Println(len(api.Todos()), "to-do")
	// Output:
	// 1 buy milk false
	// HTTP 404 from GET /todos/{id}: {"error":"not found"}
	// 1 to-do
}
