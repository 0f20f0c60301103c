package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// In-band decisions of a session's questions (docs/sdk.md §4, "Decided by
// the client"): a question asked with Question.ClientMayDecide may be
// decided by the caller's own client — a blocking Ask's native
// elicitation, a later call's DecideAsk — if app.InBandFor lets the
// caller's role decide. Either way the answer is not applied here: it is
// sent to the session grain that owns the question as an in-band
// ExecutionDecide (Config.Decide), which checks the organization, the
// role (--approvers) and that the question lets its client decide, and
// records it exactly as an approval surface's decision — once, with the
// directory's entry, handed back through ResolveApproval — so that a
// surface's decision and the client's race on one record.

// inBandTimeout bounds sending an in-band decision to the owning grain
// (a forwarded resume's bound: ForwardTimeout).
const inBandTimeout = ForwardTimeout

// caller is the principal of the request req's run serves (its role may
// differ from the session owner's: the key the request came with).
func (cr *callRun) caller() *pb.Principal {
	if ex := cr.req.GetExtra(); ex != nil && ex.Header != nil {
		return exchange.PrincipalOf(ex.Header)
	}
	return &pb.Principal{}
}

// askClient asks the caller's client question id (q, as the handler asks
// it) with a native elicitation while the run waits for the decision,
// when q lets the client decide and the caller's role may; the answer is
// offered to the session grain as an in-band decision. It returns the
// function that stops asking (the run's wait ended) and waits for the
// asking to end. A client that cannot be asked (no form elicitation), an
// elicitation that fails and an answer that does not match the form
// decide nothing: the question waits for the approval surfaces.
func (cr *callRun) askClient(ctx context.Context, id string, q app.Question) (stop func()) {
	who := cr.caller()
	if app.InBandFor(q.ClientMayDecide, who.GetRole(), cr.a.approvers) != app.InBandOpen || cr.a.decide == nil || app.Sessionless(cr.req) {
		return func() {}
	}
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		schema := q.Form
		if schema == nil {
			schema = &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
		}
		res, err := app.Elicit(ectx, cr.req, approvalKey, q.Summary, schema)
		if err != nil {
			if ectx.Err() == nil {
				cr.a.r.log.Debug("mcpruntime: the client was not asked in band; the question waits for the approval surfaces", "execution", id, "err", err)
			}
			return
		}
		if res.Action == engine.Accept && q.Form != nil {
			if err := checkForm(q.Form, res.Content); err != nil {
				cr.a.r.log.Info("mcpruntime: an in-band answer does not match the question's form; the question waits", "execution", id, "err", err)
				return
			}
		}
		m := inBandDecide(who, id, res.Action, res.Content, "")
		if reply, err := cr.a.send(ectx, cr.a.r.id, m); err != nil {
			cr.a.r.log.Warn("mcpruntime: send an in-band decision to the session", "execution", id, "err", err)
		} else if reply.GetStatus() != pb.ExecutionReply_STATUS_OK {
			cr.a.r.log.Info("mcpruntime: an in-band decision was not taken", "execution", id, "status", reply.GetStatus().String())
		}
	}()
	return func() { cancel(); <-done }
}

// inBandDecide is the in-band ExecutionDecide of who's answer to
// question id: the reason rides in the content, as a surface's does.
func inBandDecide(who *pb.Principal, id, action string, content map[string]any, reason string) *pb.ExecutionDecide {
	m := &pb.ExecutionDecide{Principal: who, ExecutionId: id, Action: action, InBand: true}
	if reason != "" {
		c := make(map[string]any, len(content)+1)
		for k, v := range content {
			c[k] = v
		}
		c["reason"] = reason
		content = c
	}
	if len(content) > 0 {
		b, _ := json.Marshal(content)
		m.ContentJson = string(b)
	}
	return m
}

// send hands an in-band decision to session owner's grain.
func (a *asks) send(ctx context.Context, owner string, m *pb.ExecutionDecide) (*pb.ExecutionReply, error) {
	ctx, cancel := context.WithTimeout(ctx, inBandTimeout)
	defer cancel()
	reply, err := a.decide(ctx, owner, m)
	if err != nil {
		return nil, fmt.Errorf("%w: send the decision to its session: %v", app.ErrRetry, err)
	}
	return reply, nil
}

// DecideAsk implements app.Decider: pending question id, one of the
// caller's (this session's or another of its sessions', as AskStatus finds
// it), decided in band on the session that owns it; a code-mode
// execution's pause of a session of the caller's user likewise
// (decideCode).
func (cr *callRun) DecideAsk(ctx context.Context, id string, ans app.Answer) (app.PendingStatus, error) {
	q, own, err := cr.a.laterQuestion(ctx, id)
	if err != nil {
		cp, err := cr.a.orCodePause(ctx, id, err)
		if err != nil {
			return app.PendingStatus{}, err
		}
		return cr.decideCode(ctx, cp, ans)
	}
	if s := laterStatus(q, cr.a.now()); s.State != app.AskWaiting {
		return s, app.ErrAlreadyDecided
	}
	who := cr.caller()
	switch app.InBandFor(q.InBand, who.GetRole(), cr.a.approvers) {
	case app.InBandClosed:
		return laterStatus(q, cr.a.now()), app.ErrClientMayNotDecide
	case app.InBandRefused:
		return laterStatus(q, cr.a.now()), app.ErrMayNotDecide
	}
	if cr.a.decide == nil {
		return app.PendingStatus{}, errors.New("mcpgrain: this node cannot route in-band decisions (mcpruntime.Config.Decide unset)")
	}
	owner := cr.a.r.id
	if !own {
		if owner, err = cr.a.sessionOwner(ctx, id, app.ErrClientMayNotDecide); err != nil {
			return app.PendingStatus{}, err
		}
	}
	action := engine.Decline
	if ans.Accept {
		action = engine.Accept
	}
	reply, err := cr.a.send(ctx, owner, inBandDecide(who, id, action, ans.Input, ans.Reason))
	if err != nil {
		return app.PendingStatus{}, err
	}
	reread := func() app.PendingStatus {
		if now, _, err := cr.a.laterQuestion(ctx, q.ID); err == nil {
			q = now
		}
		return laterStatus(q, cr.a.now())
	}
	return inBandOutcome(laterStatus(q, cr.a.now()), who, action, reply, reread)
}

// inBandOutcome is what DecideAsk answers for the owning grain's reply to
// who's decision (action) of a question whose status was s; reread reads
// the status again (the decision that stands, when another came first).
func inBandOutcome(s app.PendingStatus, who *pb.Principal, action string, reply *pb.ExecutionReply, reread func() app.PendingStatus) (app.PendingStatus, error) {
	switch reply.GetStatus() {
	case pb.ExecutionReply_STATUS_OK:
		d := decisionOf(&pb.ApprovalDecision{Action: action, DecidedBy: who.GetUser()}, false)
		s.State, s.Decision = app.AskDecided, *d
		return s, nil
	case pb.ExecutionReply_STATUS_ALREADY_DECIDED:
		return reread(), app.ErrAlreadyDecided
	case pb.ExecutionReply_STATUS_FORBIDDEN:
		if reply.GetText() == InBandClosedText {
			return s, app.ErrClientMayNotDecide
		}
		return s, app.ErrMayNotDecide
	}
	return app.PendingStatus{}, app.ErrUnknownAsk
}

// InBandClosedText is the Text of the FORBIDDEN reply of a session grain
// to an in-band decision of a pause its runtime does not let the client
// decide (session.InBandPauses).
const InBandClosedText = session.InBandClosedText

var _ session.InBandPauses = (*Runtime)(nil)

// ClientMayDecide implements session.InBandPauses: whether question
// execID, waiting for its decision, was asked with ClientMayDecide; a
// code-mode execution's pause always lets its client decide (code mode's
// own resume with an action, native elicitation and 2026-07-28 retry do,
// under app.InBandFor), so a DecideAsk of it from another session is
// taken as they are (docs/sdk.md §6, "One pause path", step 2).
func (r *Runtime) ClientMayDecide(execID string) bool {
	if r.asks == nil {
		return r.codePaused(execID)
	}
	a := r.asks
	a.mu.Lock()
	p, ok := a.pauses[execID]
	a.mu.Unlock()
	if !ok {
		return r.codePaused(execID)
	}
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.c.doc.Asks[p.idx].InBand
}

// codePaused reports whether execID is a pause of the session's code-mode
// engine (one restored from its journal included).
func (r *Runtime) codePaused(execID string) bool {
	e := r.builtEngine()
	if e == nil {
		return false
	}
	_, ok := e.Paused(execID, engine.System)
	return ok
}
