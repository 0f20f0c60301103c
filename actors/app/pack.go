package app

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// Pack is a named set of MCP features a node can serve: the mechanism of
// the built-in packs (actors/toolpacks) and of a program's own (the SDK's
// mcpgrain.Server is one). A pack is set up once for every server a node
// builds: the shared server of its sessions, the one of its sessionless
// requests, one per task grain.
type Pack struct {
	// Name is the pack's name, as a --tools selection names it.
	Name string
	// Setup prepares the pack for one server. It returns the server-level
	// handlers the pack needs in the server options (they must be known
	// before the server is created) and the function that then adds the
	// pack's tools, resources and prompts to the server; that function
	// returns the one that stops the pack's background work for the server
	// and waits for it (nil if none). The node calls stop when it closes
	// the server. Setup is nil only for the built-in code pack, whose tools
	// the session runtime registers.
	Setup func(e Env) (Handlers, func(s *mcp.Server) (stop func()))
	// Tasks are the pack's tools that may run as MCP tasks (the tasks
	// extension of the 2026-07-28 era), by tool name. Nil: none; every
	// tool answers in its request.
	Tasks map[string]TaskMode
}

// TaskMode is how a tool supports MCP tasks.
type TaskMode int

// The task modes of a tool.
const (
	// TaskNone: the tool answers in its request (the default).
	TaskNone TaskMode = iota
	// TaskOptional: the tool runs as a task when the request declares the
	// tasks extension, else in its request.
	TaskOptional
	// TaskRequired: the tool runs only as a task; a request that does not
	// declare the extension is refused (-32021).
	TaskRequired
)

// Env is what a pack's Setup gets from the node.
type Env struct {
	// Clock is the node's clock (never nil): a pack that tells or waits
	// for the time asks it, so that a test can inject a fake one.
	Clock Clock
	// Catalog changes the tools, prompts and resources of every server of
	// the cluster that has the pack (never nil).
	Catalog Catalog
}

// Clock tells the time and runs functions later (the node's clock: the
// system clock, or a fake one in tests).
type Clock = clock.Clock

// Timer is a function that a [Clock] runs later; Stop cancels it.
type Timer = clock.Timer

// Catalog is how a pack changes its server's catalog (tools, prompts,
// resources) at run time on every node of the cluster, not only on the
// server a request reached: a pack defines a named change once per server
// (Define, while its Setup's register function runs) and applies it by
// name (Apply), which runs it on every server of this node that has the
// pack and asks the other nodes to do the same. Each server then tells
// its own clients (notifications/*/list_changed).
type Catalog interface {
	// Define binds the change name to server s: applying name runs change
	// on s. A pack calls it from its register function.
	Define(name string, s *mcp.Server, change func(s *mcp.Server))
	// Apply runs the named change on this node's servers and then on every
	// other node's. The local change is made even when the broadcast
	// fails; the error then says which part did not reach the cluster.
	Apply(ctx context.Context, name string) error
}

// Handlers are the mcp.ServerOptions handler fields a pack may set. Each
// may be set by at most one source (a pack, or the server options the node
// starts from): two packs setting the same one is an error when the
// server is built. The fields mean what they mean in mcp.ServerOptions.
type Handlers struct {
	// InitializedHandler is mcp.ServerOptions.InitializedHandler.
	InitializedHandler func(context.Context, *mcp.InitializedRequest)
	// ProgressNotificationHandler is
	// mcp.ServerOptions.ProgressNotificationHandler.
	ProgressNotificationHandler func(context.Context, *mcp.ProgressNotificationServerRequest)
	// CompletionHandler is mcp.ServerOptions.CompletionHandler
	// (completion/complete).
	CompletionHandler func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error)
	// SubscribeHandler is mcp.ServerOptions.SubscribeHandler
	// (resources/subscribe); set it together with UnsubscribeHandler.
	SubscribeHandler func(context.Context, *mcp.SubscribeRequest) error
	// UnsubscribeHandler is mcp.ServerOptions.UnsubscribeHandler.
	UnsubscribeHandler func(context.Context, *mcp.UnsubscribeRequest) error
	// Schedules are the pack's durable callbacks by name (the SDK's
	// schedules, docs/sdk.md §3): a session's handler schedules one by
	// name, and the session runs it when it is due ([SchedulesOf]). Two
	// packs registering the same name is a conflict.
	Schedules map[string]ScheduleFunc
	// Continuations are the pack's continuations by name (docs/sdk.md §4,
	// "Continuing on the owner"): a pending question names one, and a
	// later call runs it on the question's owner once it is decided
	// ([ContinuationsOf]). Two packs registering the same name is a
	// conflict.
	Continuations map[string]ContinueFunc
}
