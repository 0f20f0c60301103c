package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
)

// Pending questions of grains (the SDK's AskLater in the 2026-07-28 era
// and in tasks, docs/sdk.md §4 "Asking without waiting"): a continuation
// grain's tool call, or a task's run, publishes a question without ending
// its round. The question is a durable call of its own, as a session's
// (laterCallID, its journal the one question), kept under the grain's
// store key and fenced by its epoch, published with its directory row
// (owner = the grain's identity, so exchange.OwnerKind routes decisions
// to the grain, whose GrainCalls.Decide finds it by its pause) in one
// transaction, with the principal's cap counted there. The asking call
// journals it as a step, as a session's does. A durable reminder of the
// grain records the window's decline at the deadline
// (scope_ask_later_alarm.go), as a session's approval reminder does; a
// question past its deadline is expired when read (laterStatus) and when
// decided (settleQuestion) even before it fires, and the cap stops
// counting it at the deadline. Any tool call of the same principal —
// either era, any grain or session — reads it (readLater): the directory
// names the owner, the owner's row holds the decision.

// LaterConfig configures the pending questions (AskLater) of grains:
// continuation grains and task grains.
type LaterConfig struct {
	// PublicURL is the origin of approval links ("": the request's).
	PublicURL string
	// MaxPendingAsks caps one principal's undecided questions (zero:
	// DefaultMaxPendingAsks; negative: unlimited), as Config.MaxPendingAsks.
	MaxPendingAsks int
	// Refusals counts refusals at the cap (nil: not counted).
	Refusals *LaterRefusals
}

// LaterRefusals counts AskLater calls refused at the per-principal cap
// (mcpgrain_pending_asks_refused_total), by the kind of grain that would
// have owned the question: session, continuation or task. One per node,
// shared by its sessions (Builder.LaterRefusals), continuation grains and
// task grains.
type LaterRefusals struct{ c *prometheus.CounterVec }

// NewLaterRefusals returns the refusal counter, registered with reg (nil:
// not registered).
func NewLaterRefusals(reg prometheus.Registerer) (*LaterRefusals, error) {
	l := &LaterRefusals{c: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgrain_pending_asks_refused_total",
		Help: "AskLater calls refused because the principal had --max-pending-asks-per-principal undecided questions, by the owner of the question (session, continuation, task).",
	}, []string{"owner"})}
	for _, k := range []string{exchange.KindSession, exchange.KindContinuation, exchange.KindTask} {
		l.c.WithLabelValues(k)
	}
	if reg != nil {
		if err := reg.Register(l.c); err != nil {
			return nil, fmt.Errorf("mcpruntime: register the pending questions' metric: %w", err)
		}
	}
	return l, nil
}

// refused counts one refusal of a question kind would own.
func (l *LaterRefusals) refused(kind string) {
	if l != nil {
		l.c.WithLabelValues(kind).Inc()
	}
}

// tooMany is the error of a refusal at cap max.
func tooMany(max int) error {
	return fmt.Errorf("%w: it has %d undecided questions asked with AskLater (--max-pending-asks-per-principal); "+
		"one is freed when a question is decided or its approval window lapses", app.ErrTooManyPendingAsks, max)
}

var _ app.Later = (*grainRun)(nil)

// AskLater implements app.Later for a continuation grain's tool call or a
// task's run: the question is published and the call goes on.
func (r *grainRun) AskLater(ctx context.Context, q app.Question) (app.Pending, error) {
	if q.Summary == "" {
		return app.Pending{}, errors.New("mcpgrain: a Question needs a Summary")
	}
	rec, err := askLaterOnce(ctx, r.Step, func(ctx context.Context, id string) (time.Time, error) {
		return r.gc.publishLater(ctx, r, id, q)
	})
	if err != nil {
		return app.Pending{}, err
	}
	var h http.Header
	if ex := r.req.GetExtra(); ex != nil {
		h = ex.Header
	}
	url := exchange.ApprovalURL(r.gc.cfg.Later.PublicURL, h, rec.ID)
	return app.Pending{ID: rec.ID, URL: url, Deadline: time.UnixMilli(rec.DeadlineMs)}, nil
}

// publishLater journals and publishes pending question id of run r's
// caller (unless an earlier run of the asking step did) and returns its
// deadline.
func (gc *GrainCalls) publishLater(ctx context.Context, r *grainRun, id string, q app.Question) (time.Time, error) {
	if deadline, done, err := publishedDeadline(ctx, gc.st, gc.cfg.Grain, id); done || err != nil {
		if err == nil { // armed again (idempotent): a question published before its grain armed reminders gets one
			err = gc.armLater(ctx, id, deadline)
		}
		return deadline, err
	}
	now := gc.cfg.Now()
	deadline := now.Add(gc.cfg.Window)
	c := &grainCall{
		row: callstore.Call{ID: laterCallID(id), Session: gc.cfg.Grain, Ident: laterIdent(id), PauseID: id, Created: now},
		doc: callDoc{Tool: r.tool, Later: true, User: r.who.GetUser(), Org: r.who.GetOrg(), Asks: []callQuestion{{
			ID: id, Summary: q.Summary, Details: q.Details, Form: q.Form != nil, DeadlineMs: deadline.UnixMilli(),
			Continuation: q.Continuation}}}} // journaled, never run: ContinueAsk says app.ErrContinueNeedsSession
	doc, err := json.Marshal(c.doc)
	if err != nil {
		return time.Time{}, fmt.Errorf("mcpgrain: encode the pending question: %w", err)
	}
	c.row.Doc = string(doc)
	w := callstore.Write{Call: c.row, Publish: gc.directoryRow(c, 0), SettledAt: now}
	max := laterCap(gc.cfg.Later.MaxPendingAsks)
	if max > 0 {
		w.Cap = &callstore.Cap{Max: max, Prefix: laterCallID(""), Now: now}
	}
	// The reminder first: a grain lost between the two writes leaves a
	// reminder that finds no question, never a question nobody declines.
	if err := gc.armLater(ctx, id, deadline); err != nil {
		return time.Time{}, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), askWriteTimeout)
	defer cancel()
	err = store.ThroughOutage(wctx, func() error { return gc.st.Put(wctx, gc.cfg.Grain, gc.cfg.Epoch, w) })
	switch {
	case errors.Is(err, callstore.ErrCapReached):
		gc.disarmLater(id) // nothing published (another failure may have been applied: its reminder stays)
		gc.cfg.Later.Refusals.refused(exchange.OwnerKind(gc.cfg.Owner))
		return time.Time{}, tooMany(max)
	case err != nil:
		return time.Time{}, fmt.Errorf("%w: publish the pending question: %v", app.ErrRetry, err)
	}
	return deadline, nil
}

// AskStatus implements app.Later: question id of the caller, whoever owns
// it (a session, a continuation grain, a task grain).
func (r *grainRun) AskStatus(ctx context.Context, id string) (app.PendingStatus, error) {
	q, _, err := readLater(ctx, r.gc.st, directory.New(r.gc.cfg.Store), id, r.who.GetOrg(), r.who.GetUser())
	if err != nil {
		return app.PendingStatus{}, err
	}
	return laterStatus(q, r.gc.cfg.Now()), nil
}

// AwaitAsk implements app.Later: a decided or expired question's status.
// A 2026-07-28 request or a task's run holds no session a decision could
// wake: an undecided question is app.ErrAwaitElsewhere, at once (read it
// again later with AskStatus; or Ask, whose round waits).
func (r *grainRun) AwaitAsk(ctx context.Context, id string) (app.PendingStatus, error) {
	s, err := r.AskStatus(ctx, id)
	if err != nil {
		return app.PendingStatus{}, err
	}
	if s.State == app.AskWaiting {
		return app.PendingStatus{}, fmt.Errorf("%w (a 2026-07-28 request or a task's run has no session to wait in)", app.ErrAwaitElsewhere)
	}
	return s, nil
}

// readLater reads pending question id for the principal (org, user),
// whoever owns it: the execution directory names the owner, found only
// in the caller's organization (another's is app.ErrUnknownAsk), read
// only by the user who asked (app.ErrForeignAsk); the owner's row in
// callstore holds the question and its decision. ownerKey is the row's
// owner key (a session's id, a grain's store key).
func readLater(ctx context.Context, st *callstore.Store, dir *directory.Store, id, org, user string) (q callQuestion, ownerKey string, err error) {
	e, err := laterEntry(ctx, dir, id, org, user)
	if err != nil {
		return q, "", err
	}
	ownerKey = laterOwnerKey(e.Session)
	row, err := st.Get(ctx, ownerKey, laterCallID(id))
	if errors.Is(err, store.ErrNotFound) {
		return q, "", app.ErrUnknownAsk
	}
	if err != nil {
		return q, "", fmt.Errorf("%w: read pending question %s: %v", app.ErrRetry, id, err)
	}
	var doc callDoc
	if err := json.Unmarshal([]byte(row.Doc), &doc); err != nil || !doc.Later || len(doc.Asks) != 1 {
		return q, "", app.ErrUnknownAsk
	}
	return doc.Asks[0], ownerKey, nil
}

// laterEntry is the execution directory's row of pending question id, if
// the principal (org, user) may read it: found only in the caller's
// organization (another's is app.ErrUnknownAsk), read only by the user
// who asked (app.ErrForeignAsk).
func laterEntry(ctx context.Context, dir *directory.Store, id, org, user string) (directory.Execution, error) {
	e, err := dir.GetExecution(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return e, app.ErrUnknownAsk
	}
	if err != nil {
		return e, fmt.Errorf("%w: look up question %s: %v", app.ErrRetry, id, err)
	}
	switch laterAccess(e, org, user) {
	case accessUnknown:
		return e, app.ErrUnknownAsk
	case accessForeign:
		return e, app.ErrForeignAsk
	}
	return e, nil
}

// laterAccess is what the principal (org, user) may learn of the pending
// question whose directory row is e: another organization's is unknown,
// another user's of the organization foreign.
func laterAccess(e directory.Execution, org, user string) access {
	switch {
	case e.Org != org:
		return accessUnknown
	case e.User != user:
		return accessForeign
	}
	return accessOwn
}

// laterOwnerKey is the callstore owner of the calls of the directory's
// owner: a session's id, else the grain's store key.
func laterOwnerKey(owner string) string {
	if k := exchange.OwnerKind(owner); k != exchange.KindSession {
		return k + "/" + owner // grain.Key(kind, identity)
	}
	return owner
}
