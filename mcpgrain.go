// Package mcpgrain hosts your own MCP server on mcpgrain: a Go program
// that defines its server with go-sdk's own API (mcp.AddTool,
// AddResource, AddPrompt) becomes an mcpgrain node by calling [Main]. The
// same binary then runs
//
//	prog dev    one node with an embedded SQLite store and no services
//	prog node   a cluster member (Consul membership, Postgres store)
//
// with every flag, MCPGRAIN_* variable, metric, authentication mode
// (bearer keys, OAuth) and approval surface of the mcpgrain command, and
// its tools are served on the node's shared MCP server over both protocol
// eras (stateful sessions, and the sessionless 2026-07-28 era), on
// whichever node a request reaches.
//
// A tool handler can ask a human and wait for the decision ([Ask]): the
// question is an execution paused for approval on every approval surface
// (inbox, page, HTTP API, gRPC, the program's approve command), decided by
// an approver of the session owner's organization within the approval
// window. Such a tool call is durable: its questions and the results of
// its steps ([Step]) are journaled in the store, and the client's retry
// of a call lost with its node (same session, tool and arguments) runs
// the handler again with the journaled results and the recorded decision
// (docs/sdk.md §4 states the contract).
//
// Durable per-session state, server-minted handles and schedules are
// designed in docs/sdk.md and come next. Until then, keep what a session
// does keyed by the request's session and expect it to be lost when the
// session hibernates.
package mcpgrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/internal/cli"
)

// Server is an MCP server of your own, hosted on mcpgrain. Name and
// Register are required; the other fields' zero values are the documented
// defaults.
type Server struct {
	// Name names the server: it is the pack name that --tools selects
	// (the default --tools is Name, then With) and the implementation
	// name a client sees in initialize. Lower-case letters, digits, '-'
	// and '_', starting with a letter; not the name of a built-in pack
	// ("code", "demo", "conformance").
	Name string
	// Version is the implementation version a client sees and the version
	// command prints. "": "dev".
	Version string
	// Register defines the server with go-sdk's API on s (mcp.AddTool,
	// s.AddResource, s.AddPrompt, ...). It is called once for every server
	// a node builds — the one its stateful sessions share, the one of its
	// sessionless (2026-07-28) requests, one per task — so it must only
	// register: keep nothing per server, and key whatever a session does
	// by the request's session (req.Session), never by s.
	Register func(s *mcp.Server)
	// With are built-in packs served alongside yours by default: "code"
	// (code mode), "demo", "conformance". Nil: yours only. The operator
	// can still choose with --tools (e.g. --tools hello,code).
	With []string
}

// Pack is a named set of MCP features a node can serve. It is the
// mechanism of mcpgrain's built-in packs, and what [Server.Pack] turns a
// Server into.
type Pack = toolpacks.Pack

// ErrUsage marks an error in the command line or the MCPGRAIN_*
// environment; [Main] exits with status 2 for it.
var ErrUsage = cli.ErrUsage

var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// Pack returns s as a pack (what [Run] serves), after checking s.
func (s Server) Pack() (Pack, error) {
	switch {
	case !validName.MatchString(s.Name):
		return Pack{}, fmt.Errorf("mcpgrain: Server.Name %q: want lower-case letters, digits, '-' and '_', starting with a letter", s.Name)
	case s.Register == nil:
		return Pack{}, fmt.Errorf("mcpgrain: Server %q has no Register", s.Name)
	}
	p := toolpacks.NewPack(s.Name, s.Register)
	if err := toolpacks.ValidateWith(s.With, []Pack{p}); err != nil {
		return Pack{}, fmt.Errorf("mcpgrain: Server %q: %w", s.Name, err)
	}
	return p, nil
}

// program is the command-line program that runs s.
func (s Server) program() (cli.Program, error) {
	p, err := s.Pack()
	if err != nil {
		return cli.Program{}, err
	}
	version := s.Version
	if version == "" {
		version = "dev"
	}
	return cli.Program{
		Name:           filepath.Base(os.Args[0]),
		Version:        version,
		Packs:          []Pack{p},
		Tools:          strings.Join(append([]string{s.Name}, s.With...), ","),
		Implementation: &mcp.Implementation{Name: s.Name, Version: version},
	}, nil
}

// Main runs the program as an mcpgrain node and exits. os.Args[1] is the
// command: dev, node, approve (list and decide paused executions) or
// version; "prog <command> -h" lists its flags, which are the mcpgrain
// command's. Main stops gracefully on SIGINT and SIGTERM. The exit status
// is 0 on success, 2 on a usage error (or an invalid Server), 1 otherwise.
func Main(s Server) {
	p, err := s.program()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(p.Main(os.Args[1:], os.Stdout, os.Stderr))
}

// Run is [Main] without the exit and the signal handling: it runs the
// command args[0] ("dev", "node", "approve", "version") with the flags in
// args[1:] until the command ends or ctx is done (a node then stops
// gracefully). A usage error (and an invalid Server) wraps [ErrUsage]; -h
// is not an error. stdout gets the node's banner, stderr its logs.
func Run(ctx context.Context, s Server, args []string, stdout, stderr io.Writer) error {
	p, err := s.program()
	if err != nil {
		return errors.Join(ErrUsage, err)
	}
	return p.Run(ctx, args, stdout, stderr)
}
