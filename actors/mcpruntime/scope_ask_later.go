package mcpruntime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
)

// Pending questions (the SDK's AskLater, docs/sdk.md §4): a question
// published from a tool call that does not wait for it. It is a durable
// call of its own — a row of callstore under the session, id
// laterCallID(question), whose journal is the one question — published
// with its directory row in one fenced transaction, exactly as an Ask's
// question: the same surfaces list it, the session grain decides it
// (roles checked there) and hands the decision to resolve, which journals
// it and completes the row; the session's approval reminder declines it
// when the window lapses. No handler waits for it: the pause is durable
// (no lease; the session may passivate), and a fresh runtime restores it
// with the session's other paused calls. The asking call journals it as
// a step (laterStep) whose execution id derives from the step's key, so a
// run of the call again finds the question published by an earlier run
// instead of asking twice. A principal's undecided questions are capped
// (Config.MaxPendingAsks): the publishing write counts them in its
// transaction (callstore.Cap), and refuses one more with
// app.ErrTooManyPendingAsks.

// DefaultMaxPendingAsks is the default cap on one principal's pending
// questions ([Config.MaxPendingAsks], --max-pending-asks-per-principal).
const DefaultMaxPendingAsks = 100

// laterCap is the cap on a principal's pending questions of
// Config.MaxPendingAsks (0: unlimited).
func laterCap(n int) int {
	switch {
	case n == 0:
		return DefaultMaxPendingAsks
	case n < 0:
		return 0
	}
	return n
}

// laterStep is the name of the step an AskLater journals in its call.
const laterStep = "mcpgrain.ask_later"

// laterCallID is the id of the durable call that holds pending question
// execID; laterIdent its identity (never a hash of a tool's call: no
// open call's retry finds it).
func laterCallID(execID string) string { return "later_" + execID }
func laterIdent(execID string) string  { return "later/" + execID }

// laterExecID is the execution id of the question the step with key
// stepKey publishes: the same in every run of the call.
func laterExecID(stepKey string) string {
	h := sha256.Sum256([]byte("ask_later\x00" + stepKey))
	return "exec_" + hex.EncodeToString(h[:16])
}

// laterRecord is the step's journaled result.
type laterRecord struct {
	ID         string `json:"id"`
	DeadlineMs int64  `json:"deadlineMs"`
}

// askLaterOnce runs the asking step of a call: publish publishes pending
// question id (derived from the step's key) and returns its deadline; the
// step is journaled, so a retry of the call gets the first run's question
// back instead of asking a second one.
func askLaterOnce(ctx context.Context, step func(context.Context, string, func(context.Context) (json.RawMessage, error)) (json.RawMessage, error),
	publish func(ctx context.Context, id string) (time.Time, error)) (laterRecord, error) {
	raw, err := step(ctx, laterStep, func(ctx context.Context) (json.RawMessage, error) {
		id := laterExecID(app.StepKeyOf(ctx))
		deadline, err := publish(ctx, id)
		if err != nil {
			return nil, err
		}
		return json.Marshal(laterRecord{ID: id, DeadlineMs: deadline.UnixMilli()})
	})
	if err != nil {
		return laterRecord{}, err
	}
	var rec laterRecord
	if err := json.Unmarshal(raw, &rec); err != nil || rec.ID == "" {
		return laterRecord{}, fmt.Errorf("%w: the call's asking step is not a pending question", app.ErrDiverged)
	}
	return rec, nil
}

// AskLater implements app.Later.
func (cr *callRun) AskLater(ctx context.Context, q app.Question) (app.Pending, error) {
	if q.Summary == "" {
		return app.Pending{}, errors.New("mcpgrain: a Question needs a Summary")
	}
	if q.Continuation != "" {
		if _, ok := cr.a.r.continuations()[q.Continuation]; !ok {
			return app.Pending{}, fmt.Errorf("%w: %q", app.ErrUnknownContinuation, q.Continuation)
		}
	}
	var tool string
	if cr.req.Params != nil {
		tool = cr.req.Params.Name
	}
	rec, err := askLaterOnce(ctx, cr.Step, func(ctx context.Context, id string) (time.Time, error) {
		return cr.a.publishLater(ctx, id, tool, q)
	})
	if err != nil {
		return app.Pending{}, err
	}
	return app.Pending{ID: rec.ID, URL: cr.a.approvalURL(cr.req, rec.ID), Deadline: time.UnixMilli(rec.DeadlineMs)}, nil
}

// approvalURL is question id's approval page: the browser mode's URL of
// code mode ([exchange.ApprovalURL], as codemode's approvalURL), at the
// configured public origin or the request's.
func (a *asks) approvalURL(req *mcp.CallToolRequest, id string) string {
	var h http.Header
	if req.GetExtra() != nil {
		h = req.GetExtra().Header
	}
	return exchange.ApprovalURL(a.publicURL, h, id)
}

// publishLater journals and publishes pending question id (unless an
// earlier run of the asking step did) and arms its deadline; it returns
// the deadline.
func (a *asks) publishLater(ctx context.Context, id, tool string, q app.Question) (time.Time, error) {
	if deadline, done, err := publishedDeadline(ctx, a.st, a.r.id, id); done || err != nil {
		return deadline, err
	}
	now := a.now()
	deadline := now.Add(a.window)
	c := &durableCall{turn: make(chan struct{}, 1),
		row: callstore.Call{ID: laterCallID(id), Session: a.r.id, Ident: laterIdent(id), PauseID: id, Created: now},
		doc: callDoc{Tool: tool, Later: true, Asks: []callQuestion{{
			ID: id, Summary: q.Summary, Details: q.Details, Form: q.Form != nil, DeadlineMs: deadline.UnixMilli(), InBand: q.ClientMayDecide, Continuation: q.Continuation}}}}
	// Known to the runtime and the session (no waiter: a durable pause, no
	// lease; its deadline's reminder armed) before its directory row is
	// visible: a decision taken as soon as a surface lists it finds it
	// (waiting for c.mu), and its Settled comes after this Paused.
	c.mu.Lock()
	a.mu.Lock()
	a.setPause(id, &askPause{c: c, idx: 0, done: make(chan struct{})})
	a.mu.Unlock()
	a.leases.Paused(id, deadline)
	w := callstore.Write{Publish: a.directoryRow(c, 0)}
	if a.laterCap > 0 {
		w.Cap = &callstore.Cap{Max: a.laterCap, Prefix: laterCallID(""), Now: now}
	}
	err := a.write(c, w)
	c.mu.Unlock()
	if err != nil {
		a.mu.Lock()
		a.dropPause(id)
		a.mu.Unlock()
		a.leases.Settled(id)
		return time.Time{}, err
	}
	return deadline, nil
}

// AskStatus implements app.Later: a question's status, or a code-mode
// execution's pause's (codeStatus).
func (cr *callRun) AskStatus(ctx context.Context, id string) (app.PendingStatus, error) {
	q, _, err := cr.a.laterQuestion(ctx, id)
	if err != nil {
		cp, err := cr.a.orCodePause(ctx, id, err)
		if err != nil {
			return app.PendingStatus{}, err
		}
		return codeStatus(cp, cr.a.now()), nil
	}
	return laterStatus(q, cr.a.now()), nil
}

// AwaitAsk implements app.Later: the question's decision, waited for in
// memory if it is one of the session's own. A code-mode execution's pause
// is read, not waited for: its status once decided or expired, else
// app.ErrAwaitElsewhere (its engine, not the session's questions, holds
// it).
func (cr *callRun) AwaitAsk(ctx context.Context, id string) (app.PendingStatus, error) {
	q, own, err := cr.a.laterQuestion(ctx, id)
	if err != nil {
		cp, err := cr.a.orCodePause(ctx, id, err)
		if err != nil {
			return app.PendingStatus{}, err
		}
		if s := codeStatus(cp, cr.a.now()); s.State != app.AskWaiting {
			return s, nil
		}
		return app.PendingStatus{}, app.ErrAwaitElsewhere
	}
	if s := laterStatus(q, cr.a.now()); s.State != app.AskWaiting {
		return s, nil
	}
	if !own {
		return app.PendingStatus{}, app.ErrAwaitElsewhere
	}
	cr.a.mu.Lock()
	p, ok := cr.a.pauses[id]
	if ok {
		p.waiters++
	}
	cr.a.mu.Unlock()
	if !ok { // decided meanwhile
		return cr.AskStatus(ctx, id)
	}
	defer func() {
		cr.a.mu.Lock()
		p.waiters--
		cr.a.mu.Unlock()
	}()
	select {
	case <-p.done:
		return cr.AskStatus(ctx, id)
	case <-ctx.Done():
		return app.PendingStatus{}, fmt.Errorf("%w: %v", app.ErrRetry, ctx.Err())
	case <-cr.cut:
		return app.PendingStatus{}, errCut
	case <-cr.a.closing():
		return app.PendingStatus{}, fmt.Errorf("%w: the session's runtime closed while the call waited for a decision", app.ErrRetry)
	}
}

// laterQuestion reads pending question id for the session's principal:
// one of the session's own (in memory, or journaled), else one of another
// owner the execution directory names (readLater: a session, a
// continuation grain or a task grain of the same principal). The journal
// is the owner's fenced record: the decision is written there, with the
// directory row settled, before any surface sees it decided. own reports
// a question of this session.
func (a *asks) laterQuestion(ctx context.Context, id string) (q callQuestion, own bool, err error) {
	a.mu.Lock()
	p, ok := a.pauses[id]
	a.mu.Unlock()
	if ok && p.c.doc.Later {
		p.c.mu.Lock()
		q = p.c.doc.Asks[0]
		p.c.mu.Unlock()
		return q, true, nil
	}
	row, err := a.st.Get(ctx, a.r.id, laterCallID(id))
	switch {
	case errors.Is(err, store.ErrNotFound):
		if a.dir == nil {
			return q, false, app.ErrUnknownAsk
		}
		p := a.r.scope.principal
		q, owner, err := readLater(ctx, a.st, a.dir, id, p.GetOrg(), p.GetUser())
		return q, owner == a.r.id, err
	case err != nil:
		return q, false, fmt.Errorf("%w: read pending question %s: %v", app.ErrRetry, id, err)
	}
	var doc callDoc
	if err := json.Unmarshal([]byte(row.Doc), &doc); err != nil || !doc.Later || len(doc.Asks) != 1 {
		return q, false, app.ErrUnknownAsk
	}
	return doc.Asks[0], true, nil
}

// laterStatus is what pending question q came to at now: its recorded
// decision (the window's decline is "expired"), else expired once its
// deadline passed — whether or not anybody recorded the window's decline
// yet (a session's reminder does at the deadline; a session that ended,
// a continuation grain or a task never do) — else still pending.
func laterStatus(q callQuestion, now time.Time) app.PendingStatus {
	s := app.PendingStatus{ID: q.ID, State: app.AskWaiting, Summary: q.Summary, Details: q.Details, Deadline: time.UnixMilli(q.DeadlineMs)}
	d := q.Decision
	if d == nil && q.DeadlineMs != 0 && now.UnixMilli() >= q.DeadlineMs {
		d = &app.Decision{Reason: session.ReasonApprovalTimeout}
	}
	if d != nil {
		s.Decision, s.State = *d, app.AskDecided
		if d.Reason == session.ReasonApprovalTimeout && d.By == "" {
			s.State = app.AskExpired
		}
	}
	return s
}

// sessionOwner is the session that owns pending question id, from the
// execution directory, if the session's principal may read it (the same
// rule as readLater's). A question of a continuation grain or a task has
// no session: notSession is the answer then (DecideAsk's in-band decision
// and ContinueAsk's continuation need the owning session).
func (a *asks) sessionOwner(ctx context.Context, id string, notSession error) (string, error) {
	if a.dir == nil {
		return "", app.ErrUnknownAsk
	}
	p := a.r.scope.principal
	e, err := laterEntry(ctx, a.dir, id, p.GetOrg(), p.GetUser())
	if err != nil {
		return "", err
	}
	if exchange.OwnerKind(e.Session) != exchange.KindSession {
		return "", notSession
	}
	return e.Session, nil
}

// publishedDeadline is the deadline of pending question id of owner if an
// earlier run of the asking step published it already (done), read from
// the owner's journal row.
func publishedDeadline(ctx context.Context, st *callstore.Store, owner, id string) (deadline time.Time, done bool, err error) {
	row, err := st.Get(ctx, owner, laterCallID(id))
	switch {
	case err == nil:
		var doc callDoc
		if err := json.Unmarshal([]byte(row.Doc), &doc); err != nil || len(doc.Asks) != 1 {
			return time.Time{}, true, fmt.Errorf("mcpgrain: read pending question %s: %v", id, err)
		}
		return time.UnixMilli(doc.Asks[0].DeadlineMs), true, nil
	case !errors.Is(err, store.ErrNotFound):
		return time.Time{}, true, fmt.Errorf("%w: %v", app.ErrRetry, err)
	}
	return time.Time{}, false, nil
}
