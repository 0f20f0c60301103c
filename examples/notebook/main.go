// Command notebook is an MCP server whose notebooks live behind
// server-minted handles: new_notebook mints one (mcpgrain.NewHandle) and
// returns it, and add_note, list_notes and drop_notebook take it as an
// argument (mcpgrain.OnHandle). It needs no session, so it works the same
// in the sessionless 2026-07-28 protocol era as in a stateful session:
// the notes are saved in the handle's grain, on whichever node owns it,
// before each result is sent, and survive the loss of that node. remind
// schedules a reminder on a notebook (mcpgrain.ScheduleAt on the handle):
// it adds a note when due, even if the node that owned the notebook died.
// publish_notebook asks a human to approve publishing a notebook
// (mcpgrain.Ask on a handle-bound context: the question belongs to the
// tool call, a session's or a 2026-07-28 request's) and then records the
// publication as a note in a journaled step (mcpgrain.Step), once.
// Run it as a node:
//
//	go run ./examples/notebook dev --no-auth
//
// or as a cluster with `notebook node` (Consul + Postgres; docs/sdk.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// notes is each notebook's notes, oldest first (at most 16 KiB of JSON).
var notes = mcpgrain.NewState[[]string]("notebook", mcpgrain.StateOptions[[]string]{MaxBytes: 16 << 10})

// Notebook names a notebook: the handle new_notebook returned.
type Notebook struct {
	Notebook string `json:"notebook" jsonschema:"the notebook, as new_notebook returned it"`
}

// AddArgs are add_note's arguments.
type AddArgs struct {
	Notebook string `json:"notebook" jsonschema:"the notebook, as new_notebook returned it"`
	Text     string `json:"text" jsonschema:"the note"`
}

// RemindArgs are remind's arguments.
type RemindArgs struct {
	Notebook string `json:"notebook" jsonschema:"the notebook, as new_notebook returned it"`
	Text     string `json:"text" jsonschema:"the reminder's note"`
	After    string `json:"after" jsonschema:"when, from now: a Go duration such as 10s or 1h"`
}

// Notes is the result of the notes tools: the notebook's notes.
type Notes struct {
	Notes []string `json:"notes"`
}

// newNotebook mints a handle for a new, empty notebook.
func newNotebook(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Notebook, error) {
	h, err := mcpgrain.NewHandle(ctx)
	if err != nil {
		return toolError(err), Notebook{}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: h}}}, Notebook{Notebook: h}, nil
}

// addNote appends a note to a notebook.
func addNote(ctx context.Context, _ *mcp.CallToolRequest, args AddArgs) (*mcp.CallToolResult, Notes, error) {
	ctx, err := mcpgrain.OnHandle(ctx, args.Notebook)
	if err != nil {
		return toolError(err), Notes{}, nil
	}
	all, err := notes.Update(ctx, func(n *[]string) error {
		*n = append(*n, args.Text)
		return nil
	})
	return result(all, err)
}

// listNotes returns a notebook's notes.
func listNotes(ctx context.Context, _ *mcp.CallToolRequest, args Notebook) (*mcp.CallToolResult, Notes, error) {
	ctx, err := mcpgrain.OnHandle(ctx, args.Notebook)
	if err != nil {
		return toolError(err), Notes{}, nil
	}
	return result(notes.Get(ctx))
}

// dropNotebook deletes a notebook.
func dropNotebook(ctx context.Context, _ *mcp.CallToolRequest, args Notebook) (*mcp.CallToolResult, Notes, error) {
	if err := mcpgrain.DropHandle(ctx, args.Notebook); err != nil {
		return toolError(err), Notes{}, nil
	}
	return result(nil, nil)
}

// publishNotebook asks for approval to publish a notebook and, once a
// human accepted, adds the note "published, approved by USER" in a step:
// a retry of the call (the 2026-07-28 era's, or one after a node loss)
// finds the step journaled and does not add it again. A decline adds
// nothing.
func publishNotebook(ctx context.Context, req *mcp.CallToolRequest, args Notebook) (*mcp.CallToolResult, Notes, error) {
	ctx, err := mcpgrain.OnHandle(ctx, args.Notebook)
	if err != nil {
		return toolError(err), Notes{}, nil
	}
	d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{
		Summary: "Publish notebook " + args.Notebook + "?",
		Details: map[string]any{"notebook": args.Notebook},
	})
	if err != nil {
		return nil, Notes{}, err // ErrInputRequired as it is (2026-07-28)
	}
	if !d.Accepted {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("publication declined by %q: %s", d.By, d.Reason)}}}, Notes{}, nil
	}
	all, err := mcpgrain.Step(ctx, req, "publish", func(ctx context.Context) ([]string, error) {
		return notes.Update(ctx, func(n *[]string) error {
			*n = append(*n, "published, approved by "+d.By)
			return nil
		})
	})
	return result(all, err)
}

// remind schedules the callback "remind" on a notebook.
func remind(ctx context.Context, _ *mcp.CallToolRequest, args RemindArgs) (*mcp.CallToolResult, any, error) {
	after, err := time.ParseDuration(args.After)
	if err != nil {
		return toolError(fmt.Errorf("after: %w", err)), nil, nil
	}
	if ctx, err = mcpgrain.OnHandle(ctx, args.Notebook); err != nil {
		return toolError(err), nil, nil
	}
	payload, _ := json.Marshal(args.Text)
	key, err := mcpgrain.ScheduleAt(ctx, mcpgrain.Schedule{Name: "remind", After: after, Payload: payload})
	if err != nil {
		return toolError(err), nil, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: key}}}, nil, nil
}

// reminded is the callback: it adds the reminder's note to the notebook
// its ctx is bound to, once per schedule key (it may run again).
func reminded(ctx context.Context, c mcpgrain.ScheduleCall) error {
	var text string
	if err := json.Unmarshal(c.Payload, &text); err != nil {
		return err
	}
	note := "reminder " + c.Key + ": " + text
	_, err := notes.Update(ctx, func(n *[]string) error {
		if !slices.Contains(*n, note) {
			*n = append(*n, note)
		}
		return nil
	})
	return err
}

// toolError is err as a tool error the model can read; an unknown
// notebook says only that (whether it never existed, was dropped or is
// someone else's).
func toolError(err error) *mcp.CallToolResult {
	if errors.Is(err, mcpgrain.ErrUnknownHandle) {
		err = errors.New("no such notebook")
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

// result is a notes tool's answer.
func result(all []string, err error) (*mcp.CallToolResult, Notes, error) {
	if err != nil {
		return toolError(err), Notes{}, nil
	}
	if all == nil {
		all = []string{}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d notes", len(all))}}}, Notes{Notes: all}, nil
}

func main() {
	mcpgrain.Main(mcpgrain.Server{
		Name:    "notebook",
		Version: "1.0.0",
		Register: func(s *mcp.Server) {
			mcp.AddTool(s, &mcp.Tool{Name: "new_notebook", Description: "Start a notebook; pass what it returns to the other tools."}, newNotebook)
			mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Add a note to a notebook."}, addNote)
			mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "List a notebook's notes."}, listNotes)
			mcp.AddTool(s, &mcp.Tool{Name: "drop_notebook", Description: "Delete a notebook and its notes."}, dropNotebook)
			mcp.AddTool(s, &mcp.Tool{Name: "publish_notebook", Description: "Publish a notebook, once a human approved it."}, publishNotebook)
			mcp.AddTool(s, &mcp.Tool{Name: "remind", Description: "Add a note to a notebook later."}, remind)
		},
		Schedules: map[string]mcpgrain.ScheduleFunc{"remind": reminded},
	})
}
