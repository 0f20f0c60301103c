// Package cli is mcpgrain's command line: the commands (dev, node,
// approve, inspect, try, bench, version), their flags and MCPGRAIN_* variables, and
// how they become an [app.Config]. One implementation serves two kinds of
// program: the mcpgrain command (cmd/mcpgrain, the zero [Program]) and a
// user's own server built with the SDK (the module root package mcpgrain,
// docs/sdk.md), which is a Program with packs of its own.
//
//	mcpgrain dev      one node, embedded store and membership, for trying it out
//	mcpgrain node     a cluster member (Consul membership, Postgres store)
//	mcpgrain approve  see and decide executions paused for approval
//	mcpgrain inspect  one session's, task's or execution's current state (admins)
//	mcpgrain try      run code that needs approval against an endpoint, as an MCP client
//	mcpgrain bench    load-test an MCP endpoint (or an in-process node)
//	mcpgrain version  print the version
//
// Every flag can also be set with an MCPGRAIN_<FLAG> environment variable
// (dashes become underscores: --log-level → MCPGRAIN_LOG_LEVEL); a flag on
// the command line wins over the environment.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// ErrUsage marks an error in the command line or environment (exit
// status 2).
var ErrUsage = errUsage

// Program is a command-line program that runs mcpgrain nodes. The zero
// value is the mcpgrain command. A program with Packs of its own (an SDK
// user's server) offers dev, node, approve and version; try and bench
// belong to the mcpgrain command.
type Program struct {
	// Name is the program's name in usage and error messages. "":
	// "mcpgrain".
	Name string
	// Version is the program's version (version command, banners). "":
	// mcpgrain's build version.
	Version string
	// Packs are the program's own packs, known besides the built-in ones.
	Packs []toolpacks.Pack
	// Tools is the default of --tools. "": the code and demo packs.
	Tools string
	// Implementation is the server a client sees in initialize. Nil:
	// mcpgrain at its build version.
	Implementation *mcp.Implementation
}

func (p Program) name() string {
	if p.Name == "" {
		return "mcpgrain"
	}
	return p.Name
}

// command is how the program's own output tells a user to run it: the
// README's bin/mcpgrain for mcpgrain itself, else the program's name.
func (p Program) command() string {
	if p.Name == "" {
		return cliName
	}
	return p.Name
}

func (p Program) version() string {
	if p.Version == "" {
		return version()
	}
	return p.Version
}

func (p Program) tools() string {
	if p.Tools == "" {
		return defaultPacks
	}
	return p.Tools
}

// sdk reports whether the program is a user's server (it has packs of its
// own) rather than the mcpgrain command.
func (p Program) sdk() bool { return len(p.Packs) > 0 }

const usage = `mcpgrain hosts MCP sessions as virtual grains on a cluster.

Usage:
  mcpgrain dev [flags]      run one node with an embedded store (try it out)
  mcpgrain node [flags]     run a cluster member (Consul + Postgres)
  mcpgrain approve <cmd>    list, show, accept or decline paused executions
  mcpgrain inspect <what> ID  one session's (task's, execution's) current state (admins)
  mcpgrain try [flags]      run code that needs approval against an endpoint, as an MCP client
  mcpgrain bench [flags]    load-test an MCP endpoint; --baseline compares with plain go-sdk
  mcpgrain version          print the version

Run "mcpgrain <command> -h" for the flags of a command.
`

const sdkUsage = `%[1]s is an MCP server hosted on mcpgrain.

Usage:
  %[1]s dev [flags]      run one node with an embedded store (try it out)
  %[1]s node [flags]     run a cluster member (Consul + Postgres)
  %[1]s approve <cmd>    list, show, accept or decline paused executions
  %[1]s inspect <what> ID  one session's (task's, execution's) current state (admins)
  %[1]s version          print the version

Run "%[1]s <command> -h" for the flags of a command.
`

func (p Program) usage() string {
	if p.sdk() {
		return fmt.Sprintf(sdkUsage, p.name())
	}
	return usage
}

// errUnknownCommand marks a command the program does not have.
var errUnknownCommand = fmt.Errorf("%w: unknown command", errUsage)

// Main runs the command in args until it ends or the process gets SIGINT
// or SIGTERM, prints its error (or the usage, when args is empty or names
// no command), and returns the exit status: 0 success (or -h), 2 a usage
// error, 1 otherwise.
func (p Program) Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, p.usage())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := p.Run(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUnknownCommand):
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", p.name(), args[0], p.usage())
		return 2
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s %s: %v\n", p.name(), args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "%s %s: %v\n", p.name(), args[0], err)
		return 1
	}
}

// Run runs the command in args (args[0] names it: "dev", "node", ...)
// until it ends or ctx is done. A usage error wraps [ErrUsage]; -h is not
// an error.
func (p Program) Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command (want one of: %s)", errUsage, p.commands())
	}
	var err error
	switch cmd := args[0]; {
	case cmd == "dev":
		err = p.runDev(ctx, args[1:], stdout, stderr)
	case cmd == "node":
		err = p.runNode(ctx, args[1:], stdout, stderr)
	case cmd == "approve":
		err = runApprove(ctx, p.name(), args[1:], stdout, stderr)
	case cmd == "inspect":
		err = runInspect(ctx, args[1:], stdout, stderr)
	case cmd == "try" && !p.sdk():
		err = runTry(ctx, args[1:], stdout, stderr)
	case cmd == "bench" && !p.sdk():
		err = runBench(ctx, args[1:], stdout, stderr)
	case cmd == "version" || cmd == "--version" || cmd == "-version":
		fmt.Fprintln(stdout, p.name(), p.version())
	case cmd == "help" || cmd == "-h" || cmd == "--help":
		fmt.Fprint(stdout, p.usage())
	default:
		return fmt.Errorf("%w %q (want one of: %s)", errUnknownCommand, cmd, p.commands())
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// commands lists the program's commands.
func (p Program) commands() string {
	if p.sdk() {
		return "dev, node, approve, inspect, version"
	}
	return "dev, node, approve, inspect, try, bench, version"
}

// run is the mcpgrain command's Main (tests call it).
func run(args []string, stdout, stderr io.Writer) int {
	return Program{}.Main(args, stdout, stderr)
}
