package tools_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// A registry of one OpenAPI source, the demo to-do API, resolving the
// dotted paths that code-mode executions call.
func ExampleRegistry() {
	api := demo.NewAPI()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	ctx := context.Background()
	src, err := openapi.Load(ctx, openapi.Options{Name: "demo", Document: api.Spec(srv.URL)})
	if err != nil {
		panic(err)
	}
	reg, err := tools.NewRegistry(src)
	if err != nil {
		panic(err)
	}

	for _, path := range []string{"demo.listTodos", "demo.createTodo"} {
		tool, _ := reg.Lookup(ctx, path)
		fmt.Printf("%s: approval %t %q\n", tool.Path, tool.RequiresApproval, tool.ApprovalText)
	}
	out, err := reg.Call(ctx, "demo.createTodo", map[string]any{"title": "x"})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.(map[string]any)["title"])

	_, err = reg.Call(ctx, "github.createIssue", nil)
	fmt.Println(errors.Is(err, tools.ErrUnknownTool), err)
	// Output:
	// demo.listTodos: approval false "GET /todos"
	// demo.createTodo: approval true "POST /todos"
	// x
	// true unknown tool: "github.createIssue": no source "github" (sources: demo)
}
