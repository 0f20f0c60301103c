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
// A handler keeps per-session state in a [State], declared with
// [NewState]: [State.Update] saves the value in the session's record on
// the node that owns the session, fenced by its ownership, before it
// returns, so the value survives the session's hibernation, a restart and
// the loss of the node (the next call, on any node, finds it); [State.Get]
// reads it. A handler's own Go memory, by contrast, is lost when the
// session hibernates.
//
// [Elicit] asks the client's user for a form in both eras: native
// elicitation in a stateful session; in 2026-07-28 the handler returns
// Elicit's [ErrInputRequired] and the client's retry runs it again with
// the answer.
//
// In the sessionless 2026-07-28 era (and in sessions too), a handler
// keeps state behind a server-minted handle: [NewHandle] mints one owned
// by the caller, the client passes it back as a tool argument, and
// [OnHandle] binds the handler's context to it, so [State] and the
// schedule calls act on the handle's grain, wherever it lives
// (examples/notebook).
//
// A handler schedules a callback of the server on its session
// ([ScheduleAt], [CancelSchedule], [Schedules]; the callbacks are
// [Server].Schedules), which runs when it is due, at least once, on
// whichever node owns the session then — after the session hibernated,
// the node restarted or died (examples/watch).
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

	"github.com/mcpgrain/mcpgrain/actors/app"
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
	// Schedules are the server's schedule callbacks by name: a handler
	// schedules one on its session with [ScheduleAt], and it runs when it
	// is due, at least once. Nil: none.
	Schedules map[string]ScheduleFunc
	// Continuations are the server's continuations by name: a question
	// asked with [AskLater] names one ([Question].Continuation), and a
	// later call continues it with [ContinueAsk], which runs it once on the
	// question's session with the decision. Nil: none.
	Continuations map[string]ContinueFunc
	// Tasks are the tools that may run as MCP tasks in the 2026-07-28 era
	// (a client that declares the tasks extension gets a task and follows
	// it with tasks/get), by tool name: [TaskOptional] or [TaskRequired].
	// Step and Ask work in a task's run (docs/sdk.md §4). Nil: none.
	Tasks map[string]TaskMode
}

// TaskMode is how a tool supports MCP tasks ([Server].Tasks).
type TaskMode = app.TaskMode

// The task modes of a tool.
const (
	// TaskNone: the tool answers in its request (the default).
	TaskNone = app.TaskNone
	// TaskOptional: the tool runs as a task when the request declares the
	// tasks extension, else in its request.
	TaskOptional = app.TaskOptional
	// TaskRequired: the tool runs only as a task.
	TaskRequired = app.TaskRequired
)

// Pack is a named set of MCP features a node can serve. It is the
// mechanism of mcpgrain's built-in packs, and what [Server.Pack] turns a
// Server into.
type Pack = app.Pack

// Env is what a [Pack]'s Setup gets from the node: its clock and its
// catalog.
type Env = app.Env

// Handlers are the server-level handlers a [Pack]'s Setup may need in
// the server options (completion, resource subscriptions, ...): at most
// one pack may set each.
type Handlers = app.Handlers

// Clock is the node's clock ([Env].Clock): the system clock, or a fake
// one in tests.
type Clock = app.Clock

// Timer is a function a [Clock] runs later.
type Timer = app.Timer

// Catalog is how a [Pack] changes the tools, prompts and resources of
// every server of the cluster that has it, at run time ([Env].Catalog).
type Catalog = app.Catalog

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
	if len(s.Schedules) > 0 || len(s.Continuations) > 0 {
		var err error
		if p, err = s.schedulesPack(); err != nil {
			return Pack{}, err
		}
	}
	if err := toolpacks.ValidateWith(s.With, []Pack{p}); err != nil {
		return Pack{}, fmt.Errorf("mcpgrain: Server %q: %w", s.Name, err)
	}
	for tool, m := range s.Tasks {
		if tool == "" || m < TaskNone || m > TaskRequired {
			return Pack{}, fmt.Errorf("mcpgrain: Server %q: Tasks[%q] = %d: want a tool name and TaskNone, TaskOptional or TaskRequired", s.Name, tool, m)
		}
	}
	p.Tasks = s.Tasks
	return p, nil
}

// schedulesPack is s as a pack whose handlers carry its schedule
// callbacks and continuations.
func (s Server) schedulesPack() (Pack, error) {
	fs := map[string]ScheduleFunc{}
	for name, f := range s.Schedules {
		if name == "" || f == nil {
			return Pack{}, fmt.Errorf("mcpgrain: Server %q: a schedule callback needs a name and a function", s.Name)
		}
		fs[name] = f
	}
	cs := map[string]ContinueFunc{}
	for name, f := range s.Continuations {
		if name == "" || f == nil {
			return Pack{}, fmt.Errorf("mcpgrain: Server %q: a continuation needs a name and a function", s.Name)
		}
		cs[name] = f
	}
	setup := func(toolpacks.Env) (toolpacks.Handlers, func(*mcp.Server) func()) {
		return toolpacks.Handlers{Schedules: fs, Continuations: cs}, func(srv *mcp.Server) func() { s.Register(srv); return nil }
	}
	return Pack{Name: s.Name, Setup: setup}, nil
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
