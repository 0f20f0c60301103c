package tasks

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
)

// KindName is the task grain kind.
const KindName = exchange.KindTask

// Store is what tasks need of the store.
type Store interface {
	PutTask(ctx context.Context, grain string, epoch uint64, t taskstore.Task) error
	SwapTask(ctx context.Context, status string, attempts int, t taskstore.Task) error
	GetTask(ctx context.Context, taskID string, now time.Time) (taskstore.Task, error)
}

// DefaultTTL is how long a task is kept after its creation when
// [Config].TTL is zero; a node's --task-ttl defaults to it.
const DefaultTTL = time.Hour

// Config configures the tasks extension of a node.
type Config struct {
	// NewServer builds a server with the node's tool packs, on which task
	// grains run tools (required); the host passes empty server options
	// and, for a task grain that runs code mode, its code-mode tools
	// (execute, resume).
	NewServer mcpruntime.ServerFactory
	// CodeMode, if set, makes code mode's execute a task-supporting tool:
	// each task grain that runs one has its own execution engine, journaled
	// in RunStore under the task grain, so a pause for approval (the task's
	// input_required) outlives the grain's activation and its node.
	CodeMode *mcpruntime.CodeMode
	// RunStore journals code-mode executions (required with CodeMode).
	RunStore engine.RunStore
	// Calls, if set, keeps the SDK's durable tool calls (Step, Ask) of
	// the tasks: each task's tool is one durable call of its grain, and an
	// Ask's question is the task's input_required, decided on the approval
	// surfaces or with tasks/update (calls.go). Nil: Step and Ask are
	// app.ErrNoCall in a task's run.
	Calls store.Store
	// AskWindow is how long an Ask's question waits for a decision before
	// the window declines it. Default engine.DefaultApprovalWindow.
	AskWindow time.Duration
	// Later configures the pending questions (the SDK's AskLater) of the
	// tasks' runs: the approval links' origin, the per-principal cap and
	// its refusals' counter.
	Later mcpruntime.LaterConfig
	// MayDecide reports whether a role may decide a code-mode task's
	// paused execution, with tasks/update or on an approval surface (the
	// node's --approvers; nil: nobody).
	MayDecide func(role string) bool
	// Store keeps the tasks (required).
	Store Store
	// Cluster reaches the task grains (required): the continuation
	// servers' middleware starts a task grain through it. The node's
	// grain.Cluster, which a grain.Host is handed.
	Cluster grain.Requester
	// Support is each tool's task support (nil: no tool runs as a task).
	Support func(tool string) Support
	// TTL is how long a task is kept after its creation (zero:
	// [DefaultTTL]).
	TTL time.Duration
	// PollInterval is the polling interval suggested to clients. Default
	// 500ms.
	PollInterval time.Duration
	// Lease is the period of the reminder that a task grain holds while
	// its work runs: after a node loss, a working task ends failed within
	// about this long even if nobody asks. Default 10s.
	Lease time.Duration
	// IdleTimeout passivates a task grain with no work running. Default 1m.
	IdleTimeout time.Duration
	// Registerer receives the metrics (node label added by the caller;
	// nil: not registered).
	Registerer prometheus.Registerer
	// Logger logs problems. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Host is the tasks extension of a node: the task grain kind and the
// continuation servers' middleware.
type Host struct {
	cfg     Config
	runner  *runner
	metrics *metrics
	calls   sync.Map // task id -> *mcpruntime.GrainCalls of its activation on this node
}

// NewHost returns the tasks extension of a node.
func NewHost(cfg Config) (*Host, error) {
	if cfg.NewServer == nil || cfg.Store == nil || cfg.Cluster == nil {
		return nil, errors.New("tasks: Config.NewServer, Store and Cluster are required")
	}
	if cfg.CodeMode != nil && cfg.RunStore == nil {
		return nil, errors.New("tasks: Config.RunStore is required with CodeMode")
	}
	if cfg.MayDecide == nil {
		cfg.MayDecide = func(string) bool { return false }
	}
	if cfg.Support == nil {
		cfg.Support = func(string) Support { return Support{} }
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	newServer := cfg.NewServer
	// Code-mode tools never run on the node's runner (see code.go): it
	// registers none.
	noCode := func(*mcp.Server) {}
	h := &Host{cfg: cfg, metrics: newMetrics(cfg.Registerer)}
	h.runner = &runner{newServer: func() (*mcp.Server, func(), error) {
		srv, stop, err := newServer(&mcp.ServerOptions{}, noCode)
		if err == nil && cfg.Calls != nil {
			srv.AddReceivingMiddleware(h.bindCall)
		}
		return srv, stop, err
	}}
	return h, nil
}

// Close stops the server the node's task grains run tools on.
func (h *Host) Close() { h.runner.close() }

// Kind returns the task grain kind. A task grain exists once its task was
// created (a guessed id leaves nothing in the store).
func (h *Host) Kind() grain.Kind {
	return grain.Kind{
		Name:           KindName,
		IdleTimeout:    h.cfg.IdleTimeout,
		CreatedByWrite: true,
		New:            func(id string) grain.Grain { return &taskGrain{h: h, id: id} },
	}
}
