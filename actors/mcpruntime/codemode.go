package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// CodeMode configures the execution engine of every session (the "code"
// tool pack).
type CodeMode struct {
	// Tools are the callable tool sources (required).
	Tools *tools.Registry
	// APIBudget bounds the TypeScript declarations of the sources'
	// operations in the execute description, in bytes (zero:
	// tools.DefaultDeclarationBudget; negative: none).
	APIBudget int
	// Policy decides approvals (nil: the sources' defaults).
	Policy *policy.Set
	// Limits bound each execution.
	Limits sandbox.Limits
	// Window is the approval window (zero: engine.DefaultApprovalWindow).
	Window time.Duration
	// PublicURL is the origin of approval links (default: the request host).
	PublicURL string
	// Logger logs directory failures. Default slog.Default().
	Logger *slog.Logger
	// Clock tells time. Default the system clock.
	Clock clock.Clock
	// Lookup finds the session that owns an execution (the directory).
	Lookup func(ctx context.Context, execID string) (directory.Execution, error)
	// Directory, when set, is where sessions publish their pauses (and mark
	// them settled) before the paused result reaches the client, so an
	// approver who acts at once finds the execution.
	Directory Directory
	// Forward sends a resume to the session that owns an execution as an
	// ExecutionResumeForModel. A session's runtime sends an AskContinue
	// first (Config.Continue: docs/sdk.md §6, "One pause path") and this
	// only to an owner of an earlier release; a continuation or task
	// grain's code runtime sends this alone.
	Forward func(ctx context.Context, sessionID string, m *pb.ExecutionResumeForModel) (*pb.ExecutionReply, error)
	// Approvers is who may decide a pause from inside an MCP session (the
	// model's resume, native elicitation, a 2026-07-28 retry). Default
	// policy.ApproversMember.
	Approvers policy.Approvers
	// api is the declarations last rendered (RefreshAPI), nil until the
	// first registration renders them.
	api atomic.Pointer[string]
	// Durable journals every execution in the store (the runtime's
	// Config.Store; a continuation host's Store), so a paused execution
	// survives passivation, restarts and node loss: a fresh session
	// runtime restores its pauses by replay, a continuation grain restores
	// one when its retry comes.
	Durable bool
	// Expose are the tool sources whose tools every session also lists as
	// MCP tools of its own, "<source>.<tool>" (pass-through; see
	// codemode.Passthrough). Their tools are listed when a server is
	// built, and again whenever a source that can tell (Watch, as
	// *mcpupstream.Source does) says they changed. Each must be one of
	// Tools' sources.
	Expose []ExposedSource
}

// ExposedSource is a tool source that can list its tools as MCP tools (an
// upstream MCP server: *mcpupstream.Source).
type ExposedSource interface {
	// Name is the source name.
	Name() string
	// MCPTools lists the source's tools as its MCP server lists them.
	MCPTools(ctx context.Context) []*mcp.Tool
}

// exposeTimeout bounds listing the tools of the exposed sources.
const exposeTimeout = 10 * time.Second

// Directory is the part of the execution directory (directory.Store) a session's
// code runtime writes.
type Directory interface {
	PutExecution(ctx context.Context, e directory.Execution) error
	SettleExecutions(ctx context.Context, at time.Time, execIDs ...string) error
}

// directoryTimeout bounds one directory write.
const directoryTimeout = 5 * time.Second

// ForwardTimeout bounds a cross-session resume (executor's
// MODEL_RESUME_FORWARD_TIMEOUT_MS).
const ForwardTimeout = 10 * time.Second

// CodeRuntime runs the executions of one grain (a session, or a
// continuation grain for sessionless clients) and serves the code pack's
// tools for it.
type CodeRuntime = codeRuntime

// NewCodeRuntime returns the code runtime of grain ownerID; hooks (may be
// nil) receive pause lifecycles; journal (may be nil) makes its executions
// durable, restored on demand ([engine.Engine.RestorePaused]). Its pauses
// are in the execution directory only if the journal publishes them
// (engine.StoreJournal.Publish: a continuation's or a task's), and then
// the grain takes approval surfaces' decisions through
// [CodeRuntime.Decide].
func NewCodeRuntime(cfg *CodeMode, ownerID string, hooks engine.Hooks, journal engine.Journal) *CodeRuntime {
	var src journalSource
	if journal != nil {
		src = fixedJournal{journal}
	}
	return newCodeRuntime(cfg, ownerID, hooks, false, src)
}

// Register adds the code pack's tools to s, served by this runtime alone
// (a toolpacks.Options.CodeMode for a server of one grain: a task's).
func (c *codeRuntime) Register(s *mcp.Server) {
	registerCode(s, c.cfg, func(*mcp.CallToolRequest) (codemode.Runtime, bool) { return c, true })
}

// RegisterShared adds the code pack's tools to s, a server that many grains
// share: each call is served by the code runtime that of finds for it.
func (cfg *CodeMode) RegisterShared(s *mcp.Server, of func(*mcp.CallToolRequest) (*CodeRuntime, bool)) {
	registerCode(s, cfg, func(req *mcp.CallToolRequest) (codemode.Runtime, bool) {
		c, ok := of(req)
		if !ok || c == nil {
			return nil, false
		}
		return c, true
	})
}

// Shutdown ends every execution and wakes every resume waiting for a
// decision (it answers that nothing was decided): a waiting resume is a
// handler of go-sdk's session, and closing that session waits for its
// handlers.
func (c *codeRuntime) Shutdown() {
	c.mu.Lock()
	if !c.shut {
		c.shut = true
		if c.closed != nil {
			close(c.closed)
		}
	}
	c.mu.Unlock()
	c.engMu.Lock()
	c.engShut = true
	e := c.eng.Load()
	c.engMu.Unlock()
	if e != nil {
		e.Shutdown()
	}
}

// engine returns the runtime's engine, built on first use: most sessions
// never run code, and an engine (its maps, its context) is most of a
// code runtime's memory. One built after Shutdown is shut down at once
// (it refuses executions, as the runtime's would have).
func (c *codeRuntime) engine() *engine.Engine {
	if e := c.eng.Load(); e != nil {
		return e
	}
	c.engMu.Lock()
	defer c.engMu.Unlock()
	if e := c.eng.Load(); e != nil {
		return e
	}
	e := engine.New(engine.Config{Tools: c.cfg.Tools, Policy: c.cfg.Policy, Limits: c.cfg.Limits, ApprovalWindow: c.window(),
		Hooks: wakeHooks{Hooks: c.hooks, c: c}, Clock: c.cfg.Clock, Journal: c.journalOf(), Session: c.id, Logger: c.cfg.Logger,
		EnforceDeadlines: !c.session}) // a session's deadline reminder declines; a continuation has none
	if c.engShut {
		e.Shutdown()
	}
	c.eng.Store(e)
	return e
}

// built returns the engine if one was built (nil: none, so no execution
// ever ran, paused or was restored in this runtime).
func (c *codeRuntime) built() *engine.Engine { return c.eng.Load() }

// done returns the channel Shutdown closes (made on first use, under
// c.mu: only a browser-mode resume waiting for a decision needs it).
func (c *codeRuntime) done() <-chan struct{} {
	if c.closed == nil {
		if c.shut {
			return closedChan
		}
		c.closed = make(chan struct{})
	}
	return c.closed
}

// closedChan is a closed channel (done after Shutdown).
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// codeRuntime is the part of a Runtime that runs executions.
type codeRuntime struct {
	cfg *CodeMode
	id  string
	// eng is built on first use (engine), from hooks and journal; engMu
	// orders building it with Shutdown (engShut).
	eng     atomic.Pointer[engine.Engine]
	engMu   sync.Mutex
	engShut bool
	publish bool // write pauses to cfg.Directory
	session bool // a session's runtime (its deadline reminder declines a pause)
	shut    bool // Shutdown ran (guarded by mu; see closed)
	// (The flags next to engMu: the struct stays in the 128-byte size
	// class, issue 29.)
	hooks engine.Hooks
	// journal gives the engine its journal when it is built (nil: none):
	// a session's runtime, which makes it from its durable calls' grain
	// key and epoch, so a session that never runs code keeps no journal
	// (an engine.StoreJournal is 80 B).
	journal journalSource
	mu      sync.Mutex
	waiters map[string]chan waited // browser-mode resumes waiting for a decision (nil: none yet)
	// journaled are the durable pauses whose directory rows the journal
	// publishes and settles itself (engine.StoreJournal.Publish), in the
	// transactions that journal them.
	journaled map[string]bool
	// decided are the pauses an approval surface decided through Decide
	// whose decision is being applied; each channel closes once it was.
	decided map[string]chan struct{}
	// fwd is how a resume from another session is forwarded (shared by
	// a node's session runtimes: one pointer, not a field each — the
	// struct stays in the 128-byte size class).
	fwd *codeForward
	// closed ends the waits of WaitDecision (Shutdown); guarded by mu,
	// made by done when a wait needs it. shut: Shutdown ran.
	closed chan struct{}
}

// codeForward is how a code runtime forwards a resume from another
// session to the owner.
type codeForward struct {
	// timeout bounds a forwarded resume (ForwardTimeout; tests shorten
	// it).
	timeout time.Duration
	// cont sends a resume to the session that owns the execution as an
	// AskContinue (the runtime's Config.Continue, the route of the SDK's
	// ContinueAsk; nil: cfg.Forward's ExecutionResumeForModel only).
	cont func(ctx context.Context, sessionID string, m *pb.AskContinue) (*pb.AskContinueReply, error)
}

// defaultForward forwards with ForwardTimeout and the old message only.
var defaultForward = &codeForward{timeout: ForwardTimeout}

// journalSource makes a code runtime's journal (see codeRuntime.journal).
type journalSource interface{ journal() engine.Journal }

// fixedJournal is a journal made in advance.
type fixedJournal struct{ j engine.Journal }

func (f fixedJournal) journal() engine.Journal { return f.j }

// journalOf is the engine's journal (nil: none).
func (c *codeRuntime) journalOf() engine.Journal {
	if c.journal == nil {
		return nil
	}
	return c.journal.journal()
}

func newCodeRuntime(cfg *CodeMode, sessionID string, hooks engine.Hooks, publish bool, journal journalSource) *codeRuntime {
	if hooks == nil {
		hooks = noHooks{}
	}
	return &codeRuntime{cfg: cfg, id: sessionID, hooks: hooks, journal: journal, publish: publish && cfg.Directory != nil, session: publish,
		fwd: defaultForward}
}

// restore brings back the session's paused durable executions (after
// passivation, a restart or the loss of its node) by replaying their
// journals. A run that cannot be read is logged and left for the next
// activation.
func (c *codeRuntime) restore(ctx context.Context, st *runstore.Store) {
	runs, err := st.PausedRuns(ctx, c.id)
	if err != nil {
		c.log().Warn("mcpruntime: list paused executions to restore", "session", c.id, "err", err)
		return
	}
	for _, r := range runs {
		run, entries, err := st.GetRun(ctx, r.ID)
		if err != nil {
			c.log().Warn("mcpruntime: read paused execution to restore", "session", c.id, "run", r.ID, "err", err)
			continue
		}
		began := time.Now()
		out := c.engine().RestoreDormant(run, entries)
		c.log().Info("mcpruntime: restored paused execution", "session", c.id, "run", run.ID, "execution", run.PauseID,
			"calls", len(entries), "status", out.Status, "ms", time.Since(began).Milliseconds())
	}
}

func (c *codeRuntime) log() *slog.Logger {
	if c.cfg.Logger != nil {
		return c.cfg.Logger
	}
	return slog.Default()
}

func (c *codeRuntime) window() time.Duration {
	if c.cfg.Window > 0 {
		return c.cfg.Window
	}
	return engine.DefaultApprovalWindow
}

// registerCode adds the code pack's tools to a server shared by many
// sessions: each call is served by its own session's code runtime (of).
// Registering again replaces them (with the current declarations).
func registerCode(s *mcp.Server, cfg *CodeMode, of func(*mcp.CallToolRequest) (codemode.Runtime, bool)) {
	w := (&codeRuntime{cfg: cfg}).window()
	opts := codemode.Options{RuntimeOf: of, Window: w, Sources: cfg.Tools.Sources(), API: cfg.API(), PublicURL: cfg.PublicURL, Approvers: cfg.Approvers}
	codemode.Register(s, opts)
	if len(cfg.Expose) == 0 {
		return
	}
	opts.Logger = cfg.Logger
	for _, src := range cfg.Expose {
		expose(s, opts, src)
	}
}

// watchable is an exposed source that tells when its tools change
// (*mcpupstream.Source).
type watchable interface {
	Watch(changed func()) (stop func())
}

// expose registers the tools of src on s as pass-through tools, and, if
// src tells when they change, keeps them its tools until s is gone. It
// subscribes before it lists, so no change is missed, and applies one list
// at a time, so an older list never replaces a newer one.
func expose(s *mcp.Server, opts codemode.Options, src ExposedSource) {
	p := codemode.NewPassthrough(s, opts, src.Name())
	var mu sync.Mutex // orders the updates; guards stop
	var stop func()
	update := func() {
		mu.Lock()
		defer mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), exposeTimeout)
		defer cancel()
		if !p.Set(src.MCPTools(ctx)) && stop != nil { // the server is gone
			stop()
			stop = nil
		}
	}
	if w, ok := src.(watchable); ok {
		mu.Lock()
		stop = w.Watch(update)
		mu.Unlock()
	}
	update()
}

// apiRenderTimeout bounds reading the sources' operations to declare them
// (an upstream whose cached list is out of date is asked again).
const apiRenderTimeout = 5 * time.Second

// API returns the TypeScript declarations of the sources' operations
// that the execute description carries, rendering them on first use.
func (cfg *CodeMode) API() string {
	if p := cfg.api.Load(); p != nil {
		return *p
	}
	return cfg.RefreshAPI(context.Background())
}

// RefreshAPI renders the declarations again from the sources' current
// operations and returns them; the servers' execute tools show them once
// registered again (toolpacks.CodeAPIChange).
func (cfg *CodeMode) RefreshAPI(ctx context.Context) string {
	api := ""
	if cfg.APIBudget >= 0 && cfg.Tools != nil {
		ctx, cancel := context.WithTimeout(ctx, apiRenderTimeout)
		api = tools.Declarations(cfg.Tools.Operations(ctx), cfg.APIBudget)
		cancel()
	}
	cfg.api.Store(&api)
	return api
}

// Engine implements codemode.Runtime.
func (c *codeRuntime) Engine() *engine.Engine { return c.engine() }

// WaitDecision implements codemode.Runtime.
func (c *codeRuntime) WaitDecision(ctx context.Context, execID string, a engine.Access) (engine.Response, bool) {
	c.mu.Lock()
	if _, live := c.engine().Paused(execID, a); !live {
		c.mu.Unlock()
		return engine.Response{}, false // settled or unknown: nothing to wait for
	}
	ch := make(chan waited, 1)
	if c.waiters == nil {
		c.waiters = map[string]chan waited{}
	}
	c.waiters[execID] = ch
	done := c.done()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.waiters[execID] == ch {
			delete(c.waiters, execID)
		}
		c.mu.Unlock()
	}()
	select {
	case r := <-ch:
		return r.resp, r.decided
	case <-ctx.Done():
		return engine.Response{}, false
	case <-done:
		return engine.Response{}, false
	}
}

// resolve applies a recorded decision: a waiting browser-mode resume takes
// it; otherwise the execution resumes now (a browser-mode resume that asks
// later finds it settled, or joins the resume, and gets its outcome).
func (c *codeRuntime) resolve(execID string, d *pb.ApprovalDecision) {
	resp := engine.Response{Action: d.GetAction(), Reason: d.GetReason()}
	c.mu.Lock()
	if ch, ok := c.waiters[execID]; ok {
		delete(c.waiters, execID)
		c.mu.Unlock()
		ch <- waited{resp: resp, decided: true}
		return
	}
	c.mu.Unlock()
	go c.engine().Resume(context.Background(), execID, engine.System, resp) // the owning grain checked the decider
}

// wakeHooks passes the engine's lifecycle on, keeps the execution
// directory current, and wakes a browser-mode resume waiting for an
// execution that settled some other way.
type wakeHooks struct {
	engine.Hooks
	c *codeRuntime
}

// Paused publishes the pause before the hooks (and, after them, the client)
// hear of it — unless its journal published it already.
func (w wakeHooks) Paused(execID string, deadline time.Time) {
	if c := w.c; c.publish && c.engine().IsDurable(execID) {
		c.mu.Lock()
		if c.journaled == nil {
			c.journaled = map[string]bool{}
		}
		c.journaled[execID] = true
		c.mu.Unlock()
	} else if c.publish {
		if p, ok := c.engine().Paused(execID, engine.System); ok {
			args, _ := json.Marshal(p.Args)
			ctx, cancel := context.WithTimeout(context.Background(), directoryTimeout)
			row := directory.Execution{
				ID: execID, Session: c.id, User: p.Principal.User, Org: p.Principal.Org, Address: p.Address,
				Message: p.Message, ApprovalText: p.ApprovalText, ArgsJSON: string(args), Deadline: deadline,
			}
			// An approver acts on the directory row: ride out a store
			// blip (an upsert) rather than hand out an id nobody can find.
			err := store.ThroughOutage(ctx, func() error { return c.cfg.Directory.PutExecution(ctx, row) })
			cancel()
			if err != nil {
				c.log().Warn("mcpruntime: publish paused execution", "session", c.id, "execution", execID, "err", err)
			}
		}
	}
	w.Hooks.Paused(execID, deadline)
}

func (w wakeHooks) Settled(execID string) {
	c := w.c
	c.mu.Lock()
	journaled := c.journaled[execID]
	delete(c.journaled, execID)
	c.mu.Unlock()
	if c.publish && !journaled {
		ctx, cancel := context.WithTimeout(context.Background(), directoryTimeout)
		now := time.Now()
		if err := store.ThroughOutage(ctx, func() error { return c.cfg.Directory.SettleExecutions(ctx, now, execID) }); err != nil {
			c.log().Warn("mcpruntime: settle execution", "session", c.id, "execution", execID, "err", err)
		}
		cancel()
	}
	w.Hooks.Settled(execID)
	c.mu.Lock()
	ch, ok := c.waiters[execID]
	delete(c.waiters, execID)
	c.mu.Unlock()
	if ok {
		// No decision: the waiting resume looks again. It must not take
		// this for a decision to apply — a replay of the execution may be
		// paused at the same call again, and a cancel would decide it.
		ch <- waited{}
	}
}

// waited is what a browser-mode resume waiting in WaitDecision gets: a
// decision, or (decided false) word that the execution settled.
type waited struct {
	resp    engine.Response
	decided bool
}

// Forward implements codemode.Runtime: executor's resumeFallback. The
// owner is asked on the continuation route (continueTo) when the runtime
// has one, else, or when the owner is of an earlier release, with
// cfg.Forward's ExecutionResumeForModel.
func (c *codeRuntime) Forward(ctx context.Context, execID string, who engine.Principal, resp engine.Response) (*mcp.CallToolResult, codemode.Miss) {
	if c.cfg.Lookup == nil || (c.cfg.Forward == nil && c.fwd.cont == nil) {
		return nil, codemode.NotFound
	}
	rec, err := c.cfg.Lookup(ctx, execID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, codemode.NotFound
	}
	if err != nil {
		return nil, codemode.NotFound
	}
	switch sessionPauseAccess(rec, who.Org, who.User) {
	case accessUnknown:
		return nil, codemode.NotFound
	case accessForeign:
		return nil, codemode.Forbidden
	}
	// A settled row is final: whatever the owner answers short of the
	// outcome (its session closed, its runtime gone, no answer), the
	// execution is settled, never "expired" or "not found" — those advise
	// running the code again, which would repeat what it did.
	miss := forwardMiss(!rec.Settled.IsZero())
	if rec.Session == c.id {
		// It names us, and we have no live pause: no forward (it would
		// come back here).
		c.forwardMissed(execID, rec.Session, "owner_is_this_session", nil)
		return nil, miss(codemode.Expired)
	}
	if c.fwd.cont != nil {
		res, m, earlier := c.continueTo(ctx, rec.Session, execID, who, resp, miss)
		if !earlier || c.cfg.Forward == nil {
			return res, m
		}
	}
	return c.forwardTo(ctx, rec.Session, execID, who, resp, miss)
}

// forwardContext bounds a forwarded resume by the forward timeout
// (ForwardTimeout unless set).
func (c *codeRuntime) forwardContext(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := c.fwd.timeout
	if timeout <= 0 {
		timeout = ForwardTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// forwardTo sends a resume to owner, the session the directory names,
// bounded by the forward timeout: no answer in time (a wedged owner), an
// error, or an owner that no longer finds the execution is
// execution_expired (executor's forwardModelResumeToOwner), each logged.
func (c *codeRuntime) forwardTo(ctx context.Context, owner, execID string, who engine.Principal, resp engine.Response, miss func(codemode.Miss) codemode.Miss) (*mcp.CallToolResult, codemode.Miss) {
	content, _ := json.Marshal(resp.Content)
	fctx, cancel := c.forwardContext(ctx)
	defer cancel()
	reply, err := c.cfg.Forward(fctx, owner, &pb.ExecutionResumeForModel{
		Principal: &pb.Principal{User: who.User, Org: who.Org, Role: who.Role}, ExecutionId: execID, Action: resp.Action, ContentJson: string(content),
	})
	if err != nil {
		reason := "error"
		if errors.Is(fctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			reason = "timeout"
		}
		c.forwardMissed(execID, owner, reason, err)
		return nil, miss(codemode.Expired)
	}
	switch reply.GetStatus() {
	case pb.ExecutionReply_STATUS_OK:
		var res mcp.CallToolResult
		if err := json.Unmarshal([]byte(reply.GetResultJson()), &res); err != nil {
			c.forwardMissed(execID, owner, "bad_result", err)
			return nil, miss(codemode.Expired)
		}
		return &res, ""
	case pb.ExecutionReply_STATUS_NOT_FOUND:
		// The directory named the owner, which no longer has the
		// execution (its session ended, or it was never restored):
		// executor maps a forwarded not_found to execution_expired.
		c.forwardMissed(execID, owner, "owner_not_found", nil)
		return nil, miss(codemode.Expired)
	case pb.ExecutionReply_STATUS_FORBIDDEN:
		return nil, codemode.Forbidden
	case pb.ExecutionReply_STATUS_ALREADY_SETTLED:
		return nil, codemode.AlreadySettled
	}
	c.forwardMissed(execID, owner, "owner_expired", nil)
	return nil, miss(codemode.Expired)
}

// forwardMissed logs a cross-session resume that ends as
// execution_expired (executor's mcp_model_resume_forward_error): a timeout
// or an error at warn level, the owner's own answers at info.
func (c *codeRuntime) forwardMissed(execID, owner, reason string, err error) {
	level := slog.LevelInfo
	if err != nil && reason != "bad_result" {
		level = slog.LevelWarn
	}
	args := []any{"session", c.id, "execution", execID, "owner", owner, "reason", reason}
	if err != nil {
		args = append(args, "err", err)
	}
	c.log().Log(context.Background(), level, "mcp_model_resume_forward_error", args...)
}

// forwardMiss is what a forwarded resume's miss reports: for an execution
// the directory shows settled, AlreadySettled instead of a miss that
// advises running the code again (expired, not found).
func forwardMiss(settled bool) func(codemode.Miss) codemode.Miss {
	return func(m codemode.Miss) codemode.Miss {
		if settled && (m == codemode.Expired || m == codemode.NotFound) {
			return codemode.AlreadySettled
		}
		return m
	}
}

// resumeForModel serves a forwarded resume.
func (c *codeRuntime) resumeForModel(ctx context.Context, execID string, m *pb.ExecutionResumeForModel) (string, pb.ExecutionReply_Status) {
	var content map[string]any
	_ = json.Unmarshal([]byte(m.GetContentJson()), &content)
	p := m.GetPrincipal()
	owner := engine.AsOwner(engine.Principal{User: p.GetUser(), Org: p.GetOrg(), Role: p.GetRole()})
	out, found := c.engine().Resume(ctx, execID, owner, engine.Response{Action: m.GetAction(), Content: content})
	if !found {
		if c.engine().IsSettled(execID, owner) {
			return "", pb.ExecutionReply_STATUS_ALREADY_SETTLED
		}
		return "", pb.ExecutionReply_STATUS_EXPIRED
	}
	b, err := json.Marshal(codemode.RenderModel(out, c.window(), c.log()))
	if err != nil {
		return "", pb.ExecutionReply_STATUS_EXPIRED
	}
	return string(b), pb.ExecutionReply_STATUS_OK
}

func pausedProto(p engine.Pause) *pb.PausedExecution {
	args, _ := json.Marshal(p.Args)
	return &pb.PausedExecution{
		ExecutionId: p.ID, Address: p.Address, ArgumentsJson: string(args), Message: p.Message, ApprovalText: p.ApprovalText,
		DeadlineMs: p.Deadline.UnixMilli(), Principal: &pb.Principal{User: p.Principal.User, Org: p.Principal.Org, Role: p.Principal.Role},
	}
}

type noHooks struct{}

func (noHooks) Paused(string, time.Time) {}
func (noHooks) Resuming(string, string)  {}
func (noHooks) Settled(string)           {}

// Decide takes an approval surface's decision (browser page, HTTP, gRPC,
// CLI) for a paused execution of a grain whose journal publishes its
// pauses but that keeps no decisions of its own: a continuation grain,
// whose sessionless client would otherwise be the only one to answer.
// Anyone of the execution's organization finds it; a role mayDecide
// refuses is FORBIDDEN; the first decision wins (ALREADY_DECIDED after,
// and for a pause whose deadline passed: the engine declines it). On OK,
// apply (blocking until the execution pauses again or ends) hands the
// decision to the execution; the client's retry then gets what it came
// to, exactly as after its own decision. A pause of the grain that is
// journaled but not in memory is restored first.
func (c *codeRuntime) Decide(ctx context.Context, m *pb.ExecutionDecide, mayDecide func(role string) bool) (st pb.ExecutionReply_Status, apply func()) {
	who := m.GetPrincipal()
	id := m.GetExecutionId()
	if who.GetOrg() == "" {
		return pb.ExecutionReply_STATUS_NOT_FOUND, nil
	}
	a := engine.AsApprover(engine.Principal{User: who.GetUser(), Org: who.GetOrg(), Role: who.GetRole()})
	c.engine().RestorePaused(ctx, id, a)
	p, live := c.engine().Paused(id, a)
	switch {
	case !live && c.engine().IsSettled(id, a):
		return pb.ExecutionReply_STATUS_ALREADY_DECIDED, nil
	case !live:
		return pb.ExecutionReply_STATUS_NOT_FOUND, nil // unknown, another organization's, or being decided by the client
	case !mayDecide(who.GetRole()):
		return pb.ExecutionReply_STATUS_FORBIDDEN, nil
	}
	c.mu.Lock()
	if _, ok := c.decided[id]; ok {
		c.mu.Unlock()
		return pb.ExecutionReply_STATUS_ALREADY_DECIDED, nil
	}
	if c.decided == nil {
		c.decided = map[string]chan struct{}{}
	}
	applied := make(chan struct{})
	c.decided[id] = applied
	c.mu.Unlock()
	resp := engine.Response{Action: m.GetAction(), Reason: session.DecisionReason(m.GetContentJson())}
	st = pb.ExecutionReply_STATUS_OK
	if !p.Deadline.IsZero() && c.now().After(p.Deadline) {
		st = pb.ExecutionReply_STATUS_ALREADY_DECIDED // the engine declines it (approval_timeout) as it applies it
	}
	return st, func() {
		defer func() {
			c.mu.Lock()
			delete(c.decided, id)
			c.mu.Unlock()
			close(applied)
		}()
		c.engine().Resume(context.WithoutCancel(ctx), id, a, resp)
	}
}

// DecidedOutcome implements codemode.Runtime: what execID came to for a,
// after waiting (bounded by ctx) for a decision taken by Decide that is
// still being applied (from before Decide's reply went out until the
// execution paused again or ended); found is false when it has no outcome
// (still paused, unknown, or not a's).
func (c *codeRuntime) DecidedOutcome(ctx context.Context, execID string, a engine.Access) (engine.Outcome, bool) {
	c.mu.Lock()
	applied, ok := c.decided[execID]
	c.mu.Unlock()
	if ok {
		select {
		case <-applied:
		case <-ctx.Done():
			return engine.Outcome{}, false
		}
	}
	return c.engine().Outcome(ctx, execID, a)
}

// now is the runtime's clock.
func (c *codeRuntime) now() time.Time {
	if c.cfg.Clock != nil {
		return c.cfg.Clock.Now()
	}
	return time.Now()
}

// access is what a principal may do with another session's pause.
type access int

const (
	// accessUnknown: the pause is not the principal's to know of.
	accessUnknown access = iota
	// accessForeign: another user's of the principal's organization.
	accessForeign
	// accessOwn: the principal's own.
	accessOwn
)

// sessionPauseAccess is what the principal (org, user) may do with the
// pause of execution e from another of its sessions (code mode's resume
// forward, AskStatus): another organization's id is unknown to it, and so
// is a task's or a sessionless execution's pause — no session holds it to
// resume; only its client (tasks/update, the retry) and the approval
// surfaces decide it; another user's is foreign.
func sessionPauseAccess(e directory.Execution, org, user string) access {
	switch {
	case e.Org != org || exchange.OwnerKind(e.Session) != exchange.KindSession:
		return accessUnknown
	case e.User != user:
		return accessForeign
	}
	return accessOwn
}
