// Command chaosnode is the SDK program the chaos harness (TestChaos) runs
// on its three nodes: the tools of examples/notes (durable per-session
// State), examples/deploy (Ask and Step) and examples/watch (durable
// schedules) in one binary, beside the built-in packs the harness enables
// with --tools.
package main

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/examples/deploy/deploytool"
	"github.com/mcpgrain/mcpgrain/examples/notes/notestool"
	"github.com/mcpgrain/mcpgrain/examples/watch/watchtool"
)

func main() {
	mcpgrain.Main(mcpgrain.Server{
		Name:    "chaosnode",
		Version: "1.0.0",
		Register: func(s *mcp.Server) {
			notestool.Register(s)
			deploytool.Register(s)
			watchtool.Register(s)
		},
		Schedules:     watchtool.Schedules(),
		Continuations: deploytool.Continuations(),
	})
}
