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
// the command line wins over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `mcpgrain hosts MCP sessions as virtual grains on a cluster.

Usage:
  mcpgrain dev [flags]      run one node with an embedded store (try it out)
  mcpgrain node [flags]     run a cluster member (Consul + Postgres)
  mcpgrain approve <cmd>    list, show, accept or decline paused executions
  mcpgrain try [flags]      run code that needs approval against an endpoint, as an MCP client
  mcpgrain bench [flags]    load-test an MCP endpoint; --baseline compares with plain go-sdk
  mcpgrain version          print the version

Run "mcpgrain <command> -h" for the flags of a command.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "dev":
		err = runDev(ctx, args[1:], stdout, stderr)
	case "node":
		err = runNode(ctx, args[1:], stdout, stderr)
	case "approve":
		err = runApprove(ctx, args[1:], stdout, stderr)
	case "try":
		err = runTry(ctx, args[1:], stdout, stderr)
	case "bench":
		err = runBench(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "mcpgrain", version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "mcpgrain: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "mcpgrain %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "mcpgrain %s: %v\n", args[0], err)
		return 1
	}
}
