// Command notes is an MCP server whose sessions keep notes that survive
// the loss of the node serving them: add_note, list_notes and clear_notes
// keep each session's notes in an mcpgrain.State, saved with the session
// on the node that owns it before each result is sent. Run it as a node:
//
//	go run ./examples/notes dev --no-auth
//
// or as a cluster with `notes node` (Consul + Postgres; docs/sdk.md).
package main

import (
	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/examples/notes/notestool"
)

func main() {
	mcpgrain.Main(mcpgrain.Server{
		Name:     "notes",
		Version:  "1.0.0",
		Register: notestool.Register,
	})
}
