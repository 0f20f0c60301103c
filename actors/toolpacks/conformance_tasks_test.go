package toolpacks_test

import (
	"context"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tasks"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// The tasks fixtures answer in their request (the extension makes tasks of
// them elsewhere): each round as its scenario needs it.
func TestConformanceTaskToolsAnswerEachRound(t *testing.T) {
	cs := manual(t, newServer(t, "conformance"), allInputCaps)
	call := func(name string, args map[string]any, responses mcp.InputResponseMap, state string) *mcp.CallToolResult {
		return callTool(t, cs, &mcp.CallToolParams{Name: name, Arguments: args, InputResponses: responses, RequestState: state})
	}
	wantText(t, call("greet", map[string]any{"name": "World"}, nil, ""), "Hello, World!")
	wantText(t, call("slow_compute", map[string]any{"seconds": 0, "label": "now"}, nil, ""), `slow_compute "now": done after 0s`)

	if k := keys(t, call("confirm_delete", map[string]any{"filename": "a.txt"}, nil, "")); !slices.Equal(k, []string{"confirm_delete"}) {
		t.Errorf("confirm_delete asks %q", k)
	}
	wantText(t, call("confirm_delete", map[string]any{"filename": "a.txt"}, mcp.InputResponseMap{"confirm_delete": accept(map[string]any{"confirm": true})}, ""), "Deleted a.txt")

	// Two questions at once; a partial answer is asked only for the other.
	if k := keys(t, call("multi_input", nil, nil, "")); !slices.Equal(k, []string{"confirm", "name"}) {
		t.Errorf("multi_input asks %q", k)
	}
	partial := mcp.InputResponseMap{"name": accept(map[string]any{"name": "p1", "confirm": true})}
	if k := keys(t, call("multi_input", nil, partial, "")); !slices.Equal(k, []string{"confirm"}) {
		t.Errorf("multi_input after one answer asks %q", k)
	}
	partial["confirm"] = accept(map[string]any{"name": "p2", "confirm": true})
	wantText(t, call("multi_input", nil, partial, ""), `multi_input: name="p1", confirmed=true`)

	// test_tool_with_task: the name first (with its state), then the work.
	first := call("test_tool_with_task", nil, nil, "")
	if k := keys(t, first); !slices.Equal(k, []string{"user_name"}) || first.RequestState == "" {
		t.Fatalf("test_tool_with_task round 1: keys %q state %q", k, first.RequestState)
	}
	wantText(t, call("test_tool_with_task", nil, mcp.InputResponseMap{"user_name": accept(map[string]any{"name": "Alice"})}, first.RequestState), "Hello, Alice! Your task is done.")

	if res := call("failing_job", nil, nil, ""); !res.IsError {
		t.Errorf("failing_job: want a tool error, got %+v", res)
	}
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "protocol_error_job"})
	if e := rpcError(t, err); e.Code != jsonrpc.CodeInternalError {
		t.Errorf("protocol_error_job: %v, want a -32603 error", e)
	}
}

func TestConformanceTaskSupportNamesTheScenariosTools(t *testing.T) {
	for tool, want := range map[string]tasks.Support{
		"greet":               {},
		"execute":             {Mode: tasks.Optional},
		"resume":              {},
		"test_simple_text":    {},
		"slow_compute":        {Mode: tasks.Optional},
		"failing_job":         {Mode: tasks.Required},
		"protocol_error_job":  {Mode: tasks.Optional},
		"confirm_delete":      {Mode: tasks.Optional},
		"multi_input":         {Mode: tasks.Optional},
		"test_tool_with_task": {Mode: tasks.Required, AfterInput: true},
	} {
		if got := toolpacks.TaskSupport(tool); got != want {
			t.Errorf("TaskSupport(%s) = %+v, want %+v", tool, got, want)
		}
	}
}
