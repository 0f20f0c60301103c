// Package notestool is examples/notes's tools: add_note, list_notes and
// clear_notes keep each session's notes in an mcpgrain.State, saved with
// the session on the node that owns it before each result is sent.
package notestool

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// notes is each session's notes, oldest first (at most 4 KiB of JSON).
var notes = mcpgrain.NewState[[]string]("notes", mcpgrain.StateOptions[[]string]{MaxBytes: 4 << 10})

// AddArgs are add_note's arguments.
type AddArgs struct {
	Text string `json:"text" jsonschema:"the note"`
}

// Notes is every tool's result: the session's notes.
type Notes struct {
	Notes []string `json:"notes"`
}

// addNote appends a note to the session's notes.
func addNote(ctx context.Context, _ *mcp.CallToolRequest, args AddArgs) (*mcp.CallToolResult, Notes, error) {
	all, err := notes.Update(ctx, func(n *[]string) error {
		*n = append(*n, args.Text)
		return nil
	})
	return result(all, err)
}

// listNotes returns the session's notes.
func listNotes(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Notes, error) {
	return result(notes.Get(ctx))
}

// clearNotes drops the session's notes.
func clearNotes(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Notes, error) {
	all, err := notes.Update(ctx, func(n *[]string) error {
		*n = nil
		return nil
	})
	return result(all, err)
}

// result is a tool's answer: the notes, or the state's error as a tool
// error the model can read (a value too large, no session).
func result(all []string, err error) (*mcp.CallToolResult, Notes, error) {
	if err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, Notes{}, nil
	}
	if all == nil {
		all = []string{}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d notes", len(all))}}}, Notes{Notes: all}, nil
}

// Register adds add_note, list_notes and clear_notes to s.
func Register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Add a note to this session's notes."}, addNote)
	mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "List this session's notes."}, listNotes)
	mcp.AddTool(s, &mcp.Tool{Name: "clear_notes", Description: "Drop this session's notes."}, clearNotes)
}
