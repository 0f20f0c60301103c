// Package engine runs code-mode executions and pauses them for approval:
// executor's ExecutionEngine (executor packages/core/execution).
//
// An execution runs TypeScript in the sandbox; every tools.* call goes
// through the engine, which looks the tool up, asks the policy, and either
// calls it, refuses it (block), or pauses the execution: the sandbox
// goroutine waits inside the tool call while the caller gets a Pause with a
// fresh execution id. Resume hands the waiting call a decision (accept →
// the call proceeds; decline/cancel → the call fails inside the code) and
// returns the next outcome: completion, an error, or the next pause.
//
// Resume is idempotent per id: the last 64 settled outcomes are replayed, a
// resume already in flight is joined, and the last 1,024 settled ids are
// remembered so a late resume can be told "already settled". The engine
// reports pause lifecycles through Hooks so the session arms the approval
// deadline (and, for pauses that are not durable, keeps itself resident).
//
// With a Journal (see durable.go) executions are durable: every tool call
// is journaled before its result reaches the code, and a paused execution
// lost with its runtime is brought back on a fresh activation by
// deterministic replay ([Engine.Restore]). A parked goroutine is still the
// fast path while the runtime is resident.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// Decision actions of a Response.
const (
	Accept  = "accept"
	Decline = "decline"
	Cancel  = "cancel"
)

// Response is a decision for a paused execution.
type Response struct {
	// Action is accept, decline or cancel.
	Action string `json:"action"`
	// Content is the form content (unused by confirmation gates).
	Content map[string]any `json:"content,omitempty"`
	// Reason explains an automatic decision (e.g. "approval_timeout").
	Reason string `json:"reason,omitempty"`
}

// ReasonApprovalTimeout is the reason of the decline a pause gets when its
// deadline passed without a decision.
const ReasonApprovalTimeout = "approval_timeout"

// Principal is who runs an execution.
type Principal struct {
	User, Org, Role string
}

// Status is an outcome's kind.
type Status string

// Outcome statuses.
const (
	StatusCompleted Status = "completed"
	StatusPaused    Status = "paused"
	StatusError     Status = "error"    // the code failed (syntax, runtime, timeout, limit): the user sees why
	StatusInternal  Status = "internal" // our fault: the user sees an opaque correlation id
)

// Outcome is where an execution stands after Execute or Resume returns.
type Outcome struct {
	Status Status
	// Result is the completed result; for errors, what ran before.
	Result sandbox.Result
	// Error is the user-facing message of StatusError (ErrorKind says which kind).
	Error string
	// ErrorKind is syntax, runtime, timeout, limit or busy (sandbox.Kind*).
	ErrorKind string
	// ErrorLimit names the limit that stopped the execution (sandbox.Limit*: heap, output,
	// tool_calls, code_size, wall_time) for ErrorKind limit and timeout.
	ErrorLimit string
	// Internal is the cause of StatusInternal (log it, do not show it).
	Internal error
	// Pause is set for StatusPaused.
	Pause *Pause
}

// Pause describes an execution waiting for approval.
type Pause struct {
	// ID is the execution id the client resumes with: "exec_<32 hex>".
	ID string
	// Address is the tool path that needs approval.
	Address string
	// Args are the call's arguments.
	Args any
	// ApprovalText is the source's description ("POST /todos").
	ApprovalText string
	// Message is executor's approval prompt: "Approve <address>?" (with the
	// matched policy) and the argument preview.
	Message string
	// Policy is the rule pattern that required approval ("" for the
	// source default).
	Policy string
	// Deadline is when the approval window ends.
	Deadline time.Time
	// Principal ran the execution.
	Principal Principal
}

// Hooks report pause lifecycles (session.LeaseHooks implements it).
type Hooks interface {
	Paused(execID string, deadline time.Time)
	// Resuming: a decision (action) was handed to the paused code.
	Resuming(execID, action string)
	Settled(execID string)
}

// Tools is the tool registry the engine calls (tools.Registry).
type Tools interface {
	Lookup(ctx context.Context, path string) (tools.Tool, bool)
	Call(ctx context.Context, path string, args map[string]any) (any, error)
	Search(ctx context.Context, query string, limit int) []tools.Tool
	Describe(ctx context.Context, path string) (map[string]any, bool)
}

// DefaultApprovalWindow is how long a pause waits for a decision unless
// configured otherwise (4 min): executor's paused-execution lease
// (alarm.DefaultPausedLease, PAUSED_EXECUTION_LEASE_MS), so a pause that
// keeps its session resident keeps it exactly as long as it can be
// decided. Code mode (codemode, mcpruntime) and the node's
// --approval-window default to it.
const DefaultApprovalWindow = alarm.DefaultPausedLease

// Config configures an engine (one per session runtime).
type Config struct {
	// Tools are the callable tools (required).
	Tools Tools
	// Policy decides approvals (nil: tool defaults).
	Policy *policy.Set
	// Limits bound each execution.
	Limits sandbox.Limits
	// ApprovalWindow is how long a pause waits (zero:
	// [DefaultApprovalWindow]).
	ApprovalWindow time.Duration
	// EnforceDeadlines makes Resume decline (reason approval_timeout) a
	// decision that arrives after its pause's deadline. For owners without
	// a deadline reminder (continuation grains: the client's retry brings
	// the decision, and nothing fires at the deadline). Sessions leave it
	// off: their reminder declines at the deadline, as executor's alarm.
	EnforceDeadlines bool
	// Hooks receive pause lifecycles (nil: none).
	Hooks Hooks
	// Clock tells time. Default the system clock.
	Clock clock.Clock
	// Logger logs problems. Default slog.Default().
	Logger *slog.Logger
	// Journal makes executions durable (nil: pauses live only in memory).
	Journal Journal
	// Session is the owning grain's identity, recorded in durable runs.
	Session string
}

// Settled-outcome memory sizes (executor's).
const (
	settledOutcomes = 64
	settledIDs      = 1024
)

// Engine runs the executions of one session.
type Engine struct {
	cfg  Config
	base context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	running  int
	paused   map[string]*pending
	dormant  int // paused entries that are dormant
	resuming map[string]*resumeCall
	loading  map[string]chan struct{} // pauses being restored on demand (RestorePaused)
	outcomes map[string]Outcome       // settled outcomes, last settledOutcomes
	order    []string                 // ids of outcomes, oldest first
	owners   map[string]Principal     // owners of settled ids, last settledIDs (every id in outcomes too)
	idOrder  []string
	closed   bool
}

type execution struct {
	events    chan event
	principal Principal
	dur       *durable // nil: not durable
}

type event struct {
	pause *pending
	done  *Outcome
}

type pending struct {
	Pause
	exec  *execution // nil once dormant
	reply chan Response
	// durable: journaled, so it survives its runtime (and can go dormant).
	durable bool
	// dormant: the pause holds no running execution (its sandbox worker
	// was given back while it waited, or it was restored from the journal
	// without running it); a decision re-runs it by replay first.
	dormant bool
}

type resumeCall struct {
	owner   Principal
	done    chan struct{}
	outcome Outcome
	found   bool // the outcome is the execution's (false: the claim found the run gone)
}

// join waits for the decision being applied (or ctx) and returns its
// outcome, if a may see it.
func (rc *resumeCall) join(ctx context.Context, a Access) (Outcome, bool) {
	if !a.Allows(rc.owner) {
		return Outcome{}, false
	}
	select {
	case <-rc.done:
		return rc.outcome, rc.found
	case <-ctx.Done():
		return Outcome{}, false
	}
}

// New returns an engine.
func New(cfg Config) *Engine {
	if cfg.ApprovalWindow <= 0 {
		cfg.ApprovalWindow = DefaultApprovalWindow
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	base, stop := context.WithCancel(context.Background())
	return &Engine{cfg: cfg, base: base, stop: stop, paused: map[string]*pending{}, resuming: map[string]*resumeCall{},
		loading: map[string]chan struct{}{}, outcomes: map[string]Outcome{}, owners: map[string]Principal{}}
}

// ErrClosed is returned after Shutdown.
var ErrClosed = errors.New("engine: shut down")

// NewExecutionID returns a fresh, globally unique execution id.
func NewExecutionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "exec_" + hex.EncodeToString(b)
}

// Execute runs code to the end, asking decide for each approval inline
// (executor's execute; native elicitation works this way). A nil decide,
// or one that returns an empty action, cancels the call needing approval.
// If ctx ends while decide runs, the call is cancelled.
func (e *Engine) Execute(ctx context.Context, code string, who Principal, decide func(context.Context, Pause) Response) (out Outcome) {
	if tracing.On() {
		var span trace.Span
		ctx, span = e.startExecute(ctx, modeInline)
		defer func() { endOutcome(span, out) }()
	}
	out = e.executeWithPause(ctx, code, who)
	for out.Status == StatusPaused {
		p := *out.Pause
		resp := Response{Action: Cancel, Reason: "no approver"}
		if decide != nil && ctx.Err() == nil {
			if r := decide(ctx, p); r.Action != "" && ctx.Err() == nil {
				resp = r
			}
		}
		next, found := e.Resume(context.WithoutCancel(ctx), p.ID, System, resp)
		if !found {
			return Outcome{Status: StatusInternal, Internal: fmt.Errorf("engine: paused execution %s vanished (engine shut down?)", p.ID)}
		}
		out = next
	}
	return out
}

// ExecuteWithPause runs code and returns when it completes, fails or
// pauses for approval. ctx bounds the execution until its first pause;
// after that the execution belongs to the engine (resumed, declined at its
// deadline, or interrupted by Shutdown).
func (e *Engine) ExecuteWithPause(ctx context.Context, code string, who Principal) Outcome {
	if !tracing.On() {
		return e.executeWithPause(ctx, code, who)
	}
	ctx, span := e.startExecute(ctx, modePausable)
	out := e.executeWithPause(ctx, code, who)
	endOutcome(span, out)
	return out
}

// executeWithPause is ExecuteWithPause without its span.
func (e *Engine) executeWithPause(ctx context.Context, code string, who Principal) Outcome {
	lim := e.cfg.Limits
	var dur *durable
	if e.cfg.Journal != nil {
		d, err := e.newRun(code, who)
		if err != nil {
			return Outcome{Status: StatusInternal, Internal: err}
		}
		dur, lim = d, d.limits()
	}
	return e.start(ctx, code, who, lim, dur)
}

// start runs code (fresh or, with a replay journal, restored) until it
// completes, fails or pauses.
func (e *Engine) start(ctx context.Context, code string, who Principal, lim sandbox.Limits, dur *durable) Outcome {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Outcome{Status: StatusInternal, Internal: ErrClosed}
	}
	e.running++
	e.mu.Unlock()
	ex := &execution{events: make(chan event), principal: who, dur: dur}
	// The sandbox caps running executions per principal and per organization, and shares the node's
	// slots fairly between organizations; a restore re-runs code that already ran (its caller is not
	// there to retry), so it waits for a slot instead of being refused.
	if lim.Tenant == "" && (who.Org != "" || who.User != "") {
		lim.Tenant, lim.Org = who.Org+"/"+who.User, who.Org
	}
	if dur != nil && dur.replay != nil {
		lim.WaitForSlot = true
	}
	if lim.Pool == nil {
		lim.Pool = e.cfg.Limits.Pool // a durable run's limits are rebuilt from its stored spec
	}
	if dur != nil {
		// A durable run waiting for a decision can give its worker back:
		// its pause goes dormant and a decision replays it.
		lim.Release = func() { e.release(dur) }
	}
	runCtx, cancelRun := context.WithCancelCause(traceRun(e.base, ctx))
	if dur != nil {
		dur.cancel = cancelRun
	}
	// Until the first pause the caller's context bounds the run.
	stopWatch := context.AfterFunc(ctx, func() { cancelRun(context.Cause(ctx)) })
	go func() {
		defer cancelRun(nil)
		res, err := sandbox.Run(runCtx, code, &host{e: e, ex: ex, ctx: runCtx}, lim)
		out := Outcome{Status: StatusCompleted, Result: res}
		var se *sandbox.Error
		switch {
		case errors.As(err, &se):
			out = Outcome{Status: StatusError, Result: se.Result, Error: se.Message, ErrorKind: se.Kind, ErrorLimit: se.Limit}
		case err != nil:
			out = Outcome{Status: StatusInternal, Internal: err}
		}
		if dur != nil {
			out = dur.finishRun(out)
			e.settle(dur, out)
		}
		e.mu.Lock()
		e.running--
		e.mu.Unlock()
		ex.events <- event{done: &out}
	}()
	out := e.await(ex)
	if out.Status == StatusPaused {
		stopWatch() // from now on the engine owns the execution
		e.reportPause(out.Pause)
	}
	return out
}

// await waits for the execution's next event and registers a pause (its
// Paused hook is the caller's to send, after any Settled).
func (e *Engine) await(ex *execution) Outcome {
	ev := <-ex.events
	if ev.done != nil {
		return *ev.done
	}
	p := ev.pause
	p.durable = ex.dur != nil
	e.mu.Lock()
	e.paused[p.ID] = p
	e.mu.Unlock()
	pause := p.Pause
	return Outcome{Status: StatusPaused, Pause: &pause}
}

// reportPause reports a new pause to the hooks.
func (e *Engine) reportPause(p *Pause) {
	if e.cfg.Hooks != nil {
		e.cfg.Hooks.Paused(p.ID, p.Deadline)
	}
}

// Resume decides paused execution id for a caller with access a and
// returns what follows. found is false for an id that is neither paused
// nor recently settled here nor a settled durable run a may read back
// (see settledDurable), and for one a may not touch (see [Access]).
//
// The first decision claims the pause: a concurrent Resume, whatever it
// decides, joins it and gets its outcome — also while a dormant pause is
// being brought back by replay, which may wait for a sandbox slot.
func (e *Engine) Resume(ctx context.Context, id string, a Access, resp Response) (out Outcome, found bool) {
	if !tracing.On() {
		out, found, _ = e.resume(ctx, id, a, resp)
		return out, found
	}
	ctx, span := tracing.Start(ctx, ResumeSpan, trace.WithAttributes(ExecutionKey.String(id), DecisionKey.String(resp.Action),
		tracing.SessionKey.String(e.cfg.Session)))
	out, found, how := e.resume(ctx, id, a, resp)
	endResume(span, how, out, found)
	return out, found
}

// resume is Resume without its span; how says what it found.
func (e *Engine) resume(ctx context.Context, id string, a Access, resp Response) (out Outcome, found bool, how resumePath) {
	switch resp.Action {
	case Accept, Decline, Cancel:
	default:
		resp.Action = Cancel
	}
	e.mu.Lock()
	if o, ok := e.outcomes[id]; ok {
		allowed := a.Allows(e.owners[id])
		e.mu.Unlock()
		return o, allowed, resumeReplayed
	}
	if rc, ok := e.resuming[id]; ok {
		e.mu.Unlock()
		o, ok := rc.join(context.Background(), a)
		return o, ok, resumeJoined
	}
	if wait, ok := e.loading[id]; ok {
		// Being brought back from the journal: decide it once it is.
		e.mu.Unlock()
		<-wait
		return e.resume(ctx, id, a, resp)
	}
	p, ok := e.paused[id]
	if !ok {
		e.mu.Unlock()
		o, ok := e.settledDurable(id, a)
		return o, ok, resumeReplayed
	}
	if !a.Allows(p.Principal) {
		e.mu.Unlock()
		return Outcome{}, false, resumeMissed
	}
	rc := &resumeCall{owner: p.Principal, done: make(chan struct{})}
	e.resuming[id] = rc // claimed
	for p.dormant {
		// Re-run it by replay to where it waits, then decide it (again if
		// it gave its worker back meanwhile).
		how = resumeWoken
		e.wake(ctx, p)
		e.mu.Lock()
		if p, ok = e.paused[id]; !ok {
			// The replay ended the run, or could not bring it back.
			o, ok := e.unclaim(rc, id, a)
			return o, ok, how
		}
	}
	if e.cfg.EnforceDeadlines && !p.Deadline.IsZero() && e.cfg.Clock.Now().After(p.Deadline) {
		resp = Response{Action: Decline, Reason: ReasonApprovalTimeout}
	}
	delete(e.paused, id)
	e.mu.Unlock()

	if e.cfg.Hooks != nil {
		e.cfg.Hooks.Resuming(id, resp.Action)
	}
	p.reply <- resp
	out = e.await(p.exec)

	rc.outcome, rc.found = out, true
	// Settled before anyone else sees the outcome — joined resumes and
	// later replays alike: a caller that got the outcome finds the
	// execution settled everywhere (the directory too). Until then a
	// concurrent Resume joins this one. Executor's order: resume-settle of
	// this pause before pause of the next.
	if e.cfg.Hooks != nil {
		e.cfg.Hooks.Settled(id)
	}
	e.mu.Lock()
	delete(e.resuming, id)
	e.remember(id, p.Principal, out)
	e.mu.Unlock()
	close(rc.done)
	if out.Status == StatusPaused {
		e.reportPause(out.Pause)
	}
	return out, true, how
}

// unclaim ends claim rc on id when the replay of its dormant pause did not
// bring the pause back (e.mu held on entry, released on return): the run
// ended during the replay (its outcome is remembered) or its journal had
// moved on (settled elsewhere, or gone). Joined callers get what a gets.
func (e *Engine) unclaim(rc *resumeCall, id string, a Access) (Outcome, bool) {
	delete(e.resuming, id)
	o, ok := e.outcomes[id]
	e.mu.Unlock()
	if !ok {
		o, ok = e.settledDurable(id, a)
	}
	rc.outcome, rc.found = o, ok
	close(rc.done)
	return o, ok
}

// Outcome returns what execution id came to, without deciding it: the
// outcome of a decision being applied (joined, like a concurrent
// [Engine.Resume]), the remembered outcome of one settled here, or the
// journaled outcome of a settled durable run (of this grain, or the
// caller's own run of another grain: see settledDurable). found
// is false while it waits for a decision, for an id unknown here, and for
// one a may not see. A pause being restored is waited for (or ctx).
func (e *Engine) Outcome(ctx context.Context, id string, a Access) (Outcome, bool) {
	e.mu.Lock()
	if o, ok := e.outcomes[id]; ok {
		allowed := a.Allows(e.owners[id])
		e.mu.Unlock()
		return o, allowed
	}
	if rc, ok := e.resuming[id]; ok {
		e.mu.Unlock()
		return rc.join(ctx, a)
	}
	if wait, ok := e.loading[id]; ok {
		e.mu.Unlock()
		select {
		case <-wait:
			return e.Outcome(ctx, id, a)
		case <-ctx.Done():
			return Outcome{}, false
		}
	}
	_, paused := e.paused[id]
	e.mu.Unlock()
	if paused {
		return Outcome{}, false
	}
	return e.settledDurable(id, a)
}

// remember records the settled outcome of owner's execution id (e.mu
// held).
func (e *Engine) remember(id string, owner Principal, out Outcome) {
	e.outcomes[id] = out
	e.order = append(e.order, id)
	if len(e.order) > settledOutcomes {
		delete(e.outcomes, e.order[0])
		e.order = e.order[1:]
	}
	if _, known := e.owners[id]; !known {
		e.idOrder = append(e.idOrder, id)
		if len(e.idOrder) > settledIDs {
			delete(e.owners, e.idOrder[0])
			e.idOrder = e.idOrder[1:]
		}
	}
	e.owners[id] = owner
}

// RestorePaused restores durable paused execution id of this engine's
// owner from the journal, on demand, if it is not here: a grain that
// restores its pauses lazily (a continuation grain, whose pauses are
// resumed one request at a time) calls it when a resume misses. It
// reports whether the execution is now known here (paused again, or
// settled during the replay); concurrent calls for one id replay once. A
// run a may not touch is not replayed (reported false).
func (e *Engine) RestorePaused(ctx context.Context, id string, a Access) bool {
	if e.cfg.Journal == nil {
		return false
	}
	e.mu.Lock()
	if known := e.knownLocked(id); known || e.closed {
		e.mu.Unlock()
		return known
	}
	if wait, ok := e.loading[id]; ok {
		e.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return false
		}
		return e.known(id)
	}
	done := make(chan struct{})
	e.loading[id] = done
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.loading, id)
		e.mu.Unlock()
		close(done)
	}()
	rctx, cancel := context.WithTimeout(ctx, journalTimeout)
	run, entries, ok := e.cfg.Journal.RunOf(rctx, id)
	cancel()
	if !ok || run.Session != e.cfg.Session || !run.Settled.IsZero() || run.PauseID != id || !a.Allows(runOwner(run)) {
		return false // unknown, another grain's, settled (replayed by Resume), an earlier pause of a run that moved on, or not the caller's
	}
	began := time.Now()
	out := e.restore(ctx, run, entries)
	e.cfg.Logger.Info("engine: restored a paused execution on demand by replay", "owner", e.cfg.Session, "run", run.ID,
		"execution", id, "calls", len(entries), "status", out.Status, "replay_ms", time.Since(began).Milliseconds())
	return e.known(id)
}

// wake brings dormant pause p back by replaying its run (e.mu held on
// entry, released on return). Concurrent deciders of the same pause wait
// for the one replay (e.loading).
func (e *Engine) wake(ctx context.Context, p *pending) {
	id := p.ID
	done := make(chan struct{})
	e.loading[id] = done
	delete(e.paused, id)
	e.dormant--
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.loading, id)
		e.mu.Unlock()
		close(done)
	}()
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalTimeout)
	run, entries, ok := e.cfg.Journal.RunOf(jctx, id)
	cancel()
	if !ok || run.PauseID != id || !run.Settled.IsZero() {
		e.cfg.Logger.Warn("engine: a dormant pause's run is gone from the journal or moved on", "owner", e.cfg.Session, "execution", id)
		return
	}
	began := time.Now()
	out := e.restore(ctx, run, entries)
	e.cfg.Logger.Info("engine: restored paused execution by replay (a decision came for its dormant pause)", "owner", e.cfg.Session,
		"execution", id, "calls", len(entries), "status", out.Status, "replay_ms", time.Since(began).Milliseconds())
}

// release gives back the sandbox worker of durable run d, which waits for
// a decision: its pause goes dormant (a decision re-runs it by replay).
// The sandbox pool calls it (sandbox.Limits.Release) for executions
// parked too long, or when too many are parked on the node.
func (e *Engine) release(d *durable) {
	e.mu.Lock()
	var p *pending
	for _, q := range e.paused {
		if !q.dormant && q.exec != nil && q.exec.dur == d {
			p = q
			break
		}
	}
	if p == nil || e.closed {
		e.mu.Unlock()
		return // resumed (or being) meanwhile, or shutting down
	}
	ex := p.exec
	p.exec, p.dormant = nil, true
	e.dormant++
	e.mu.Unlock()
	d.stopWith(errReleased)
	go drain(ex, "released")
}

// errReleased stops a durable run whose worker was given back while it
// waited: the run is not over (its pause is dormant).
var errReleased = errors.New("engine: the execution gave its sandbox worker back while it waited")

// drain consumes an abandoned execution's events until it ends, so its
// goroutine does: a pause it reaches meanwhile is cancelled.
func drain(ex *execution, reason string) {
	for ev := range ex.events {
		if ev.done != nil {
			return
		}
		select {
		case ev.pause.reply <- Response{Action: Cancel, Reason: reason}:
		default:
		}
	}
}

// known reports whether id is paused, being resumed or settled here.
func (e *Engine) known(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.knownLocked(id)
}

// knownLocked is known with e.mu held.
func (e *Engine) knownLocked(id string) bool {
	_, paused := e.paused[id]
	_, settled := e.outcomes[id]
	_, resuming := e.resuming[id]
	return paused || settled || resuming
}

// settledDurable replays the outcome of a settled durable run, if a may
// see it: one of this grain that settled in an earlier activation, or —
// for its owner only — one that settled in another grain (a session the
// owner has since left or closed, a continuation grain). A settled outcome
// is final, so any grain may read it back; one principal's resume from a
// new session then gets what its execution came to instead of a miss
// that reads like "nothing ran". An unsettled run of another grain is
// not touched here: it is decided where it lives (the resume forward).
func (e *Engine) settledDurable(id string, a Access) (Outcome, bool) {
	if e.cfg.Journal == nil {
		return Outcome{}, false
	}
	ctx, cancel := writeCtx()
	defer cancel()
	r, _, ok := e.cfg.Journal.RunOf(ctx, id)
	if !ok || !mayReplay(a, r.Session == e.cfg.Session, runOwner(r)) {
		return Outcome{}, false
	}
	return settledOutcome(r)
}

// mayReplay reports whether a may read back the settled outcome of a run
// owner ran, in this grain (own) or in another: here as for every look
// at an execution; elsewhere only as the owner itself (the grain's own
// System access and an approver's have no standing there).
func mayReplay(a Access, own bool, owner Principal) bool {
	if !own && a.kind != accessOwner {
		return false
	}
	return a.Allows(owner)
}

// IsSettled reports whether id settled here recently (or, for durable
// executions, at all while the journal keeps it — the caller's own runs
// of other grains included) and a may know it.
func (e *Engine) IsSettled(id string, a Access) bool {
	e.mu.Lock()
	owner, settled := e.owners[id]
	e.mu.Unlock()
	if settled {
		return a.Allows(owner)
	}
	_, settled = e.settledDurable(id, a)
	return settled
}

// IsDurable reports whether paused execution id is durable: journaled, so
// it survives the runtime and needs no lease to keep it resident.
func (e *Engine) IsDurable(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.paused[id]
	return ok && p.durable
}

// DurablePausedCount is the number of paused executions that are durable.
func (e *Engine) DurablePausedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.paused {
		if p.durable {
			n++
		}
	}
	return n
}

// DormantCount is the number of paused executions that hold no running
// execution (no sandbox worker): they are re-run by replay when decided.
func (e *Engine) DormantCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dormant
}

// Paused returns the pause with id, if a may see it.
func (e *Engine) Paused(id string, a Access) (Pause, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.paused[id]
	if !ok || !a.Allows(p.Principal) {
		return Pause{}, false
	}
	return p.Pause, true
}

// PausedList returns every pause, for listings.
func (e *Engine) PausedList() []Pause {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Pause, 0, len(e.paused))
	for _, p := range e.paused {
		out = append(out, p.Pause)
	}
	return out
}

// PausedCount is the number of paused executions.
func (e *Engine) PausedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.paused)
}

// RunningCount is the number of executions not yet finished, paused ones
// excluded.
func (e *Engine) RunningCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(0, e.running-(len(e.paused)-e.dormant))
}

// Shutdown interrupts every execution and drops its pauses (the runtime is
// being disposed). Pauses that are not durable are cancelled and settled;
// durable ones are left as journaled (not decided, not settled), for a
// later activation to restore.
func (e *Engine) Shutdown() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	paused := e.paused
	e.paused = map[string]*pending{}
	e.dormant = 0
	e.mu.Unlock()
	e.stop()
	for id, p := range paused {
		if !p.durable {
			select {
			case p.reply <- Response{Action: Cancel, Reason: "session_closed"}:
			default:
			}
			if e.cfg.Hooks != nil {
				e.cfg.Hooks.Settled(id)
			}
		}
		if p.exec != nil {
			go drain(p.exec, "session_closed") // so its goroutine ends
		}
	}
}

// host is the sandbox's view of the engine for one execution.
type host struct {
	e   *Engine
	ex  *execution
	ctx context.Context
}

// DeclinedError is thrown into the code when a call was not approved.
type DeclinedError struct {
	Address, Action, Reason string
}

func (d *DeclinedError) Error() string {
	msg := fmt.Sprintf("The call to %s was %sd by the user", d.Address, d.Action)
	if d.Action == Cancel {
		msg = fmt.Sprintf("The call to %s was cancelled", d.Address)
	}
	if d.Reason != "" {
		msg += " (" + d.Reason + ")"
	}
	return msg
}

// Call implements sandbox.Host: one tools.* call of the code, recorded as
// a dispatch span when tracing is on.
func (h *host) Call(ctx context.Context, path string, args any) (any, error) {
	if !tracing.On() {
		return h.call(ctx, path, args)
	}
	ctx, span := startDispatch(ctx, path)
	v, err := h.call(ctx, path, args)
	endDispatch(span, err)
	return v, err
}

func (h *host) call(ctx context.Context, path string, args any) (any, error) {
	if h.ex.dur != nil {
		return h.durableCall(ctx, path, args)
	}
	switch path {
	case "search", "describe":
		return h.local(ctx, path, args)
	}
	e := h.e
	t, ok := e.cfg.Tools.Lookup(ctx, path)
	if !ok {
		return nil, e.unknownTool(path)
	}
	argMap, _ := args.(map[string]any)
	if args != nil && argMap == nil {
		return nil, fmt.Errorf("tools.%s takes one object argument", path)
	}
	d := e.cfg.Policy.Evaluate(path, h.ex.principal.Org, h.ex.principal.User, t.RequiresApproval)
	noteCall(ctx, PolicyKey.String(d.Action.String()))
	switch d.Action {
	case policy.Block:
		return nil, fmt.Errorf("tools.%s is blocked by policy (%s)", path, d.Pattern)
	case policy.RequireApproval:
		resp, err := h.wait(ctx, h.pending(h.newPause(t, args, d)))
		if err != nil {
			return nil, err
		}
		if resp.Action != Accept {
			return nil, &DeclinedError{Address: t.Path, Action: resp.Action, Reason: resp.Reason}
		}
	}
	return h.callTool(ctx, path, argMap)
}

// callTool calls the tool at path on behalf of the execution's owner: the
// call's context carries it as the tools.Caller (a source answering per
// organization, such as the demo API, reads it there).
func (h *host) callTool(ctx context.Context, path string, args map[string]any) (any, error) {
	who := h.ex.principal
	return h.e.cfg.Tools.Call(tools.WithCaller(ctx, tools.Caller{User: who.User, Org: who.Org, Role: who.Role}), path, args)
}

// unknownTool is the error for a tool path the registry does not find: why
// its source is without its tools for now (an upstream MCP server still
// connecting, when the registry can tell), else unknown.
func (e *Engine) unknownTool(path string) error {
	if r, ok := e.cfg.Tools.(interface{ Unavailable(path string) error }); ok {
		if err := r.Unavailable(path); err != nil {
			return fmt.Errorf("tools.%s: %w", path, err)
		}
	}
	return fmt.Errorf("unknown tool %q (use tools.search({query}) to find tools)", path)
}

// local answers tools.search and tools.describe from the registry.
func (h *host) local(ctx context.Context, path string, args any) (any, error) {
	e := h.e
	switch path {
	case "search":
		q, limit, offset := "", 12, 0
		if m, ok := args.(map[string]any); ok {
			q, _ = m["query"].(string)
			if l, ok := m["limit"].(float64); ok && l > 0 {
				limit = int(min(l, 100))
			}
			if o, ok := m["offset"].(float64); ok && o > 0 {
				offset = int(min(o, 1000))
			}
		}
		found := e.cfg.Tools.Search(ctx, q, offset+limit)
		out := make([]map[string]any, 0, len(found))
		for i, t := range found {
			if i < offset {
				continue
			}
			out = append(out, map[string]any{
				"path": t.Path, "source": t.Source, "name": t.Name, "description": truncate(t.Description, 500),
				"requiresApproval": t.RequiresApproval,
			})
		}
		return out, nil
	case "describe":
		p := ""
		if m, ok := args.(map[string]any); ok {
			p, _ = m["path"].(string)
		}
		d, ok := e.cfg.Tools.Describe(ctx, p)
		if !ok {
			return nil, fmt.Errorf("unknown tool %q", p)
		}
		return d, nil
	}
	return nil, fmt.Errorf("unknown tool %q", path)
}

// newPause describes the pause of a call that needs approval.
func (h *host) newPause(t tools.Tool, args any, d policy.Decision) Pause {
	e := h.e
	msg := fmt.Sprintf("Approve %s?", t.Path)
	if d.Pattern != "" {
		msg = fmt.Sprintf("Approve %s? (matched policy: %s)", t.Path, d.Pattern)
	}
	if preview, err := json.MarshalIndent(args, "", "  "); err == nil {
		msg += "\n\nArguments:\n" + truncate(string(preview), 2000)
	}
	return Pause{
		ID: NewExecutionID(), Address: t.Path, Args: args, ApprovalText: t.ApprovalText, Message: msg,
		Policy: d.Pattern, Deadline: e.cfg.Clock.Now().Add(e.cfg.ApprovalWindow), Principal: h.ex.principal,
	}
}

func (h *host) pending(p Pause) *pending {
	return &pending{Pause: p, exec: h.ex, reply: make(chan Response, 1)}
}

// wait pauses the execution until a decision arrives (or ctx ends).
func (h *host) wait(ctx context.Context, p *pending) (Response, error) {
	// Waiting for a human does not count against the execution's wall time.
	defer sandbox.Suspend(ctx)()
	select {
	case h.ex.events <- event{pause: p}:
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
	select {
	case resp := <-p.reply:
		return resp, nil
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
