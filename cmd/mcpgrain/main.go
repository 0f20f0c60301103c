// Command mcpgrain runs mcpgrain: MCP sessions hosted as virtual grains on a
// cluster.
//
//	mcpgrain dev      one node, embedded store and membership, for trying it out
//	mcpgrain node     a cluster member (Consul membership, Postgres store)
//	mcpgrain approve  see and decide executions paused for approval
//	mcpgrain try      run code that needs approval against an endpoint, as an MCP client
//	mcpgrain bench    load-test an MCP endpoint (or an in-process node)
//	mcpgrain version  print the version
//
// Every flag can also be set with an MCPGRAIN_<FLAG> environment variable
// (dashes become underscores: --log-level → MCPGRAIN_LOG_LEVEL); a flag on
// the command line wins over the environment. The commands live in
// internal/cli, which the SDK's mcpgrain.Run (a user's own server) shares.
package main

import (
	"os"

	"github.com/mcpgrain/mcpgrain/internal/cli"
)

func main() {
	os.Exit(cli.Program{}.Main(os.Args[1:], os.Stdout, os.Stderr))
}
