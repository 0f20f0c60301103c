package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
)

// Code-mode pauses as questions (docs/sdk.md §6, "One pause path", steps
// 2–3): AskStatus and AwaitAsk read a code-mode execution id of a session
// of the caller's user as a question, and DecideAsk decides it in band on
// the owning session grain. Nothing new is stored: the execution
// directory's row names the owner and holds a surface's decision, and the
// engine's journal (runstore) holds what the execution did with its
// pause — a read of them writes nothing, and an older node, which does
// not read them, is unaffected.

// ReasonCodeSettled is the Reason of the status of a code-mode pause whose
// execution ended without the journal recording its decision (a replay
// that failed, a cancel of its run).
const ReasonCodeSettled = "execution_settled"

// codePause is a code-mode pause as the stores hold it.
type codePause struct {
	e          directory.Execution
	ps         engine.PauseState
	runSettled bool
}

// codePauseOf is code-mode pause id, if the caller's user may read it
// (the rule of a code resume from another session, sessionPauseAccess:
// another organization's, a task's or a sessionless execution's pause is
// app.ErrUnknownAsk; another user's app.ErrForeignAsk). found is false
// when id is no code-mode pause (no run paused with it).
func (a *asks) codePauseOf(ctx context.Context, id string) (cp codePause, found bool, err error) {
	if a.dir == nil || a.r.b == nil || a.r.b.runs == nil {
		return cp, false, nil
	}
	e, err := a.dir.GetExecution(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, fmt.Errorf("%w: look up execution %s: %v", app.ErrRetry, id, err)
	}
	runID, err := a.r.b.runs.RunByPause(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, fmt.Errorf("%w: look up the run of execution %s: %v", app.ErrRetry, id, err)
	}
	p := a.r.scope.principal
	switch sessionPauseAccess(e, p.GetOrg(), p.GetUser()) {
	case accessUnknown:
		return cp, false, app.ErrUnknownAsk
	case accessForeign:
		return cp, false, app.ErrForeignAsk
	}
	run, entries, err := a.r.b.runs.GetRun(ctx, runID)
	if err != nil {
		return cp, false, fmt.Errorf("%w: read the run of execution %s: %v", app.ErrRetry, id, err)
	}
	return codePause{e: e, ps: engine.PauseStateOf(entries, id, e.Address), runSettled: !run.Settled.IsZero()}, true, nil
}

// orCodePause is code-mode pause id when err, a question reader's error,
// says id is no question (app.ErrUnknownAsk) and it is a code-mode pause
// the caller may read; else err (or the code pause's access error).
func (a *asks) orCodePause(ctx context.Context, id string, err error) (codePause, error) {
	if !errors.Is(err, app.ErrUnknownAsk) {
		return codePause{}, err
	}
	cp, found, cerr := a.codePauseOf(ctx, id)
	switch {
	case cerr != nil:
		return cp, cerr
	case !found:
		return cp, err
	}
	return cp, nil
}

// codeStatus is what code-mode pause cp came to at now: the journal's
// decision (the window's decline is "expired"; who decided is the
// directory's decider of the same action), else a surface's decision the
// directory recorded and the engine is applying, else expired once its
// deadline passed, else — its execution ended without a decision —
// declined with ReasonCodeSettled, else still pending.
func codeStatus(cp codePause, now time.Time) app.PendingStatus {
	e, ps := cp.e, cp.ps
	s := app.PendingStatus{ID: e.ID, State: app.AskWaiting, Summary: e.Message, Deadline: e.Deadline, Details: codeDetails(e)}
	switch {
	case ps.Decided && ps.Action == engine.Decline && ps.Reason == engine.ReasonApprovalTimeout:
		s.State, s.Decision = app.AskExpired, app.Decision{Reason: session.ReasonApprovalTimeout}
	case ps.Decided:
		s.State, s.Decision = app.AskDecided, app.Decision{Accepted: ps.Action == engine.Accept, Reason: ps.Reason}
		if e.Decision == ps.Action {
			s.Decision.By = e.DecidedBy
		}
	case e.Decision != "":
		s.State, s.Decision = app.AskDecided, app.Decision{Accepted: e.Decision == engine.Accept, Reason: e.Reason, By: e.DecidedBy}
	case !e.Deadline.IsZero() && !now.Before(e.Deadline):
		s.State, s.Decision = app.AskExpired, app.Decision{Reason: session.ReasonApprovalTimeout}
	case cp.runSettled || !e.Settled.IsZero():
		s.State, s.Decision = app.AskDecided, app.Decision{Reason: ReasonCodeSettled}
	}
	return s
}

// codeDetails are a code-mode pause's details: the call's address and
// arguments, as the approval surfaces show them.
func codeDetails(e directory.Execution) map[string]any {
	d := map[string]any{"address": e.Address}
	var args any
	if e.ArgsJSON != "" && json.Unmarshal([]byte(e.ArgsJSON), &args) == nil {
		d["args"] = args
	}
	return d
}

// decideCode is DecideAsk of code-mode pause cp: taken in band, as code
// mode's own resume with an action is (app.InBandFor: a code pause always
// lets its client decide; the caller's role under --approvers), by the
// owning session grain, which records it as a surface's decision and
// hands it to its engine. A code pause takes no input.
func (cr *callRun) decideCode(ctx context.Context, cp codePause, ans app.Answer) (app.PendingStatus, error) {
	s := codeStatus(cp, cr.a.now())
	if s.State != app.AskWaiting {
		return s, app.ErrAlreadyDecided
	}
	who := cr.caller()
	if app.InBandFor(true, who.GetRole(), cr.a.approvers) != app.InBandOpen {
		return s, app.ErrMayNotDecide
	}
	if ans.Accept && len(ans.Input) > 0 {
		return s, app.ErrNoInput
	}
	if cr.a.decide == nil {
		return app.PendingStatus{}, errors.New("mcpgrain: this node cannot route in-band decisions (mcpruntime.Config.Decide unset)")
	}
	action := engine.Decline
	if ans.Accept {
		action = engine.Accept
	}
	reply, err := cr.a.send(ctx, cp.e.Session, inBandDecide(who, cp.e.ID, action, nil, ans.Reason))
	if err != nil {
		return app.PendingStatus{}, err
	}
	reread := func() app.PendingStatus {
		if now, found, err := cr.a.codePauseOf(ctx, cp.e.ID); err == nil && found {
			cp = now
		}
		return codeStatus(cp, cr.a.now())
	}
	return inBandOutcome(s, who, action, reply, reread)
}
