package engine_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// An execution that creates a to-do pauses before the POST (the openapi
// source's default for writes); an approver of the same organization
// accepts, and the call goes through.
func ExampleEngine_ExecuteWithPause() {
	api := demo.NewAPI()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	ctx := context.Background()
	src, err := openapi.Load(ctx, openapi.Options{Name: "demo", Document: api.Spec(srv.URL)})
	if err != nil {
		panic(err)
	}
	registry, err := tools.NewRegistry(src)
	if err != nil {
		panic(err)
	}

	e := engine.New(engine.Config{Tools: registry, Limits: sandbox.Limits{WallTime: 10 * time.Second}})
	defer e.Shutdown()
	alice := engine.Principal{User: "alice", Org: "acme", Role: "member"}
	out := e.ExecuteWithPause(ctx, `
		const todo = await tools.demo.createTodo({title: "x"});
		return todo.title;`, alice)
	if out.Status == engine.StatusPaused {
		fmt.Println(out.Status, out.Pause.Address, out.Pause.ApprovalText, len(api.Todos()))
		bob := engine.Principal{User: "bob", Org: "acme", Role: "admin"}
		out, _ = e.Resume(ctx, out.Pause.ID, engine.AsApprover(bob), engine.Response{Action: engine.Accept})
	}
	fmt.Println(out.Status, out.Result.Value, len(api.Todos()))
	// Output:
	// paused demo.createTodo POST /todos 0
	// completed x 1
}
