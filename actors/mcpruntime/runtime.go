// Package mcpruntime is the MCP session runtime a session grain hosts:
// go-sdk's own Streamable HTTP handler for exactly one session, in front of
// the node's one shared go-sdk *mcp.Server (its tool packs are registered
// once per node, not per session: a session costs only its own state).
//
// The gateway tunnels each HTTP exchange of the session to the grain, which
// calls [Runtime.ServeExchange]; go-sdk does everything MCP: JSON-RPC,
// SSE, priming events, routing of notifications and server→client requests
// to the right stream, protocol-version checks, 202s for notifications.
// Nothing here interprets MCP messages except to remember the session's
// handshake state, and to answer a call of a method the server does not
// have with JSON-RPC's -32601 (HTTP 200) where go-sdk, before protocol
// 2026-07-28, answers a plain-text 400 that ends its clients' sessions.
//
// Session ids: the client knows the session by the id the gateway minted
// (the grain's identity). go-sdk's handler keys its session by an id the
// shared server mints, different in every runtime incarnation; the runtime
// translates the Mcp-Session-Id header both ways, so neither side sees the
// other's id. Handlers on the shared server find the session's runtime by
// the grain identity the tunnel puts in every request
// (exchange.HeaderIdentity, read by exchange.SessionOf).
//
// Restore after passivation: the runtime records go-sdk's
// ServerSessionState (initialize params, negotiated version, log level) in
// the session record whenever it changes. A rebuilt runtime replays that
// state into its fresh handler as the client once sent it — initialize,
// notifications/initialized, logging/setLevel — so the client continues
// without re-initializing.
// The replay calls the handler directly, in process: no network, no test
// recorder; the answers go to a small in-memory writer. (go-sdk v1.8.0's
// ServerSessionOptions.State cannot be used here: only the
// StreamableHTTPHandler sets up the per-request protocol-version context
// that the transport needs, through an unexported context key, and the
// handler creates sessions only from an initialize request; Server.Connect
// with a state, or an in-memory transport, would give a session the
// handler does not know.)
//
//lint:file-ignore SA1019 restoring a legacy-era session replays its logging level (SEP-2577 deprecates, still serves it).
package mcpruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/dispatch"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// ServerFactory builds an MCP server with the node's tool packs: the one
// type of every server builder of a node (the session runtimes', the
// continuation grains', the task grains'). opts are the server's options
// (nil: none); codeMode, if non-nil, registers code mode's tools (execute,
// resume) for the grain the server serves; closeServer releases what the
// server holds.
type ServerFactory func(opts *mcp.ServerOptions, codeMode func(*mcp.Server)) (srv *mcp.Server, closeServer func(), err error)

// Config configures the runtimes of one node.
type Config struct {
	// Packs are the tool packs every session's server gets.
	Packs []string
	// Implementation names the server. Default {Name: "mcpgrain"}.
	Implementation *mcp.Implementation
	// Store keeps the SSE event log for resumability and the durable
	// executions' runs (required).
	Store store.Store
	// Logger logs runtime problems. Default slog.Default().
	Logger *slog.Logger
	// EventFlushInterval is the write-behind window of the event log: the
	// events of a window are committed together when it ends (or sooner,
	// when a group is full: see flushPolicy), so a node killed without a
	// clean shutdown loses at most the events of the last window.
	// Default [DefaultEventFlushInterval].
	EventFlushInterval time.Duration
	// EventMemory bounds the flushed events a session keeps in memory for
	// quick resumes (older ones are read back from the store; events not
	// yet flushed are always kept). Default 64 KiB: with tens of thousands
	// of resident sessions, megabytes each would be the node's memory.
	EventMemory int
	// MaxEventBytes bounds one logged SSE event: a larger one is delivered
	// but not kept, and its stream cannot be resumed from before it.
	// Default [DefaultMaxEventBytes].
	MaxEventBytes int
	// SessionEventBytes bounds the events stored per session: the oldest
	// are dropped first once a quarter of it was written since the last
	// trim. Default [DefaultSessionEventBytes].
	SessionEventBytes int64
	// PrincipalEventBytes bounds the events stored for all the sessions of
	// one principal (user and organization), counted by the store across
	// the nodes that share it: once a flush leaves a principal over it,
	// its oldest events, whichever session they belong to, are dropped.
	// Default [DefaultPrincipalEventBytes].
	PrincipalEventBytes int64
	// StoredEventBytes bounds the events the store keeps in all, every
	// session of every node that shares it (give every node the same):
	// the oldest are dropped, whoever owns them. Default
	// [DefaultStoredEventBytes].
	StoredEventBytes int64
	// Registerer receives the event log's metrics (nil: not registered).
	Registerer prometheus.Registerer
	// NewServer builds the node's shared session server (required, called
	// once): the node passes a function that registers its tool packs.
	// codeMode registers the execute and resume tools (the code pack),
	// which serve each request with its own session's engine.
	NewServer ServerFactory
	// CodeMode configures the execution engine (nil: no code pack).
	CodeMode *CodeMode
	// AskWindow is how long a question asked from a tool handler (the
	// SDK's Ask) waits for a decision before it is declined. Zero:
	// CodeMode's Window, else engine.DefaultApprovalWindow.
	AskWindow time.Duration
	// PublicURL is the origin of the approval links of questions asked
	// without waiting (the SDK's AskLater; "": the request's host), as
	// CodeMode.PublicURL is code mode's.
	PublicURL string
	// MaxPendingAsks caps one principal's undecided questions asked
	// without waiting (the SDK's AskLater; past it app.ErrTooManyPendingAsks).
	// Zero: DefaultMaxPendingAsks; negative: unlimited.
	MaxPendingAsks int
	// Approvers is who may decide a question in band (the SDK's
	// Question.ClientMayDecide: app.InBandFor), as CodeMode.Approvers is
	// for code mode's pauses. Default policy.ApproversMember.
	Approvers policy.Approvers
	// Decide sends an in-band decision to the session grain that owns the
	// question (session.DecideThrough; nil: no in-band decision is taken,
	// the approval surfaces decide).
	Decide func(ctx context.Context, sessionID string, m *pb.ExecutionDecide) (*pb.ExecutionReply, error)
	// Continue sends a continuation of a pending question to the session
	// grain that owns it (the SDK's ContinueAsk; session.ContinueThrough;
	// nil: only a session's own questions are continued).
	Continue func(ctx context.Context, sessionID string, m *pb.AskContinue) (*pb.AskContinueReply, error)
	// Clock tells the time of the SDK's durable calls: their questions'
	// deadlines, and what a pending question came to (AskStatus). Default
	// CodeMode's Clock, else the system clock. The node's continuation
	// and task grains are given the same (GrainCallsConfig.Now).
	Clock clock.Clock
}

// Defaults of the event log's bounds ([Config.MaxEventBytes],
// [Config.SessionEventBytes], [Config.PrincipalEventBytes],
// [Config.StoredEventBytes]). An execute result at the default output
// limit (1 MiB) fits in an event; a principal keeps four sessions' worth.
const (
	DefaultMaxEventBytes       = 2 << 20
	DefaultSessionEventBytes   = 16 << 20
	DefaultPrincipalEventBytes = 64 << 20
	DefaultStoredEventBytes    = 1 << 30
)

// Builder builds the MCP runtimes of a node's sessions (a session.Builder)
// around the node's shared server.
type Builder struct {
	cfg      Config
	server   *mcp.Server
	closeSrv func()
	// runtimes are the node's live runtimes by session id, for handlers on
	// the shared server.
	runtimes sync.Map
	// events writes the event logs of all its runtimes behind.
	events *eventWriter
	// cuts are the POST exchanges in flight on the node's runtimes, by
	// token (headerExchange). One table for the node, not one a runtime:
	// a map holds room of its own once written, and a token is unique on
	// the node, so a runtime only ever finds its own exchanges.
	cuts exchange.Table[*postExchange]
	// calls is the durable calls' store, shared by the runtimes.
	calls *callstore.Store
	// refusals counts AskLater refusals at the per-principal cap.
	refusals *LaterRefusals
	// runs is the durable code-mode executions' store, shared by the
	// runtimes' journals: made once here, not once a session.
	runs *runstore.Store
	// tokens numbers the POST exchanges (newExchangeToken).
	tokens atomic.Uint64
	// asks are the durable calls' node-wide settings, shared by the
	// runtimes' asks.
	asks *askNode
	// fwd is how the session runtimes' code mode forwards a resume from
	// another session.
	fwd *codeForward
}

// LaterRefusals is the node's counter of AskLater refusals at the
// per-principal cap (registered with Config.Registerer), for its
// continuation and task grains' LaterConfig too.
func (b *Builder) LaterRefusals() *LaterRefusals { return b.refusals }

var _ session.Builder = (*Builder)(nil)

// NewBuilder builds the node's shared session server and returns the
// builder of its session runtimes. Close it when the node stops.
func NewBuilder(cfg Config) (*Builder, error) {
	if cfg.Store == nil || cfg.NewServer == nil {
		return nil, errors.New("mcpruntime: Config.Store and Config.NewServer are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.EventFlushInterval <= 0 {
		cfg.EventFlushInterval = DefaultEventFlushInterval
	}
	if cfg.EventMemory <= 0 {
		cfg.EventMemory = 64 << 10
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = DefaultMaxEventBytes
	}
	if cfg.SessionEventBytes <= 0 {
		cfg.SessionEventBytes = DefaultSessionEventBytes
	}
	if cfg.PrincipalEventBytes <= 0 {
		cfg.PrincipalEventBytes = DefaultPrincipalEventBytes
	}
	if cfg.StoredEventBytes <= 0 {
		cfg.StoredEventBytes = DefaultStoredEventBytes
	}
	m, err := newEventMetrics(cfg.Registerer, eventstore.New(cfg.Store), cfg.Logger)
	if err != nil {
		return nil, err
	}
	refusals, err := NewLaterRefusals(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	b := &Builder{cfg: cfg, calls: callstore.New(cfg.Store), refusals: refusals, runs: runstore.New(cfg.Store)}
	b.asks = newAskNode(cfg, b.calls)
	b.fwd = &codeForward{timeout: ForwardTimeout, cont: cfg.Continue}
	var codeMode func(*mcp.Server)
	if cfg.CodeMode != nil {
		codeMode = func(s *mcp.Server) { registerCode(s, cfg.CodeMode, b.codeOf) }
	}
	srv, closeSrv, err := cfg.NewServer(&mcp.ServerOptions{}, codeMode)
	if err != nil {
		return nil, fmt.Errorf("mcpruntime: build the session server: %w", err)
	}
	srv.AddReceivingMiddleware(growStack, b.recordState, b.bindScope, b.bindCall)
	b.server, b.closeSrv = srv, closeSrv
	b.events = newEventWriter(eventstore.New(cfg.Store), cfg.Logger, clock.Real(),
		flushPolicy{window: cfg.EventFlushInterval, events: maxGroupEvents, bytes: maxGroupBytes},
		eventLimits{memory: cfg.EventMemory, maxEvent: cfg.MaxEventBytes, budget: cfg.SessionEventBytes,
			principal: cfg.PrincipalEventBytes, stored: cfg.StoredEventBytes}, m)
	return b, nil
}

// Close stops the shared server's background work (the packs').
func (b *Builder) Close() {
	if b.closeSrv != nil {
		b.closeSrv()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.events.close(ctx); err != nil {
		b.cfg.Logger.Warn("mcpruntime: last flush of the event log", "err", err)
	}
}

// runtimeOf is the runtime of the session a request on the shared server
// belongs to.
func (b *Builder) runtimeOf(h http.Header) (*Runtime, bool) {
	if h == nil {
		return nil, false
	}
	v, ok := b.runtimes.Load(exchange.SessionOf(h))
	if !ok {
		return nil, false
	}
	return v.(*Runtime), true
}

// codeOf is the code runtime of a tool call's session.
func (b *Builder) codeOf(req *mcp.CallToolRequest) (codemode.Runtime, bool) {
	if req.Extra == nil {
		return nil, false
	}
	r, ok := b.runtimeOf(req.Extra.Header)
	if !ok || r.code == nil {
		return nil, false
	}
	return r.code, true
}

// Runtime is one session's MCP handler and its state.
type Runtime struct {
	id      string
	b       *Builder
	handler *mcp.StreamableHTTPHandler
	events  *eventLog
	persist func([]byte) error
	// log is the session's logger: its handler is the runtime itself
	// (sessionLog), which adds the session's id only to what is logged,
	// so a runtime pays no attribute or handler of its own for it.
	log slog.Logger

	code      *codeRuntime  // nil without code mode
	sched     app.Scheduler // the session's schedules (nil: none)
	asks      *asks         // the SDK's durable tool calls (nil: not durable)
	scope     *sessionScope
	posts     atomic.Int32 // POST exchanges in flight (executor's active streams)
	exchanges atomic.Int32 // all exchanges in flight, GET streams included
	streams   atomic.Int32 // open SSE responses: POST streams and GET listeners

	mu        sync.Mutex
	sdkID     string // go-sdk's id of the session (see the package doc)
	state     sessionState
	restoring bool
	closed    bool
}

var _ session.Runtime = (*Runtime)(nil)

// build is Build without its span: a handler for the session on the
// shared server, restored from its recorded state.
func (b *Builder) build(ctx context.Context, in session.BuildInput) (session.Runtime, error) {
	cfg := b.cfg
	r := &Runtime{id: in.SessionID, b: b, persist: in.StateChanged}
	r.log = *slog.New((*sessionLog)(r))
	r.scope = newSessionScope(r, in)
	r.sched = in.Schedules // scope_schedule.go
	r.asks = newAsks(r, in)
	if cfg.CodeMode != nil {
		r.code = newCodeRuntime(cfg.CodeMode, in.SessionID, in.Leases, true, r.journalSource(in))
		r.code.fwd = b.fwd // a resume from another session travels as an AskContinue (codemode_continue.go)
	}
	if len(in.State) > 0 {
		r.events = b.events.newLog(in.SessionID, in.Principal)
		r.events.sinceTrim = in.UntrimmedEventBytes
	} else {
		r.events = b.events.createdLog(in.SessionID, in.Principal)
	}
	r.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server }, &mcp.StreamableHTTPOptions{
		EventStore: r.events,
		// The gateway already applied DNS-rebinding and origin protection
		// and the body limit, on the client's real connection.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        -1,
		Logger:                     &r.log,
	})
	if old, loaded := b.runtimes.Swap(in.SessionID, r); loaded {
		// A runtime not yet closed (a disposal racing this build): the new
		// one serves the session from now on.
		r.log.Warn("mcpruntime: a runtime of this session was still registered", "old_closed", old.(*Runtime).isClosed())
	}
	if len(in.State) > 0 {
		if err := r.restore(ctx, in.State); err != nil {
			_ = r.Close(context.Background())
			return nil, err
		}
	}
	if r.code != nil && cfg.CodeMode.Durable && in.Grain != "" && len(in.State) > 0 {
		r.code.restore(ctx, b.runs) // a session being created has nothing to restore
	}
	if r.asks != nil && len(in.State) > 0 {
		r.asks.restore(ctx)
	}
	return r, nil
}

// journalSource is the journal source of the session's code runtime: nil
// unless code mode is durable and the session has a grain key; the
// runtime itself when its durable calls hold the key and epoch (the
// journal is made when the engine is, most sessions never run code);
// else a journal made now.
func (r *Runtime) journalSource(in session.BuildInput) journalSource {
	cm := r.b.cfg.CodeMode
	switch {
	case !cm.Durable || in.Grain == "":
		return nil
	case r.asks != nil && r.asks.grain == in.Grain && sameDeadlines(in):
		return r
	}
	return fixedJournal{engine.StoreJournal{Store: r.b.runs, Grain: in.Grain, EpochOf: in.Epoch, Publish: cm.Directory != nil,
		Deadlines: in.Deadlines, Stored: in.DeadlinesStored}}
}

// sameDeadlines reports whether a journal made later from the session's
// lease hooks (Runtime.journal) carries the deadline reminders in.Deadlines
// names (or none, as in does).
func sameDeadlines(in session.BuildInput) bool {
	d, ok := in.Leases.(session.DeadlineLeases)
	if !ok {
		return in.Deadlines == ""
	}
	name, _ := d.DeadlineReminders()
	return name == in.Deadlines
}

// journal implements journalSource: the durable code-mode journal of the
// session's grain, fenced by its epoch; it carries the pauses' deadline
// reminders (the session then writes neither: one transaction a pause,
// one a settle, instead of two each) when the lease hooks offer them.
func (r *Runtime) journal() engine.Journal {
	j := engine.StoreJournal{Store: r.b.runs, Grain: r.asks.grain, EpochOf: r.asks.epoch, Publish: r.b.cfg.CodeMode.Directory != nil}
	if d, ok := r.asks.leases.(session.DeadlineLeases); ok {
		j.Deadlines, j.Stored = d.DeadlineReminders()
	}
	return j
}

// growStack is the shared server's outermost receiving middleware: it
// grows the stack of go-sdk's handler goroutine (a new one per request)
// for a method that goes deep (growsStack) once, while it is shallow,
// instead of by the several copies its depth would make (see
// dispatch.GrowStack).
func growStack(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if growsStack(method) {
			dispatch.GrowStack()
		}
		return next(ctx, method, req)
	}
}

// growsStack reports whether a request of method grows its handler's
// stack past the goroutine's first size: a tool call (input validation,
// the tool) and an initialize (the session's state encoded by
// encoding/json's reflection and stored before the answer, see
// Runtime.record). Cheap requests (ping, lists) and notifications do not.
func growsStack(method string) bool {
	return method == "tools/call" || method == "initialize"
}

// recordState is the shared server's receiving middleware that tracks each
// session's handshake state (see Runtime.record).
func (b *Builder) recordState(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var h http.Header
		if ex := req.GetExtra(); ex != nil {
			h = ex.Header
		}
		r, ok := b.runtimeOf(h)
		if ok {
			if err := r.admitSubscribe(req); err != nil {
				return nil, err
			}
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		if ok {
			if err := r.record(method, req, res); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
}

// record stores a change of the session's handshake state in the session
// record before the request is answered: a client that got its initialize
// answer has a session any node can restore. (notifications/initialized
// is not stored: a restore always replays it after initialize.) A state
// that cannot be stored fails the request with the retryable restart
// error.
func (r *Runtime) record(method string, req mcp.Request, res mcp.Result) error {
	r.mu.Lock()
	changed := false
	if !r.restoring {
		switch p := req.GetParams().(type) {
		case *mcp.InitializeParams:
			if method == "initialize" {
				r.state.InitializeParams, changed = p, true
				if ir, ok := res.(*mcp.InitializeResult); ok {
					r.state.NegotiatedProtocolVersion = ir.ProtocolVersion
				}
			}
		case *mcp.InitializedParams:
			r.state.InitializedParams = p
		case *mcp.SetLoggingLevelParams:
			r.state.LogLevel, changed = p.Level, true
		case *mcp.SubscribeParams:
			if !slices.Contains(r.state.Subscriptions, p.URI) {
				r.state.Subscriptions, changed = append(r.state.Subscriptions, p.URI), true
			}
		case *mcp.UnsubscribeParams:
			if i := slices.Index(r.state.Subscriptions, p.URI); i >= 0 {
				r.state.Subscriptions, changed = slices.Delete(slices.Clone(r.state.Subscriptions), i, i+1), true
			}
		}
	}
	var snapshot []byte
	if changed {
		st := r.state
		st.InitializedParams = nil // replayed anyway
		snapshot, _ = json.Marshal(&st)
	}
	r.mu.Unlock()
	if snapshot == nil || r.persist == nil {
		return nil
	}
	if err := r.persist(snapshot); err != nil {
		r.log.Warn("mcpruntime: store the session's state", "method", method, "err", err)
		return &jsonrpc.Error{Code: exchange.CodeServerError, Message: exchange.MessageRestarting}
	}
	return nil
}

// sessionState is what the session record keeps of a session's MCP
// state: go-sdk's ServerSessionState and, since go-sdk's has no place for
// them (v1.8.0: "TODO: resource subscriptions"), the URIs the session
// subscribed to (resources/subscribe), in order. A record without the
// field (an older node's) has none; an older node reading a newer record
// ignores it.
type sessionState struct {
	mcp.ServerSessionState
	Subscriptions []string `json:"mcpgrainResourceSubscriptions,omitempty"`
}

// Bounds of the subscriptions a session record keeps: a subscribe beyond
// them is refused (invalid params) before the server sees it, so the
// record of one session stays small whatever its client sends.
const (
	maxSubscriptions        = 64
	maxSubscriptionURIBytes = 2048
)

// admitSubscribe refuses a resources/subscribe the session record could
// not keep: a URI over maxSubscriptionURIBytes, or a new one beyond
// maxSubscriptions.
func (r *Runtime) admitSubscribe(req mcp.Request) error {
	p, ok := req.GetParams().(*mcp.SubscribeParams)
	if !ok || p == nil {
		return nil
	}
	if len(p.URI) > maxSubscriptionURIBytes {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resources/subscribe: a URI of at most %d bytes", maxSubscriptionURIBytes)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.state.Subscriptions) >= maxSubscriptions && !slices.Contains(r.state.Subscriptions, p.URI) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resources/subscribe: a session subscribes to at most %d resources", maxSubscriptions)}
	}
	return nil
}

// restore replays the recorded handshake into the fresh handler.
func (r *Runtime) restore(ctx context.Context, raw []byte) error {
	var st sessionState
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("mcpruntime: decode session state: %w", err)
	}
	if st.InitializeParams == nil {
		return nil // never initialized: nothing to replay
	}
	r.mu.Lock()
	r.restoring, r.state = true, st
	r.mu.Unlock()
	r.events.muted.Store(true) // nobody resumes the replayed handshake's answers
	defer func() {
		r.events.muted.Store(false)
		r.mu.Lock()
		r.restoring = false
		r.mu.Unlock()
	}()
	version := st.NegotiatedProtocolVersion
	if version == "" {
		version = st.InitializeParams.ProtocolVersion
	}
	for i, step := range handshake(st) {
		if err := r.replay(ctx, step, i > 0, version); err != nil {
			return err
		}
	}
	return nil
}

// replayStep is one request of a replayed handshake and the status its
// answer must have.
type replayStep struct {
	method, id string // id "": a notification
	params     any
	want       int
}

// handshake is what restoring a session replays: initialize,
// notifications/initialized (whether or not the record has it: records no
// longer store it, since a client sends it right after initialize and
// nothing else may come before it), the log level if one was set, and the
// session's resource subscriptions (go-sdk's table of subscribers, and a
// pack's SubscribeHandler, see the restored session subscribe; one the
// server refuses now is answered with a JSON-RPC error, which the replay
// ignores).
func handshake(st sessionState) []replayStep {
	initialized := st.InitializedParams
	if initialized == nil {
		initialized = &mcp.InitializedParams{}
	}
	steps := []replayStep{
		{"initialize", `"mcpgrain-restore-initialize"`, st.InitializeParams, http.StatusOK},
		{"notifications/initialized", "", initialized, http.StatusAccepted},
	}
	if st.LogLevel != "" {
		steps = append(steps, replayStep{"logging/setLevel", `"mcpgrain-restore-level"`, &mcp.SetLoggingLevelParams{Level: st.LogLevel}, http.StatusOK})
	}
	for i, uri := range st.Subscriptions {
		steps = append(steps, replayStep{"resources/subscribe", fmt.Sprintf(`"mcpgrain-restore-subscribe-%d"`, i), &mcp.SubscribeParams{URI: uri}, http.StatusOK})
	}
	return steps
}

// replay serves one handshake step to go-sdk's handler; inSession says the
// session exists already (every step after initialize).
func (r *Runtime) replay(ctx context.Context, s replayStep, inSession bool, version string) error {
	params, err := json.Marshal(s.params)
	if err != nil {
		return fmt.Errorf("mcpruntime: encode %s params: %w", s.method, err)
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s`, s.method, params)
	if s.id != "" {
		body += `,"id":` + s.id
	}
	body += "}"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("mcpruntime: restore %s: %w", s.method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(exchange.HeaderIdentity, exchange.Caller{Session: r.id}.Encode())
	if inSession {
		req.Header.Set("Mcp-Session-Id", r.id)
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	var w answer
	r.serve(&w, req)
	if w.code() != s.want {
		return fmt.Errorf("mcpruntime: restore %s: status %d: %s", s.method, w.code(), bytes.TrimSpace(w.body.Bytes()))
	}
	if !inSession && w.Header().Get("Mcp-Session-Id") != r.id {
		return fmt.Errorf("mcpruntime: restore initialize: session id %q, want %q", w.Header().Get("Mcp-Session-Id"), r.id)
	}
	return nil
}

// answer is what go-sdk's handler wrote to a request the runtime makes
// itself, in process (a replayed handshake step, the closing DELETE): its
// status, headers and the start of its body, for an error message.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// answerBodyLimit is how much of an answer's body is kept.
const answerBodyLimit = 4 << 10

func (w *answer) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *answer) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *answer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if room := answerBodyLimit - w.body.Len(); room > 0 {
		w.body.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Flush implements http.Flusher (go-sdk flushes SSE answers): nothing to
// flush in memory.
func (w *answer) Flush() {}

// code is the answer's status (200 if the handler wrote none).
func (w *answer) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// serve hands one request to go-sdk's handler with the session id
// translated both ways (see the package doc).
func (r *Runtime) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		if exchange.HeaderValue(req.Header, "Mcp-Session-Id") != "" {
			req.Header["Mcp-Session-Id"] = []string{r.goSDKSessionID()}
		}
		r.handler.ServeHTTP(&closingGuard{ResponseWriter: w, r: r}, req)
		return
	}
	// The POST's writers, its exchange and its two header values in one
	// allocation (a handler that appends to a value copies it: each
	// slice is full).
	p := &postServe{}
	// The fields by their canonical names (Get and Set would canonicalize
	// them on every request).
	if exchange.HeaderValue(req.Header, "Mcp-Session-Id") != "" {
		p.values[0] = r.goSDKSessionID()
		req.Header["Mcp-Session-Id"] = p.values[0:1:1]
	}
	rw, ex, guard := &p.refusal, &p.ex, &p.guard
	rw.ResponseWriter = w
	tok := r.b.newExchangeToken()
	p.values[1] = tok
	req.Header[headerExchange] = p.values[1:2:2] // replaces any value a client sent
	ex.done = req.Context().Done()
	r.b.cuts.Store(tok, ex)
	defer func() {
		r.b.cuts.Delete(tok)
		ex.over() // after go-sdk's handler: its answers are written or dropped
	}()
	guard.ResponseWriter, guard.r, guard.written = rw, r, &ex.written
	r.handler.ServeHTTP(guard, req)
	rw.finish(req)
}

// goSDKSessionID is the id go-sdk's handler knows the session by.
func (r *Runtime) goSDKSessionID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sdkID
}

// postServe holds what serve makes for a POST.
type postServe struct {
	refusal refusalWriter
	ex      postExchange
	guard   closingGuard
	values  [2]string // the values of Mcp-Session-Id and the exchange token header
}

// ServeExchange serves one HTTP exchange of the session with go-sdk's
// handler. It blocks until the response is complete (for a GET stream,
// until the client goes away or the runtime closes).
func (r *Runtime) ServeExchange(w http.ResponseWriter, req *http.Request) {
	r.exchanges.Add(1)
	defer r.exchanges.Add(-1)
	if req.Method == http.MethodPost {
		r.posts.Add(1)
		defer r.posts.Add(-1)
	}
	sw := &streamWriter{ResponseWriter: w, n: &r.streams}
	defer sw.end()
	r.serve(sw, req)
}

func (r *Runtime) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// closingGuard keeps a runtime being disposed from ending its session for
// the client. Close ends go-sdk's session (a DELETE to the handler), and
// go-sdk answers 404 to a request that reaches the handler afterwards —
// an exchange the grain accepted just before it disposed this runtime
// (ownership lost, cap eviction, idle). go-sdk's client takes a 404 as
// the end of its session, but the session lives on, in the next runtime:
// such a request gets the restart envelope instead, and the client retries.
type closingGuard struct {
	http.ResponseWriter
	r        *Runtime
	written  *atomic.Int64 // bytes written to the response (nil: not counted)
	swallow  bool          // the 404 was replaced: drop its body
	wroteHdr bool
}

func (g *closingGuard) WriteHeader(status int) {
	if g.wroteHdr {
		return
	}
	g.wroteHdr = true
	if id := exchange.HeaderValue(g.Header(), "Mcp-Session-Id"); id != "" {
		// go-sdk's id of the session (an initialize's answer): the client
		// keeps using the grain's.
		g.r.mu.Lock()
		g.r.sdkID = id
		g.r.mu.Unlock()
		g.Header().Set("Mcp-Session-Id", g.r.id)
	}
	if status == http.StatusNotFound && g.r.isClosed() {
		g.swallow = true
		for k := range g.Header() {
			delete(g.Header(), k)
		}
		exchange.WriteRestarting(g.ResponseWriter, nil)
		return
	}
	g.ResponseWriter.WriteHeader(status)
}

func (g *closingGuard) Write(p []byte) (int, error) {
	if !g.wroteHdr {
		g.WriteHeader(http.StatusOK)
	}
	if g.swallow {
		return len(p), nil
	}
	n, err := g.ResponseWriter.Write(p)
	if g.written != nil {
		g.written.Add(int64(n))
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the tunnel's writer (Flush).
func (g *closingGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// Flush implements http.Flusher.
func (g *closingGuard) Flush() {
	if f, ok := g.ResponseWriter.(http.Flusher); ok && !g.swallow {
		f.Flush()
	}
}

// UntrimmedEventBytes implements session.Runtime.
func (r *Runtime) UntrimmedEventBytes() int64 { return r.events.untrimmed() }

// ActiveStreams implements session.Runtime: POST exchanges in flight. An
// open standalone GET stream does not pin the runtime (as in executor).
func (r *Runtime) ActiveStreams() int { return int(r.posts.Load()) }

// PausedExecutions implements session.Runtime: the pauses that live only
// in memory (durable ones do not keep the runtime resident).
func (r *Runtime) PausedExecutions() int {
	n := 0
	if r.asks != nil {
		n, _ = r.asks.counts()
	}
	e := r.builtEngine()
	if e == nil {
		return n
	}
	return n + e.PausedCount() - e.DurablePausedCount()
}

// DurablePausedExecutions implements session.Runtime.
func (r *Runtime) DurablePausedExecutions() int {
	n := 0
	if r.asks != nil {
		_, n = r.asks.counts()
	}
	e := r.builtEngine()
	if e == nil {
		return n
	}
	return n + e.DurablePausedCount()
}

// DurablePause implements session.Runtime.
func (r *Runtime) DurablePause(execID string) bool {
	if r.asks != nil && r.asks.durablePause(execID) {
		return true
	}
	e := r.builtEngine()
	return e != nil && e.IsDurable(execID)
}

// RunningExecutions implements session.Runtime.
func (r *Runtime) RunningExecutions() int {
	n := 0
	if r.asks != nil {
		n = int(r.asks.running.Load()) // continuations (scope_ask_continue.go)
	}
	e := r.builtEngine()
	if e == nil {
		return n
	}
	return n + e.RunningCount()
}

// builtEngine is the code runtime's engine if it was built (nil: no code
// mode, or nothing ran, paused or was restored: nothing to count).
func (r *Runtime) builtEngine() *engine.Engine {
	if r.code == nil {
		return nil
	}
	return r.code.built()
}

// JournaledPause implements session.PauseJournal: every question of an
// SDK durable call is journaled (a fresh runtime restores it), even while
// a handler waits for it in memory.
func (r *Runtime) JournaledPause(execID string) bool {
	return r.asks != nil && r.asks.has(execID)
}

// ResolveApproval implements session.Runtime.
func (r *Runtime) ResolveApproval(execID string, d *pb.ApprovalDecision) {
	if r.asks != nil && r.asks.resolve(execID, d) {
		return
	}
	if r.code != nil {
		r.code.resolve(execID, d)
	}
}

// PausedExecution implements session.Runtime.
func (r *Runtime) PausedExecution(execID string) (*pb.PausedExecution, bool) {
	if r.asks != nil {
		if p, ok := r.asks.paused(execID); ok {
			return p, true
		}
	}
	e := r.builtEngine()
	if e == nil {
		return nil, false
	}
	p, ok := e.Paused(execID, engine.System) // the session checked the caller's organization
	if !ok {
		return nil, false
	}
	return pausedProto(p), true
}

// PausedExecutionList implements session.Runtime.
func (r *Runtime) PausedExecutionList() []*pb.PausedExecution {
	var out []*pb.PausedExecution
	if r.asks != nil {
		out = r.asks.list()
	}
	e := r.builtEngine()
	if e == nil {
		return out
	}
	for _, p := range e.PausedList() {
		out = append(out, pausedProto(p))
	}
	return out
}

// ResumeForModel implements session.Runtime.
func (r *Runtime) ResumeForModel(ctx context.Context, execID string, m *pb.ExecutionResumeForModel) (string, pb.ExecutionReply_Status) {
	if r.code == nil {
		return "", pb.ExecutionReply_STATUS_EXPIRED
	}
	return r.code.resumeForModel(ctx, execID, m)
}

// Ended implements session.Runtime: the session ended (DELETE, expiry), so
// closing does not trim its event log (what it stored is pruned with the
// rest within the hour).
func (r *Runtime) Ended() { r.events.ended.Store(true) }

// Close implements session.Runtime: it closes the MCP session (ending its
// streams), ends its executions and flushes the event log.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	id := r.sdkID
	r.mu.Unlock()
	r.b.runtimes.CompareAndDelete(r.id, r)
	if r.asks != nil {
		r.asks.close() // a handler waiting in Ask returns (the call stays open)
	}
	if r.code != nil {
		// First: go-sdk's session closes only once its handlers returned,
		// and a resume waiting for a decision returns when this wakes it.
		r.code.Shutdown()
	}
	if id != "" {
		// Closing the handler's session is only possible through DELETE.
		if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, "/mcp", nil); err == nil {
			req.Header.Set("Mcp-Session-Id", id)
			r.handler.ServeHTTP(&answer{}, req)
		}
	}
	return r.events.close(ctx)
}

// headerExchange carries, from serve to bindCall, the token of the POST
// exchange that carries a request (go-sdk hands handlers the request's
// headers, not its context).
const headerExchange = "X-Mcpgrain-Exchange-Token"

// newExchangeToken returns an exchange token unique on the node: the
// next of a counter, in base 36. It only has to tell the node's POST
// exchanges in flight apart (serve replaces any value a client sent),
// and it stays with a resident session: go-sdk keeps the headers of a
// session's last request (a random 37-byte token was 48 B of every
// resident session; this one is a few bytes).
func (b *Builder) newExchangeToken() string {
	return strconv.FormatUint(b.tokens.Add(1), 36)
}

// exchangeOf is the POST exchange whose headers are h, and the channel
// closed once it ended: nil and nil if h carries no token (a request not
// served through serve), nil and a closed channel if its exchange is
// already over.
func (r *Runtime) exchangeOf(h http.Header) (*postExchange, <-chan struct{}) {
	tok := exchange.HeaderValue(h, headerExchange)
	if tok == "" {
		return nil, nil
	}
	if ex, ok := r.b.cuts.Load(tok); ok {
		return ex, ex.done
	}
	return nil, closedChan
}

// postExchange is one POST exchange in flight: its request's end, the
// bytes written to its response, and the durable calls it carried whose
// handlers returned, to complete once their answers went out on it.
type postExchange struct {
	done    <-chan struct{}
	written atomic.Int64

	mu      sync.Mutex
	ended   bool
	pending []pendingAnswer
}

// pendingAnswer is a returned run whose answer was not written yet when
// its handler returned: written bytes had gone out on the exchange then.
type pendingAnswer struct {
	run     *callRun
	written int64
}

// await registers cr, whose handler returned, to be completed once the
// exchange is over if its answer went out (bytes were written after now);
// false if the exchange is over already (the answer may not have gone
// out).
func (ex *postExchange) await(cr *callRun) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.ended {
		return false
	}
	ex.pending = append(ex.pending, pendingAnswer{run: cr, written: ex.written.Load()})
	return true
}

// over ends the exchange (go-sdk's handler returned: nothing more is
// written to it): each awaiting run's call is completed if its answer
// went out, and stays open for the client's retry if not (the request
// ended first: go-sdk then drops the answer).
func (ex *postExchange) over() {
	ex.mu.Lock()
	ex.ended = true
	pending := ex.pending
	ex.pending = nil
	ex.mu.Unlock()
	for _, p := range pending {
		p.run.settle(ex.written.Load() > p.written)
	}
}

// sessionLog is a Runtime as the slog.Handler of its logger: the node's
// handler, with the session's id added to a record when one is logged.
type sessionLog Runtime

// inner is the node's handler.
func (l *sessionLog) inner() slog.Handler { return l.b.cfg.Logger.Handler() }

// attr is the session's attribute.
func (l *sessionLog) attr() slog.Attr { return slog.String("session", l.id) }

// Enabled implements slog.Handler.
func (l *sessionLog) Enabled(ctx context.Context, lv slog.Level) bool {
	return l.inner().Enabled(ctx, lv)
}

// Handle implements slog.Handler: the session's attribute first, then the
// record's.
func (l *sessionLog) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(l.attr())
	r.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
	return l.inner().Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (l *sessionLog) WithAttrs(as []slog.Attr) slog.Handler {
	return l.inner().WithAttrs(append([]slog.Attr{l.attr()}, as...))
}

// WithGroup implements slog.Handler.
func (l *sessionLog) WithGroup(name string) slog.Handler {
	return l.inner().WithAttrs([]slog.Attr{l.attr()}).WithGroup(name)
}
