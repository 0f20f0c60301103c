package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tasks extension's fixtures (io.modelcontextprotocol/tasks, SEP-2663;
// scenarios tasks-*). Each tool answers in its request like any tool: the
// extension (actors/tasks) decides which call becomes a task, from the
// tool's entry in the node's task support table (toolpacks.TaskSupport), and runs it on a task grain. A tool that
// needs input asks for it the 2026-07-28 way (inputRequests and a
// requestState); as a task, that shows as the task's input_required, and
// tasks/update brings the answers to the tool's next round.

type greetInput struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type slowInput struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to work, in seconds (0: at once)"`
	Label   string  `json:"label,omitempty" jsonschema:"a label echoed in the result"`
}

type deleteInput struct {
	Filename string `json:"filename" jsonschema:"the file to delete"`
}

// maxSlowCompute bounds slow_compute's work.
const maxSlowCompute = 10 * time.Minute

func (f *conformanceFixture) addTaskTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "tasks-*: a sync-only tool; answers Hello, {name}!"},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: text(fmt.Sprintf("Hello, %s!", in.Name))}, nil, nil
		})
	// Read-only: a task whose node was lost runs it again (actors/tasks).
	mcp.AddTool(s, &mcp.Tool{Name: "slow_compute", Description: "tasks-*: works {seconds} seconds, then answers (task support: optional).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}}, slowCompute)
	mcp.AddTool(s, &mcp.Tool{Name: "failing_job", Description: "tasks-*: fails with a tool error after about a second (task support: required)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
			if err := pause(ctx, time.Second); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{IsError: true, Content: text("failing_job: the job failed (as it always does)")}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "protocol_error_job", Description: "tasks-*: fails with a protocol error (task support: optional)."},
		func(context.Context, *mcp.CallToolRequest, noInput) (*mcp.CallToolResult, any, error) {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "protocol_error_job: internal failure (as it always does)"}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "confirm_delete", Description: "tasks-*: asks to confirm, then deletes {filename} (task support: optional)."}, confirmDelete)
	mcp.AddTool(s, &mcp.Tool{Name: "multi_input", Description: "tasks-*: asks two questions at once, then answers (task support: optional)."}, multiInput)
	mcp.AddTool(s, &mcp.Tool{Name: "test_tool_with_task", Description: "tasks-mrtr-composition: asks the user's name, then works as a task (task support: required)."}, toolWithTask)
}

func slowCompute(ctx context.Context, _ *mcp.CallToolRequest, in slowInput) (*mcp.CallToolResult, any, error) {
	d := time.Duration(in.Seconds * float64(time.Second))
	if d < 0 || d > maxSlowCompute {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("slow_compute: seconds must be within 0..%v", maxSlowCompute.Seconds())}
	}
	if err := pause(ctx, d); err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("slow_compute %q: done after %gs", in.Label, in.Seconds))}, nil, nil
}

// Input request keys of the tasks fixtures.
const (
	keyDelete = "confirm_delete"
	keyName   = "name"
)

func confirmDelete(_ context.Context, req *mcp.CallToolRequest, in deleteInput) (*mcp.CallToolResult, any, error) {
	answer, ok := elicitAnswer(req.Params.InputResponses, keyDelete)
	if !ok {
		return needInput(mcp.InputRequestMap{keyDelete: confirmForm(fmt.Sprintf("Delete %s?", in.Filename))}, ""), nil, nil
	}
	if confirmed, _ := answer.Content["confirm"].(bool); answer.Action == "accept" && confirmed {
		return &mcp.CallToolResult{Content: text(fmt.Sprintf("Deleted %s", in.Filename))}, nil, nil
	}
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("Kept %s (%s)", in.Filename, answer.Action))}, nil, nil
}

// confirmForm asks for a boolean confirm.
func confirmForm(message string) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message, RequestedSchema: []byte(`{"type":"object","properties":{"confirm":{"type":"boolean"}},"required":["confirm"]}`)}
}

func multiInput(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	name, okName := acceptedString(req.Params.InputResponses, keyName, "name")
	confirm, okConfirm := elicitAnswer(req.Params.InputResponses, keyConfirm)
	missing := mcp.InputRequestMap{}
	if !okName {
		missing[keyName] = nameForm(questionName, "name")
	}
	if !okConfirm {
		missing[keyConfirm] = confirmForm("Proceed?")
	}
	if len(missing) > 0 {
		return needInput(missing, ""), nil, nil
	}
	confirmed, _ := confirm.Content["confirm"].(bool)
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("multi_input: name=%q, confirmed=%t", name, confirmed))}, nil, nil
}

func toolWithTask(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	const tool = "test_tool_with_task"
	name, answered := acceptedString(req.Params.InputResponses, keyUserName, "name")
	if !answered {
		return needInput(mcp.InputRequestMap{keyUserName: nameForm(questionName, "name")}, roundState{Tool: tool, Round: 1}.encode()), nil, nil
	}
	if _, err := decodeState(tool, req.Params.RequestState, 1); err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("Hello, %s! Your task is done.", name))}, nil, nil
}
