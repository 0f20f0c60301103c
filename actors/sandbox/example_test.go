package sandbox_test

import (
	"context"
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
