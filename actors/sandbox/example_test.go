package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/sandbox"
)

func ExampleRun() {
	host := sandbox.HostFunc(func(ctx context.Context, path string, args any) (any, error) {
		switch path {
		case "demo.createTodo":
			title := args.(map[string]any)["title"]
			return map[string]any{"id": 7, "title": title}, nil
		default:
			return nil, fmt.Errorf("unknown tool %s", path)
		}
	})
	code := `
		const todo = await tools.demo.createTodo({title: "write docs"});
		console.log("created", todo.id);
		emit({created: todo.title});
		return todo.id;`
	res, err := sandbox.Run(context.Background(), code, host, sandbox.Limits{WallTime: 5 * time.Second})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Value, res.Emitted, res.Logs, res.ToolCalls)
	// Output: 7 [map[created:write docs]] [created 7] 1
}

func ExampleRun_error() {
	_, err := sandbox.Run(context.Background(), "const x = 1;\nreturn x.y.z;", nil, sandbox.Limits{})
	if se, ok := err.(*sandbox.Error); ok {
		fmt.Println(se.Kind)
		fmt.Println(se.Message)
	}
	// Output:
	// runtime
	// TypeError: Cannot read property 'z' of undefined
	//     at code.ts:2:11
}

// A Host error rejects the Promise of the tool call: code may catch it, and
// uncaught it fails the execution with an *Error of Kind "runtime" that still
// carries what was logged and emitted. Show its Message to the user as an
// isError result; any other error is a cancellation or an internal failure.
func ExampleHostFunc() {
	host := sandbox.HostFunc(func(ctx context.Context, path string, args any) (any, error) {
		return nil, fmt.Errorf("unknown tool %s", path)
	})
	code := `
		try {
			await tools.demo.createTodo({title: "x"});
		} catch (e) {
			console.log("caught:", e.message);
		}
		emit("retrying");
		await tools.demo.createTodo({title: "x"});`
	_, err := sandbox.Run(context.Background(), code, host, sandbox.Limits{WallTime: 5 * time.Second})
	var se *sandbox.Error
	switch {
	case errors.As(err, &se):
		fmt.Println(se.Kind, se.Result.ToolCalls, se.Result.Logs, se.Result.Emitted)
		fmt.Println(se.Message)
	case err != nil:
		fmt.Println("cancelled or internal failure:", err)
	}
	// Output:
	// runtime 2 [caught: unknown tool demo.createTodo] [retrying]
	// unknown tool demo.createTodo
	//     at code.ts:8:30
}
