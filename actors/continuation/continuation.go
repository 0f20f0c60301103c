// Package continuation hosts the 2026-07-28 (sessionless) side of MCP.
//
// In that protocol era there is no session: every request carries what the
// server needs, and a request that needs more input from the client returns
// resultType "input_required" with an opaque requestState; the client
// retries the same request with inputResponses and that requestState
// (SEP-2322). mcpgrain serves such requests on continuation grains: the
// gateway sends a request without requestState to a continuation grain on
// its own node, and a retry to the grain named in its requestState.
//
// The continuation grains of a node share one go-sdk server built from the
// node's tool packs, behind go-sdk's stateless Streamable HTTP handler (as
// the session grains share theirs): a grain costs only its own code
// runtime, and a change of the server's lists reaches every listen stream
// of the node (and, through the node's catalog, of the cluster:
// [pb.CatalogChange]). Code-mode tool calls are served by the code runtime
// of the grain the request reached. A server middleware seals
// every requestState it returns (owner grain, principal, expiry, the tool's
// own state; see exchange/requeststate) and verifies and unwraps the one a
// retry brings, so a tool only ever sees its own state, and a forged,
// expired, foreign or misrouted state never reaches it.
//
// Continuation grains keep no record: a request costs no store write.
// Tools whose input_required results carry all their state in requestState
// (the protocol's design) resume on any node. Code-mode executions are the
// exception: with durable code mode (CodeMode.Durable and a Store) the
// grain journals them like a session does (the grain is then written into
// existence at its first exchange, once per activation: Kind.CreatedByWrite),
// so an execution paused for approval survives the grain's passivation, a
// restart and the loss of its node: the retry that brings the decision
// goes to the grain named in its requestState, wherever it now lives, and
// that activation restores the execution from its journal on demand.
// The journal also publishes each pause in the execution directory, so
// the approval surfaces list it and may decide it: the decision
// ([pb.ExecutionDecide]) reaches this grain (exchange.OwnerKind), which
// applies it (mcpruntime.CodeRuntime.Decide), and the client's retry then
// gets the outcome. Without durable code mode the grains are ephemeral,
// their pauses unpublished (only the client answers them), and a node
// loss costs what was in flight.
//
// The SDK's durable tool calls (mcpgrain.Step and Ask, docs/sdk.md §4)
// live on the same grains when Config.Calls is set: a tool call whose
// handler steps or asks is journaled as a call of the grain that served
// it (mcpruntime.GrainCalls), its question published in the execution
// directory and returned to the client as input_required with a
// requestState naming the call; surfaces' decisions reach the grain as
// code mode's do, and the client's retry runs the handler again against
// the journal.
package continuation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// KindName is the continuation grain kind.
const KindName = exchange.KindContinuation

// Config configures the continuation grains of a node.
type Config struct {
	// NewServer builds a server with the node's tool packs (required);
	// codeMode registers the grain's execute/resume tools (may be nil).
	NewServer mcpruntime.ServerFactory
	// CodeMode configures the execution engine (nil: no code pack).
	CodeMode *mcpruntime.CodeMode
	// Store journals code-mode executions when CodeMode.Durable is set
	// (required then).
	Store engine.RunStore
	// Key seals requestState tokens; every node must share it (required,
	// at least requeststate.MinKeyLen bytes).
	Key []byte
	// StateTTL is how long an issued requestState stays valid. Default 15m.
	StateTTL time.Duration
	// IdleTimeout passivates an idle continuation grain. Default 5m.
	IdleTimeout time.Duration
	// Logger logs problems. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics (node label added by the caller).
	Registerer prometheus.Registerer
	// Now is the clock for token expiry. Default time.Now.
	Now func() time.Time
	// ApplyCatalogChange applies a catalog change another node broadcast
	// (toolpacks.Catalog.ApplyLocal; nil: such messages are refused).
	ApplyCatalogChange func(name string) error
	// Middleware, if set, is a receiving middleware of the continuation
	// server, inside the one that unwraps requestState (the tasks
	// extension: actors/tasks).
	Middleware mcp.Middleware
	// Calls, if set, keeps the SDK's durable tool calls (Step, Ask) of the
	// grains: a grain then owns itself in the store at its first exchange
	// (Kind.CreatedByWrite), as with durable code mode. Nil: Step and Ask
	// are app.ErrNoCall.
	Calls store.Store
	// MayDecide reports whether a role may decide an Ask's question
	// (policy.Approvers.MayDecide; nil: no role may, only the approval
	// window's decline ends a question).
	MayDecide func(role string) bool
	// AskWindow is how long an Ask's question waits for a decision.
	// Default engine.DefaultApprovalWindow.
	AskWindow time.Duration
	// Later configures the grains' pending questions (the SDK's
	// AskLater): the approval links' origin, the per-principal cap and its
	// refusals' counter.
	Later mcpruntime.LaterConfig
}

// Host holds what the continuation grains of a node share: the server,
// its handler and the grains' code runtimes.
type Host struct {
	cfg       Config
	exchanges prometheus.Counter
	handler   http.Handler
	closeSrv  func()
	codes     sync.Map // grain id -> *mcpruntime.CodeRuntime
	calls     sync.Map // grain id -> *mcpruntime.GrainCalls
	streams   atomic.Int32
}

// OpenStreams is the number of open response streams of the node's
// continuation grains: requests answered with an SSE stream (listen
// streams among them), while they last (mcpgrain_active_streams).
func (h *Host) OpenStreams() int { return int(h.streams.Load()) }

// serve serves one exchange with the shared handler, counting its
// response while it is a stream.
func (h *Host) serve(w http.ResponseWriter, r *http.Request) {
	cw, end := mcpruntime.CountStream(w, &h.streams)
	defer end()
	h.handler.ServeHTTP(cw, r)
}

// NewHost returns the continuation host of a node.
func NewHost(cfg Config) (*Host, error) {
	if cfg.NewServer == nil {
		return nil, errors.New("continuation: Config.NewServer is required")
	}
	if err := requeststate.CheckKey(cfg.Key); err != nil {
		return nil, err
	}
	if cfg.durableCode() && cfg.Store == nil {
		return nil, errors.New("continuation: Config.Store is required with durable code mode")
	}
	if cfg.StateTTL <= 0 {
		cfg.StateTTL = 15 * time.Minute
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Host{cfg: cfg, exchanges: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcpgrain_continuation_exchanges_total",
		Help: "2026-07-28 (sessionless) MCP requests served by continuation grains on this node.",
	})}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(h.exchanges)
	}
	var codeMode func(*mcp.Server)
	if cfg.CodeMode != nil {
		codeMode = func(s *mcp.Server) { cfg.CodeMode.RegisterShared(s, h.codeOf) }
	}
	srv, closeSrv, err := cfg.NewServer(&mcp.ServerOptions{}, codeMode)
	if err != nil {
		return nil, fmt.Errorf("continuation: build the server: %w", err)
	}
	mws := []mcp.Middleware{h.stateMiddleware}
	if cfg.Middleware != nil {
		mws = append(mws, cfg.Middleware) // stateMiddleware(Middleware(bindCall(handler)))
	}
	mws = append(mws, h.bindCall)
	srv.AddReceivingMiddleware(mws...)
	h.closeSrv = closeSrv
	h.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:                  true,
		DisableLocalhostProtection: true, // applied by the gateway on the real connection
		MaxRequestBodyBytes:        -1,   // idem
		Logger:                     cfg.Logger,
	})
	return h, nil
}

// Close stops the shared server's background work (the packs').
func (h *Host) Close() {
	if h.closeSrv != nil {
		h.closeSrv()
	}
}

// codeOf is the code runtime of the grain a tool call reached.
func (h *Host) codeOf(req *mcp.CallToolRequest) (*mcpruntime.CodeRuntime, bool) {
	if req.Extra == nil {
		return nil, false
	}
	v, ok := h.codes.Load(exchange.SessionOf(req.Extra.Header))
	if !ok {
		return nil, false
	}
	return v.(*mcpruntime.CodeRuntime), true
}

// durableCode reports whether code-mode executions are journaled.
func (cfg Config) durableCode() bool { return cfg.CodeMode != nil && cfg.CodeMode.Durable }

// durable reports whether the grains journal anything: code-mode
// executions or the SDK's durable tool calls.
func (cfg Config) durable() bool { return cfg.durableCode() || cfg.Calls != nil }

// Kind returns the continuation grain kind.
func (h *Host) Kind() grain.Kind {
	durable := h.cfg.durable()
	return grain.Kind{
		Name:           KindName,
		IdleTimeout:    h.cfg.IdleTimeout,
		Ephemeral:      !durable,
		CreatedByWrite: durable,
		New:            func(id string) grain.Grain { return &cont{h: h, id: id, exchanges: map[string]context.CancelFunc{}} },
	}
}

// cont is one continuation grain activation.
type cont struct {
	h         *Host
	id        string
	ready     bool
	code      *mcpruntime.CodeRuntime
	calls     *mcpruntime.GrainCalls // nil: no durable tool calls
	exchanges map[string]context.CancelFunc
	// serving counts the requests whose handler has not returned yet
	// (from the turn that starts them): a graceful deactivation waits for
	// them, since cancelling one cuts its execution or its answer.
	serving atomic.Int32
}

func (c *cont) Activate(context.Context, grain.Context, []byte) error { return nil }

// ensure prepares the grain for its first exchange: its ownership in the
// store if it journals anything, its code runtime if code mode is on, its
// durable tool calls if the SDK's are kept.
func (c *cont) ensure(ctx context.Context, g grain.Context) error {
	if c.ready {
		return nil
	}
	if c.h.cfg.durable() {
		// The journals are fenced by the epoch: own the grain first.
		if err := g.Own(ctx); err != nil {
			return err
		}
	}
	if c.h.cfg.Calls != nil {
		calls, err := mcpruntime.NewGrainCalls(mcpruntime.GrainCallsConfig{
			Store: c.h.cfg.Calls, Grain: grain.Key(g.Kind(), g.Identity()), Owner: c.id, Epoch: g.Epoch(),
			Window: c.h.cfg.AskWindow, MayDecide: c.h.cfg.MayDecide, Now: c.h.cfg.Now, Logger: c.h.cfg.Logger, Later: c.h.cfg.Later,
			Alarms: mcpruntime.GrainAlarms(g),
		})
		if err != nil {
			return err
		}
		c.calls = calls
		c.h.calls.Store(c.id, calls)
	}
	if c.h.cfg.CodeMode != nil {
		// Pauses here have no lease or deadline reminder: the client's
		// retry brings the decision, and the engine declines a decision
		// that comes after the deadline (EnforceDeadlines). Without a
		// journal the grain's idle timeout bounds how long a pause lives;
		// with one, a pause outlives the activation and is restored when
		// its retry comes.
		var journal engine.Journal
		if c.h.cfg.durableCode() {
			// Publish: the pause is in the execution directory, so every
			// approval surface lists it and may decide it (Decide), as a
			// session's or a task's; the client's retry then gets what it
			// came to.
			journal = engine.StoreJournal{Store: c.h.cfg.Store, Grain: grain.Key(g.Kind(), g.Identity()), Epoch: g.Epoch(), Publish: true}
		}
		c.code = mcpruntime.NewCodeRuntime(c.h.cfg.CodeMode, c.id, nil, journal)
		c.h.codes.Store(c.id, c.code)
	}
	c.ready = true
	return nil
}

func (c *cont) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	switch m := msg.(type) {
	case *pb.HttpExchange:
		if err := c.ensure(ctx, g); err != nil {
			return nil, ensureError(err)
		}
		c.serving.Add(1)
		started := &pb.ExchangeStarted{Status: pb.SessionReply_STATUS_OK, Node: g.Node(), GrainAddress: g.Self().GetAddress(), GrainId: g.Self().GetId()}
		answer := g.Defer()
		cancel, err := exchange.Start(ctx, g.ActorSystem(), g.Self(), m, exchange.IdentityValue(m, c.id, true), func(w http.ResponseWriter, r *http.Request) {
			defer c.serving.Add(-1)
			c.h.serve(w, r)
		}, exchange.AckWith(answer, started))
		if err != nil {
			c.serving.Add(-1)
			answer(nil, grain.Reject("continuation: %v", err))
			return nil, nil
		}
		c.exchanges[m.GetExchangeId()] = cancel
		c.h.exchanges.Inc()
		return nil, nil // answered with the first frame (exchange.Start)
	case *pb.ExchangeCancel:
		if cancel, ok := c.exchanges[m.GetExchangeId()]; ok {
			cancel()
		}
		return &pb.ExchangeCancelled{}, nil
	case *pb.ExecutionDecide:
		return c.decide(ctx, g, m)
	case *pb.CatalogChange:
		if c.h.cfg.ApplyCatalogChange == nil {
			return nil, grain.Reject("continuation: this node takes no catalog changes")
		}
		if err := c.h.cfg.ApplyCatalogChange(m.GetName()); err != nil {
			return nil, grain.Reject("continuation: %v", err)
		}
		return &pb.CatalogChanged{}, nil
	default:
		return nil, grain.Reject("continuation: unsupported request %T", msg)
	}
}

// ensureError is the answer to a request the grain could not be prepared
// for (ensure).
func ensureError(err error) error {
	if errors.Is(err, store.ErrFenced) || store.Unavailable(err) {
		return err // the activation's answer to a lost grain or an unreachable store
	}
	return &grain.Error{Code: pb.GrainError_CODE_UNAVAILABLE, Message: "continuation: prepare the grain: " + err.Error()}
}

// decisionTexts are the confirmations of a decision (as a session's).
var decisionTexts = map[string]string{"accept": "I've accepted it", "decline": "I've declined it", "cancel": "I've cancelled it"}

// decide takes an approval surface's decision for one of the grain's
// paused executions (mcpruntime.CodeRuntime.Decide). The answer, and the
// decision's application (the code runs on until it pauses again or
// ends), happen off the grain's turn, so its other requests are not held
// up; a graceful deactivation waits for them like for a request.
func (c *cont) decide(ctx context.Context, g grain.Context, m *pb.ExecutionDecide) (proto.Message, error) {
	text, ok := decisionTexts[m.GetAction()]
	if !ok {
		return nil, grain.Reject("continuation: action must be accept, decline or cancel")
	}
	if !c.h.cfg.durable() {
		return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_NOT_FOUND}, nil // nothing published here
	}
	if err := c.ensure(ctx, g); err != nil {
		return nil, ensureError(err)
	}
	// Only the grain's owner answers a decision: an activation that lost
	// its grain without knowing it yet (its node was frozen while the
	// grain moved) would answer OK for a decision its fenced journal then
	// refuses, while the new owner applies another (the chaos run's
	// "two decisions"). A transaction with no writes checks the epoch; a
	// fenced one stops this activation and the surface's retry reaches
	// the owner.
	if err := g.Commit(ctx, store.Writes{}); err != nil {
		return nil, ensureError(err)
	}
	code, calls := c.code, c.calls
	answer := g.Defer()
	c.serving.Add(1)
	go func() {
		defer c.serving.Add(-1)
		st, apply, err := c.h.decideIn(context.WithoutCancel(ctx), code, calls, m)
		if err != nil {
			answer(nil, &grain.Error{Code: pb.GrainError_CODE_UNAVAILABLE, Message: "continuation: record the decision: " + err.Error()})
			return
		}
		reply := &pb.ExecutionReply{Status: st}
		if st == pb.ExecutionReply_STATUS_OK {
			reply.Text = text
		}
		answer(reply, nil)
		if apply != nil {
			apply()
		}
	}()
	return nil, nil
}

// decideIn takes decision m for a question of calls (an Ask's, taken at
// once) or else a paused execution of code (applied by apply).
func (h *Host) decideIn(ctx context.Context, code *mcpruntime.CodeRuntime, calls *mcpruntime.GrainCalls, m *pb.ExecutionDecide) (st pb.ExecutionReply_Status, apply func(), err error) {
	if calls != nil {
		st, found, err := calls.Decide(ctx, m)
		if err != nil || found {
			return st, nil, err
		}
	}
	if code == nil || !h.cfg.durableCode() {
		return pb.ExecutionReply_STATUS_NOT_FOUND, nil, nil
	}
	st, apply = code.Decide(ctx, m, h.cfg.CodeMode.Approvers.MayDecide)
	return st, apply, nil
}

// bindCall is the continuation server's receiving middleware that makes
// every tools/call of a grain keeping durable tool calls a possible
// durable call (mcpruntime.BindGrainCalls). A retry whose requestState
// names another tool call gets the invalid-requestState error, and its
// handler does not run.
func (h *Host) bindCall(next mcp.MethodHandler) mcp.MethodHandler {
	return mcpruntime.BindGrainCalls(mcpruntime.GrainCallsIn(h.calls.Load), bindError)(next)
}

// bindError is the answer of a tools/call whose durable call could not be
// bound: a foreign call's retry is an invalid requestState; any other
// failure (the store) the retryable restart error.
func bindError(err error) error {
	if errors.Is(err, mcpruntime.ErrForeignCall) {
		return invalidState()
	}
	return &jsonrpc.Error{Code: exchange.CodeServerError, Message: exchange.MessageRestarting}
}

// HandleLocal receives exchange completions, and the reminders its
// pending questions arm (mcpruntime.GrainAlarms).
func (c *cont) HandleLocal(ctx context.Context, g grain.Context, msg any) {
	if d, ok := msg.(*exchange.Done); ok {
		delete(c.exchanges, d.ID)
		return
	}
	mcpruntime.ApplyAlarm(ctx, g, msg)
}

// OnReminder declines a pending question (the SDK's AskLater) whose
// approval window lapsed (mcpruntime.LaterReminderFired); any other
// reminder is dropped.
func (c *cont) OnReminder(ctx context.Context, g grain.Context, fired *pb.ReminderFired) error {
	if err := c.ensure(ctx, g); err != nil {
		return ensureError(err)
	}
	if ok, err := mcpruntime.LaterReminderFired(ctx, g, c.calls, fired); ok || err != nil {
		return err
	}
	return g.CancelReminders(ctx, fired.GetName())
}

// requestDrain bounds how long a graceful deactivation (node stop, move,
// idle) waits for the requests in flight before it cuts them.
const requestDrain = 5 * time.Second

func (c *cont) Deactivate(_ context.Context, _ grain.Context, reason grain.Reason) {
	if n := c.serving.Load(); n > 0 && reason != grain.ReasonOwnershipLost {
		// Every sessionless request is one POST, and an execution runs
		// inside the request that started or resumed it. A cut call has an
		// unknown outcome (execution_interrupted unless idempotent), and
		// the client's retry of a cut execute runs the code again from the
		// start: let the requests finish (or pause) and answer first.
		c.h.cfg.Logger.Info("continuation: waiting for requests in flight before deactivating", "grain", c.id, "requests", n, "reason", string(reason))
		deadline := time.NewTimer(requestDrain)
		tick := time.NewTicker(5 * time.Millisecond)
	wait:
		for c.serving.Load() > 0 {
			select {
			case <-deadline.C:
				c.h.cfg.Logger.Warn("continuation: requests still in flight after the drain; cutting them", "grain", c.id, "requests", c.serving.Load())
				break wait
			case <-tick.C:
			}
		}
		deadline.Stop()
		tick.Stop()
	}
	for _, cancel := range c.exchanges {
		cancel()
	}
	if c.calls != nil {
		c.h.calls.CompareAndDelete(c.id, c.calls)
	}
	if c.code != nil {
		c.h.codes.CompareAndDelete(c.id, c.code)
		c.code.Shutdown()
	}
}

func principalOf(req mcp.Request) (user, org string) {
	ex := req.GetExtra()
	if ex == nil || ex.Header == nil {
		return "", ""
	}
	p := exchange.PrincipalOf(ex.Header)
	return p.GetUser(), p.GetOrg()
}

// invalidState is the JSON-RPC error a bad requestState gets.
func invalidState() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState"}
}

// stateMiddleware unwraps incoming requestState tokens and seals outgoing
// ones (see the package doc).
func (h *Host) stateMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		user, org := principalOf(req)
		owner := ""
		if ex := req.GetExtra(); ex != nil && ex.Header != nil {
			owner = exchange.SessionOf(ex.Header) // the grain serving the request
		}
		state := requestStateOf(req.GetParams())
		if state != nil && *state != "" {
			claims, err := requeststate.Verify(h.cfg.Key, *state, h.cfg.Now())
			if err != nil || claims.User != user || claims.Org != org || claims.Owner != owner {
				return nil, invalidState()
			}
			*state = claims.Inner
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		if out, needsInput := resultStateOf(res); out != nil && (*out != "" || needsInput) {
			*out = requeststate.Sign(h.cfg.Key, requeststate.Claims{
				Owner: owner, User: user, Org: org, Expires: h.cfg.Now().Add(h.cfg.StateTTL), Inner: *out,
			})
		}
		return res, nil
	}
}

// requestStateOf points at the requestState field of params that have one.
func requestStateOf(p mcp.Params) *string {
	switch p := p.(type) {
	case *mcp.CallToolParamsRaw:
		return &p.RequestState
	case *mcp.CallToolParams:
		return &p.RequestState
	case *mcp.GetPromptParams:
		return &p.RequestState
	case *mcp.ReadResourceParams:
		return &p.RequestState
	}
	return nil
}

// resultStateOf points at the requestState field of results that have one,
// and reports whether the result asks for input.
func resultStateOf(r mcp.Result) (*string, bool) {
	switch r := r.(type) {
	case *mcp.CallToolResult:
		return &r.RequestState, r.InputRequests != nil
	case *mcp.GetPromptResult:
		return &r.RequestState, r.InputRequests != nil
	case *mcp.ReadResourceResult:
		return &r.RequestState, r.InputRequests != nil
	}
	return nil, false
}
