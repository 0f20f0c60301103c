package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// Journal is where durable executions are written (the session's store,
// fenced by its grain's epoch). With a Journal every execution is a
// durable run: its code, limits, Math.random seed and start time, and
// every tool call it makes, in order, before the call's result reaches
// the code (and an "in flight" mark before the call leaves). Until the
// run's first pause the journal is kept in memory and written, in order,
// before the pause is published. A fresh activation registers a paused
// run dormant from its journal ([Engine.RestoreDormant]) and replays the
// journal ([Engine.Restore]) when the pause is decided.
type Journal interface {
	// Write writes one step of a run atomically: its entries (created or
	// replaced at their Seq, in order), then the run if w.Run is set.
	Write(ctx context.Context, w JournalWrite) error
	// RunOf returns the run that paused with execution id pauseID and its
	// journal, settled or not: a late resume replays a settled run's
	// outcome; an unsettled one can be restored ([Engine.RestorePaused]).
	RunOf(ctx context.Context, pauseID string) (runstore.Run, []runstore.JournalEntry, bool)
}

// JournalWrite is one atomic step of a run's journal.
type JournalWrite struct {
	RunID   string
	Entries []runstore.JournalEntry
	// Run, if not nil, is the run's new record.
	Run *runstore.Run
	// Paused is the pause this step makes resumable (nil: none), and
	// Settled the pause ids it resumed past: a journal that publishes
	// pauses in a directory (StoreJournal.Publish) updates it in the same
	// step.
	Paused  *Pause
	Settled []string
	// Link is the W3C traceparent of the call that paused ("" with
	// tracing off, or no pause): the pause's deadline reminder, if the
	// journal sets it (StoreJournal.Deadlines), links to it.
	Link string
}

// journalTimeout bounds one journal write, store outages included (writes
// ride them out: a database restart under load takes several seconds).
const journalTimeout = 10 * time.Second

// runSpec is runstore.Run.Spec: everything but the code that replay needs.
type runSpec struct {
	User          string `json:"user"`
	Org           string `json:"org"`
	Role          string `json:"role,omitempty"`
	Seed          int64  `json:"seed"`
	StartMs       int64  `json:"startMs"`
	WallTimeMs    int64  `json:"wallTimeMs,omitempty"`
	MaxToolCalls  int    `json:"maxToolCalls,omitempty"`
	MaxOutput     int    `json:"maxOutput,omitempty"`
	MaxHeapGrowth uint64 `json:"maxHeapGrowth,omitempty"`
}

// outcomeRecord is runstore.Run.Outcome.
type outcomeRecord struct {
	Status    Status   `json:"status"`
	Value     any      `json:"value,omitempty"`
	Emitted   []any    `json:"emitted,omitempty"`
	Logs      []string `json:"logs,omitempty"`
	ToolCalls int      `json:"toolCalls,omitempty"`
	Error     string   `json:"error,omitempty"`
	ErrorKind string   `json:"errorKind,omitempty"`
	Limit     string   `json:"limit,omitempty"`
}

// durable is the journal state of one run.
type durable struct {
	j    Journal
	run  runstore.Run
	spec runSpec
	// replay is the journal the run is restored from (nil for a fresh run);
	// the code's calls are answered from it, in order.
	replay []Call
	next   atomic.Int64 // the next call's position (calls never overlap)
	// pauseAt is the pause id of the call at a position that paused: its
	// later entries keep it, so the pause id still finds the run.
	pauseAt map[int]string
	clock   atomic.Int64 // Unix ms behind Date.now(): start, then each outcome's time
	cancel  context.CancelCauseFunc

	// deferred: nothing is written until the run's first pause. Until
	// then a lost node loses the execution together with its caller's
	// request, so there is nothing to restore; the journal kept in pending
	// is flushed (in order, then the run) before the pause is published.
	// A run that never pauses costs no store write.
	deferred bool
	pending  []runstore.JournalEntry
	// held is a call outcome not written yet: it goes with the run's next
	// write (the next call's, a pause's or the settle), since nothing the
	// code does before that is visible outside the sandbox. A node lost
	// in between leaves the call in flight, as a node lost just after the
	// call would.
	held []runstore.JournalEntry
	// link is the traceparent of the call that pauses, for the write that
	// publishes the pause (JournalWrite.Link).
	link string

	mu    sync.Mutex
	fatal error // why the run must stop (divergence, a journal write failed)
}

func newSeed() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if s := int64(binary.LittleEndian.Uint64(b[:]) >> 1); s != 0 {
		return s
	}
	return 1
}

// limits are the sandbox limits of the run: the stored ones, with the Math.random seed
// and the recorded clock.
func (d *durable) limits() sandbox.Limits {
	return sandbox.Limits{
		WallTime: time.Duration(d.spec.WallTimeMs) * time.Millisecond, MaxToolCalls: d.spec.MaxToolCalls,
		MaxOutput: d.spec.MaxOutput, MaxHeapGrowth: d.spec.MaxHeapGrowth,
		Seed: d.spec.Seed, Now: func() time.Time { return time.UnixMilli(d.clock.Load()) },
	}
}

func (d *durable) stopWith(err error) error {
	d.mu.Lock()
	if d.fatal == nil {
		d.fatal = err
	}
	d.mu.Unlock()
	d.cancel(err)
	return err
}

func (d *durable) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fatal
}

func (d *durable) tick(atMs int64) {
	if atMs > d.clock.Load() {
		d.clock.Store(atMs)
	}
}

func writeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), journalTimeout)
}

// write writes one step: the held outcomes first, then entries, then the
// run if withRun (a deferred run writes nothing until its first pause:
// flush).
func (d *durable) write(entries []runstore.JournalEntry, withRun bool, paused *Pause, settled []string) error {
	if d.deferred {
		return nil
	}
	w := JournalWrite{RunID: d.run.ID, Entries: append(d.held, entries...), Paused: paused, Settled: settled}
	if paused != nil {
		w.Link, d.link = d.link, ""
	}
	if withRun {
		run := d.run
		w.Run = &run
	}
	if len(w.Entries) == 0 && w.Run == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout+time.Duration(len(w.Entries))*100*time.Millisecond)
	defer cancel()
	if err := d.j.Write(ctx, w); err != nil {
		return err
	}
	d.held = nil
	return nil
}

// flush writes what a deferred run kept in memory: the journal in call
// order, then the run (which makes it restorable once it names a pause),
// in one step that publishes the pause. From then on every write goes
// through.
func (d *durable) flush(paused *Pause) error {
	if !d.deferred {
		return nil
	}
	d.deferred = false
	if err := d.write(d.pending, true, paused, nil); err != nil {
		d.deferred = true
		return err
	}
	d.pending = nil
	return nil
}

// entry encodes the journal entry of call c at seq.
func (d *durable) entry(seq int, state string, c Call) (runstore.JournalEntry, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return runstore.JournalEntry{}, fmt.Errorf("engine: encode journal entry: %w", err)
	}
	pauseID := d.pauseAt[seq]
	if c.Pause != nil {
		pauseID = c.Pause.ID
		if d.pauseAt == nil {
			d.pauseAt = map[int]string{}
		}
		d.pauseAt[seq] = pauseID
	}
	return runstore.JournalEntry{Seq: seq, State: state, PauseID: pauseID, Data: string(b)}, nil
}

// putEntry journals call c at seq now (with anything held).
func (d *durable) putEntry(seq int, state string, c Call) error {
	e, err := d.entry(seq, state, c)
	if err != nil {
		return err
	}
	if d.deferred {
		d.keep(e)
		return nil
	}
	return d.write([]runstore.JournalEntry{e}, false, nil, nil)
}

// hold keeps call c's outcome at seq for the run's next write.
func (d *durable) hold(seq int, state string, c Call) error {
	e, err := d.entry(seq, state, c)
	if err != nil {
		return err
	}
	if d.deferred {
		d.keep(e)
		return nil
	}
	if n := len(d.held); n > 0 && d.held[n-1].Seq == seq {
		d.held[n-1] = e
	} else {
		d.held = append(d.held, e)
	}
	return nil
}

// keep adds e to a deferred run's in-memory journal (replacing its entry
// at the same position).
func (d *durable) keep(e runstore.JournalEntry) {
	if n := len(d.pending); n > 0 && d.pending[n-1].Seq == e.Seq {
		d.pending[n-1] = e
	} else {
		d.pending = append(d.pending, e)
	}
}

// newRun starts the journal of a fresh execution.
func (e *Engine) newRun(code string, who Principal) (*durable, error) {
	now := e.cfg.Clock.Now()
	lim := e.cfg.Limits
	spec := runSpec{User: who.User, Org: who.Org, Role: who.Role, Seed: newSeed(), StartMs: now.UnixMilli(),
		WallTimeMs: lim.WallTime.Milliseconds(), MaxToolCalls: lim.MaxToolCalls, MaxOutput: lim.MaxOutput, MaxHeapGrowth: lim.MaxHeapGrowth}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("engine: encode run spec: %w", err)
	}
	d := &durable{j: e.cfg.Journal, spec: spec, deferred: true,
		run: runstore.Run{ID: "run_" + NewExecutionID()[len("exec_"):], Session: e.cfg.Session, Code: code, Spec: string(b), Created: now}}
	d.clock.Store(spec.StartMs)
	return d, nil
}

// Restore brings back a paused durable run on a fresh activation: it
// re-runs the code from the start in a sandbox whose tool calls are
// answered from the journal, in order, without sending anything, until the
// call that awaits approval, where the execution pauses again under the
// same execution id (reported to the hooks like a new pause). It returns
// that pause, or the outcome if the run ended during replay (a divergence,
// or an interrupted call the code got past), which is then recorded as the
// outcome of the run's last pause.
func (e *Engine) Restore(run runstore.Run, entries []runstore.JournalEntry) Outcome {
	return e.restore(context.Background(), run, entries)
}

// restore is Restore under ctx's span, recorded as a replay span when
// tracing is on.
func (e *Engine) restore(ctx context.Context, run runstore.Run, entries []runstore.JournalEntry) Outcome {
	if !tracing.On() {
		return e.replayRun(ctx, run, entries)
	}
	ctx, span := startReplay(ctx, run.PauseID, len(entries))
	out := e.replayRun(ctx, run, entries)
	endOutcome(span, out)
	return out
}

// replayRun re-runs run from its journal entries (see Restore).
func (e *Engine) replayRun(ctx context.Context, run runstore.Run, entries []runstore.JournalEntry) Outcome {
	var spec runSpec
	if err := json.Unmarshal([]byte(run.Spec), &spec); err != nil {
		return e.restoreFailed(run, Outcome{Status: StatusInternal, Internal: fmt.Errorf("engine: decode run %s: %w", run.ID, err)})
	}
	calls := make([]Call, len(entries))
	// The pauses the journal links to its entries: an entry rewritten on
	// replay (an interrupted or retried call) must keep its pause id, or
	// the run is no longer found by its execution id (RunByPause).
	pauseAt := map[int]string{}
	for i, en := range entries {
		if en.PauseID != "" {
			pauseAt[en.Seq] = en.PauseID
		}
		if en.Seq != i {
			return e.restoreFailed(run, Outcome{Status: StatusInternal, Internal: fmt.Errorf("engine: run %s: journal entry %d at position %d", run.ID, en.Seq, i)})
		}
		if err := json.Unmarshal([]byte(en.Data), &calls[i]); err != nil {
			return e.restoreFailed(run, Outcome{Status: StatusInternal, Internal: fmt.Errorf("engine: run %s: decode journal entry %d: %w", run.ID, i, err)})
		}
		calls[i].State = en.State
	}
	d := &durable{j: e.cfg.Journal, run: run, spec: spec, replay: calls, pauseAt: pauseAt}
	d.clock.Store(spec.StartMs)
	out := e.start(context.WithoutCancel(ctx), run.Code, Principal{User: spec.User, Org: spec.Org, Role: spec.Role}, d.limits(), d)
	if out.Status != StatusPaused {
		return e.restoreFailed(run, out)
	}
	return out
}

// RestoreDormant brings back a paused durable run on a fresh activation
// without running it: when its journal ends with the call that awaits
// approval under the run's pause, the pause is registered dormant (with
// what the journal recorded of it; reported to the hooks like a new
// pause), and the first decision re-runs the code by replay. Restoring a
// session with paused executions then costs no sandbox worker, and no
// replay of pauses nobody decides. A run in any other state (a call in
// flight when its node died) is restored by [Engine.Restore] at once. It
// returns the pause, or the outcome of the immediate restore.
func (e *Engine) RestoreDormant(run runstore.Run, entries []runstore.JournalEntry) Outcome {
	p, ok := dormantPause(run, entries)
	if !ok {
		return e.Restore(run, entries)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Outcome{Status: StatusInternal, Internal: ErrClosed}
	}
	if _, known := e.paused[p.ID]; known {
		e.mu.Unlock()
		return Outcome{Status: StatusPaused, Pause: &p}
	}
	e.paused[p.ID] = &pending{Pause: p, reply: make(chan Response, 1), durable: true, dormant: true}
	e.dormant++
	e.mu.Unlock()
	e.reportPause(&p)
	return Outcome{Status: StatusPaused, Pause: &p}
}

// dormantPause is the pause a run's journal ends with, if it ends with the
// run's current pause awaiting a decision.
func dormantPause(run runstore.Run, entries []runstore.JournalEntry) (Pause, bool) {
	if len(entries) == 0 || run.PauseID == "" {
		return Pause{}, false
	}
	last := entries[len(entries)-1]
	if last.State != runstore.JournalAwaiting || last.PauseID != run.PauseID || last.Seq != len(entries)-1 {
		return Pause{}, false
	}
	var c Call
	if json.Unmarshal([]byte(last.Data), &c) != nil || c.Pause == nil || c.Pause.ID != run.PauseID {
		return Pause{}, false
	}
	var args any
	if len(c.Pause.Args) > 0 {
		_ = json.Unmarshal(c.Pause.Args, &args)
	}
	r := c.Pause
	return Pause{ID: r.ID, Address: r.Address, Args: args, ApprovalText: r.ApprovalText, Message: r.Message, Policy: r.Policy,
		Deadline: time.UnixMilli(r.DeadlineMs), Principal: runOwner(run)}, true
}

// restoreFailed settles a run that ended while it was being restored.
func (e *Engine) restoreFailed(run runstore.Run, out Outcome) Outcome {
	if out.Status == StatusInternal {
		e.cfg.Logger.Error("engine: restoring a durable execution failed", "run", run.ID, "err", out.Internal)
	}
	if run.PauseID == "" {
		return out
	}
	e.mu.Lock()
	e.remember(run.PauseID, runOwner(run), out)
	e.mu.Unlock()
	if e.cfg.Hooks != nil {
		e.cfg.Hooks.Settled(run.PauseID)
	}
	return out
}

// settle records the final outcome of a durable run (unless the engine is
// shutting down: then the run is not over, it continues elsewhere).
func (e *Engine) settle(d *durable, out Outcome) {
	if d.deferred || errors.Is(d.failure(), errReleased) {
		return // never paused (nothing stored to settle), or released: not over
	}
	if e.base.Err() != nil {
		// Shutting down: the run is not over, it continues elsewhere; an
		// outcome it holds is written so the replay answers it.
		if err := d.write(nil, false, nil, nil); err != nil {
			e.cfg.Logger.Warn("engine: journal a call's outcome at shutdown", "run", d.run.ID, "err", err)
		}
		return
	}
	rec := outcomeRecord{Status: out.Status, Value: out.Result.Value, Emitted: out.Result.Emitted, Logs: out.Result.Logs,
		ToolCalls: out.Result.ToolCalls, Error: out.Error, ErrorKind: out.ErrorKind, Limit: out.ErrorLimit}
	if out.Status == StatusInternal {
		rec.Error = "internal error"
	}
	b, err := json.Marshal(rec)
	if err != nil {
		b, _ = json.Marshal(outcomeRecord{Status: StatusInternal, Error: "internal error"})
	}
	d.run.Outcome, d.run.Settled = string(b), e.cfg.Clock.Now()
	var settled []string
	if d.run.PauseID != "" {
		settled = []string{d.run.PauseID}
	}
	if err := d.write(nil, true, nil, settled); err != nil {
		e.cfg.Logger.Warn("engine: settle durable execution", "run", d.run.ID, "err", err)
	}
}

// runOwner is the principal that ran r; if its spec cannot be read, a
// principal no caller can be (only the owning grain's System access
// allows it).
func runOwner(r runstore.Run) Principal {
	var spec runSpec
	if json.Unmarshal([]byte(r.Spec), &spec) != nil {
		return Principal{User: "\x00unreadable", Org: "\x00unreadable"}
	}
	return Principal{User: spec.User, Org: spec.Org, Role: spec.Role}
}

// settledOutcome decodes a settled run's outcome.
func settledOutcome(r runstore.Run) (Outcome, bool) {
	var rec outcomeRecord
	if r.Settled.IsZero() || json.Unmarshal([]byte(r.Outcome), &rec) != nil {
		return Outcome{}, false
	}
	out := Outcome{Status: rec.Status, Error: rec.Error, ErrorKind: rec.ErrorKind, ErrorLimit: rec.Limit,
		Result: sandbox.Result{Value: rec.Value, Emitted: rec.Emitted, Logs: rec.Logs, ToolCalls: rec.ToolCalls}}
	if rec.Status == StatusInternal {
		out.Internal = errors.New("engine: the execution failed internally (replayed from the journal)")
	}
	return out, true
}

// finishRun turns the sandbox's result into the run's outcome: a stop
// cause (divergence, journal failure) wins; a replay that ended before its
// journal did diverged.
func (d *durable) finishRun(out Outcome) Outcome {
	err := d.failure()
	if err == nil && d.replay != nil {
		err = ReplayEnd(d.replay, int(d.next.Load()))
	}
	switch {
	case err == nil:
		return out
	case errors.Is(err, ErrDiverged):
		return Outcome{Status: StatusError, Result: out.Result, Error: err.Error(), ErrorKind: KindDiverged}
	default:
		return Outcome{Status: StatusInternal, Result: out.Result, Internal: err}
	}
}

// durableCall is Call for a durable run: journal first, answer from the
// journal when replaying.
func (h *host) durableCall(ctx context.Context, path string, args any) (any, error) {
	d := h.ex.dur
	if err := d.failure(); err != nil {
		return nil, err
	}
	c := durableStep{seq: int(d.next.Add(1) - 1), path: path, hash: CallHash(path, args), args: args}
	step, err := ReplayStep(d.replay, c.seq, path, c.hash, false)
	if step == StepLive || step == StepInterrupted {
		// The tool is needed live, or to know whether it may be retried.
		c.tool, c.known = h.e.cfg.Tools.Lookup(ctx, path)
		if step == StepInterrupted && c.known && c.tool.Idempotent {
			step = StepRetry
		}
	}
	if step == StepLive {
		return h.liveCall(ctx, c)
	}
	return h.replayedCall(ctx, c, step, err)
}

// durableStep is one tool call of a durable run: its position in the
// journal, what it calls, and the tool (known: found).
type durableStep struct {
	seq        int
	path, hash string
	args       any
	tool       tools.Tool
	known      bool
}

// replayedCall is a call the journal already holds (step, not live):
// answered from it, paused again, refused as interrupted, retried, or the
// run diverged (err).
func (h *host) replayedCall(ctx context.Context, c durableStep, step Step, err error) (any, error) {
	d := h.ex.dur
	switch step {
	case StepDiverged:
		return nil, d.stopWith(err)
	case StepAnswer:
		noteCall(ctx, CallReplayedKey.Bool(true))
		e := d.replay[c.seq]
		d.tick(e.AtMs)
		return e.answer()
	case StepInterrupted:
		msg := fmt.Sprintf("%s: the call to tools.%s was in flight when its node stopped; it may or may not have taken effect, and it was not sent again",
			KindInterrupted, c.path)
		return h.done(c.seq, c.path, c.hash, nil, errors.New(msg))
	case StepRetry:
		argMap, _ := c.args.(map[string]any)
		return h.send(ctx, c.seq, c.path, c.hash, argMap)
	case StepPause:
		return h.pausedAgain(ctx, c)
	}
	return h.liveCall(ctx, c)
}

// pausedAgain restores the journaled pause of call c and waits for its
// decision.
func (h *host) pausedAgain(ctx context.Context, c durableStep) (any, error) {
	d := h.ex.dur
	p := d.replay[c.seq].Pause
	if p == nil {
		return nil, d.stopWith(fmt.Errorf("%w: call #%d awaits approval but its pause is missing", ErrDiverged, c.seq+1))
	}
	var pa any
	if len(p.Args) > 0 {
		_ = json.Unmarshal(p.Args, &pa)
	}
	if d.pauseAt == nil {
		d.pauseAt = map[int]string{}
	}
	d.pauseAt[c.seq] = p.ID
	pend := h.pending(Pause{ID: p.ID, Address: p.Address, Args: pa, ApprovalText: p.ApprovalText, Message: p.Message,
		Policy: p.Policy, Deadline: time.UnixMilli(p.DeadlineMs), Principal: h.ex.principal})
	return h.decided(ctx, c.seq, c.path, c.hash, c.args, pend)
}

// liveCall is a call with nothing journaled yet: search and describe are
// answered here; a tool call is refused, paused for approval or sent, as
// the policy says.
func (h *host) liveCall(ctx context.Context, c durableStep) (any, error) {
	seq, path, hash, args := c.seq, c.path, c.hash, c.args
	if path == "search" || path == "describe" {
		res, err := h.local(ctx, path, args)
		return h.done(seq, path, hash, res, err)
	}
	if !c.known {
		return h.done(seq, path, hash, nil, h.e.unknownTool(path))
	}
	argMap, _ := args.(map[string]any)
	if args != nil && argMap == nil {
		return h.done(seq, path, hash, nil, fmt.Errorf("tools.%s takes one object argument", path))
	}
	dec := h.e.cfg.Policy.Evaluate(path, h.ex.principal.Org, h.ex.principal.User, c.tool.RequiresApproval)
	noteCall(ctx, PolicyKey.String(dec.Action.String()))
	switch dec.Action {
	case policy.Block:
		return h.done(seq, path, hash, nil, fmt.Errorf("tools.%s is blocked by policy (%s)", path, dec.Pattern))
	case policy.RequireApproval:
		return h.journalPause(ctx, c, dec)
	}
	return h.send(ctx, seq, path, hash, argMap)
}

// journalPause pauses call c for approval (the policy's decision dec),
// journals the pause, then waits for its decision.
func (h *host) journalPause(ctx context.Context, c durableStep, dec policy.Decision) (any, error) {
	d := h.ex.dur
	pend := h.pending(h.newPause(c.tool, c.args, dec))
	raw, _ := json.Marshal(c.args)
	p := pend.Pause
	rec := Call{Path: c.path, Hash: c.hash, Pause: &pauseRecord{ID: p.ID, Address: p.Address, Args: raw, ApprovalText: p.ApprovalText,
		Message: p.Message, Policy: p.Policy, DeadlineMs: p.Deadline.UnixMilli()}}
	// One step: the awaiting entry, the run naming the pause, the
	// directory row that publishes it, and the settle of the pause
	// the run resumed past (if any).
	e, err := d.entry(c.seq, stateAwaiting, rec)
	if err != nil {
		return nil, d.stopWith(fmt.Errorf("engine: journal a pause: %w", err))
	}
	var settled []string
	if d.run.PauseID != "" {
		settled = []string{d.run.PauseID}
	}
	d.run.PauseID = p.ID
	d.link = tracing.Inject(ctx)["traceparent"] // "" with tracing off
	if d.deferred {
		d.keep(e)
		err = d.flush(&p)
	} else {
		err = d.write([]runstore.JournalEntry{e}, true, &p, settled)
	}
	if err != nil {
		return nil, d.stopWith(fmt.Errorf("engine: journal a pause: %w", err))
	}
	return h.decided(ctx, c.seq, c.path, c.hash, c.args, pend)
}

// decided waits for the decision of a pause and acts on it: a decline is
// the call's (journaled) outcome; an accept sends the call.
func (h *host) decided(ctx context.Context, seq int, path, hash string, args any, p *pending) (any, error) {
	resp, err := h.wait(ctx, p)
	if err != nil {
		return nil, err // the engine stops: nothing to journal, the run continues elsewhere
	}
	if resp.Action != Accept {
		return h.done(seq, path, hash, nil, &DeclinedError{Address: p.Address, Action: resp.Action, Reason: resp.Reason})
	}
	argMap, _ := args.(map[string]any)
	return h.send(ctx, seq, path, hash, argMap)
}

// send journals the call as in flight, makes it, and journals its outcome.
func (h *host) send(ctx context.Context, seq int, path, hash string, args map[string]any) (any, error) {
	d := h.ex.dur
	if err := d.putEntry(seq, stateInFlight, Call{Path: path, Hash: hash}); err != nil {
		return nil, d.stopWith(fmt.Errorf("engine: journal a call before sending it: %w", err))
	}
	res, err := h.callTool(ctx, path, args)
	if err != nil && h.e.base.Err() != nil {
		// The runtime is being disposed (a graceful stop, a move) and its
		// shutdown cut the call: whether it took effect is unknown, and the
		// run goes on in the next activation. Journaling this failure as
		// the call's outcome would make the replay throw it into the code;
		// the entry stays in flight instead, as after a crash (retried if
		// idempotent, else execution_interrupted).
		return nil, d.stopWith(fmt.Errorf("%w: the call to tools.%s was cut by the shutdown", ErrClosed, path))
	}
	return h.done(seq, path, hash, res, err)
}

// done journals a call's outcome and returns it as the code will see it
// (the same JSON a replay hands back).
func (h *host) done(seq int, path, hash string, res any, callErr error) (any, error) {
	d := h.ex.dur
	c := Call{Path: path, Hash: hash, AtMs: h.e.cfg.Clock.Now().UnixMilli()}
	if callErr != nil {
		c.Failed, c.Error = true, callErr.Error()
	} else if b, err := json.Marshal(res); err != nil {
		c.Failed, c.Error = true, fmt.Sprintf("tools.%s returned a result that is not JSON-serializable: %v", path, err)
	} else {
		c.Result = b
	}
	if err := d.hold(seq, stateDone, c); err != nil {
		return nil, d.stopWith(fmt.Errorf("engine: journal a call's outcome: %w", err))
	}
	d.tick(c.AtMs)
	return c.answer()
}

// answer is a journaled outcome as the code sees it.
func (c Call) answer() (any, error) {
	if c.Failed {
		return nil, errors.New(c.Error)
	}
	if len(c.Result) == 0 {
		return nil, nil
	}
	return c.Result, nil
}

// RunStore is the part of runstore.Store (the durable runs, with the
// execution directory their steps publish to) a [StoreJournal] uses.
type RunStore interface {
	WriteRun(ctx context.Context, grain string, epoch uint64, w runstore.RunWrite) error
	GetRun(ctx context.Context, runID string) (runstore.Run, []runstore.JournalEntry, error)
	RunByPause(ctx context.Context, pauseID string) (string, error)
}

// StoreJournal is the [Journal] of one grain activation: every write is
// fenced by the activation's epoch, so a stale activation (its grain moved
// on) can never add to a run's journal.
type StoreJournal struct {
	// Store keeps the runs.
	Store RunStore
	// Grain is the owning grain's store key ("session/<id>").
	Grain string
	// Epoch is the activation's ownership epoch.
	Epoch uint64
	// EpochOf, if set, reports the epoch instead of Epoch, for an
	// activation that takes ownership after its journal exists (a session
	// created by its initialize exchange).
	EpochOf func() uint64
	// Publish keeps the execution directory in step: a write that makes a
	// pause resumable publishes its row, one that resumes past a pause
	// settles it, in the same transaction (sessions; sessionless pauses
	// are answered in-band and not published).
	Publish bool
	// Deadlines, if not "" (with Publish), names the owning grain's
	// reminder of a published pause's deadline: Deadlines + the pause's
	// id. The write that publishes a pause sets it (due at the pause's
	// deadline, linked to the call that paused), the one that settles
	// pauses cancels theirs, in the same transaction: the grain writes
	// neither itself. Stored is told of them once the write committed
	// (for the node's reminder service).
	Deadlines string
	Stored    func(set []store.Reminder, cancelled []string)
}

func (j StoreJournal) epoch() uint64 {
	if j.EpochOf != nil {
		return j.EpochOf()
	}
	return j.Epoch
}

// Write implements [Journal]. A store outage (e.g. a database restart) is
// ridden out until ctx ends: every write in it is an idempotent upsert.
func (j StoreJournal) Write(ctx context.Context, w JournalWrite) error {
	rw := runstore.RunWrite{RunID: w.RunID, Entries: w.Entries, Run: w.Run}
	if j.Publish {
		if p := w.Paused; p != nil && w.Run != nil {
			args, _ := json.Marshal(p.Args)
			rw.Publish = &directory.Execution{ID: p.ID, Session: w.Run.Session, User: p.Principal.User, Org: p.Principal.Org,
				Address: p.Address, Message: p.Message, ApprovalText: p.ApprovalText, ArgsJSON: string(args), Deadline: p.Deadline}
		}
		rw.Settle, rw.SettledAt = w.Settled, time.Now()
		j.deadlines(&rw, w)
	}
	return store.ThroughOutage(ctx, func() error { return j.Store.WriteRun(ctx, j.Grain, j.epoch(), rw) })
}

// deadlines adds to rw the deadline reminders of w's pause (set) and of
// the pauses it settles (cancelled), if the journal carries them.
func (j StoreJournal) deadlines(rw *runstore.RunWrite, w JournalWrite) {
	if j.Deadlines == "" {
		return
	}
	if p := w.Paused; p != nil && rw.Publish != nil {
		rw.SetReminders = []store.Reminder{{Name: j.Deadlines + p.ID, DueAt: p.Deadline, Link: w.Link}}
	}
	for _, id := range w.Settled {
		rw.CancelReminders = append(rw.CancelReminders, j.Deadlines+id)
	}
	rw.Stored = j.Stored
}

// RunOf implements [Journal].
func (j StoreJournal) RunOf(ctx context.Context, pauseID string) (runstore.Run, []runstore.JournalEntry, bool) {
	id, err := j.Store.RunByPause(ctx, pauseID)
	if err != nil {
		return runstore.Run{}, nil, false
	}
	r, entries, err := j.Store.GetRun(ctx, id)
	if err != nil {
		return runstore.Run{}, nil, false
	}
	return r, entries, true
}
