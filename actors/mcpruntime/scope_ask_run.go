package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// callRun is one run of a tool call's handler (an app.Call): the steps
// and questions it reached, in order, against the call's journal.
type callRun struct {
	a       *asks
	req     *mcp.CallToolRequest
	c       *durableCall    // nil until the first Step or Ask
	preempt chan struct{}   // closed when a newer run of the call takes over
	cut     <-chan struct{} // closed once the exchange that carried the call ended (nil: never)
	ex      *postExchange   // that exchange, while in flight (nil: none, or over)
	steps   int
	asked   int
	keep    bool // interrupted: the call stays open for the client's retry
}

var (
	_ app.Call    = (*callRun)(nil)
	_ app.Decider = (*callRun)(nil)
)

// errPreempted ends a run that a newer run of the same call (the client's
// retry) took over.
var errPreempted = fmt.Errorf("%w: a newer run of this tool call took over", app.ErrRetry)

// errCut ends a run whose exchange ended (the client went away, or was
// told to retry as the session's node stopped): go-sdk does not cancel a
// handler's context then, and a run that went on would complete the call
// with a result nobody receives, so that the client's retry would be a new
// call — asked again, its steps run again.
var errCut = fmt.Errorf("%w: the request that carried this tool call ended", app.ErrRetry)

// stepKeyOf is the idempotency key of step i (named name) of call id: the
// same in every run of the call (app.StepKeyOf).
func stepKeyOf(id string, i int, name string) string {
	return fmt.Sprintf("%s/%d/%s", id, i, name)
}

// isCut reports whether the exchange that carried the run ended.
func (cr *callRun) isCut() bool {
	select {
	case <-cr.cut:
		return true
	default:
		return false
	}
}

// bindCall is the shared server's receiving middleware that makes every
// tools/call of a session a possible durable call (app.WithCall): when the
// handler returns, a call that journaled something is completed, unless
// it was interrupted (its client went away, the runtime closed, a write
// was fenced), which leaves it open for the client's retry.
func (b *Builder) bindCall(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok {
			return next(ctx, method, req)
		}
		var h http.Header
		if ex := req.GetExtra(); ex != nil {
			h = ex.Header
		}
		r, ok := b.runtimeOf(h)
		if !ok || r.asks == nil {
			return next(ctx, method, req)
		}
		run := &callRun{a: r.asks, req: ctr}
		run.ex, run.cut = r.exchangeOf(h)
		res, err := next(app.WithCall(ctx, run), method, req)
		run.finish(ctx.Err() != nil || run.isCut())
		return res, err
	}
}

// acquire loads the call (once per run) and takes its turn: an older run
// of the same call still holding it is asked to let go. A call completed
// while this run waited for its turn (its answer went out) is over: this
// run is a new call.
func (cr *callRun) acquire(ctx context.Context) error {
	if cr.c != nil {
		return nil
	}
	var name string
	var args json.RawMessage
	if p := cr.req.Params; p != nil {
		name, args = p.Name, p.Arguments
	}
	for {
		c, err := cr.a.callFor(ctx, identity(name, args), name, args)
		if err != nil {
			cr.keep = true
			return err
		}
		c.mu.Lock()
		if c.preempt != nil {
			close(c.preempt)
			c.preempt = nil
		}
		c.mu.Unlock()
		select {
		case c.turn <- struct{}{}:
		case <-ctx.Done():
			cr.a.release(c, false)
			cr.keep = true
			return fmt.Errorf("%w: %v", app.ErrRetry, ctx.Err())
		}
		c.mu.Lock()
		if c.completed {
			c.mu.Unlock()
			<-c.turn
			cr.a.release(c, true)
			continue
		}
		cr.preempt = make(chan struct{})
		c.preempt = cr.preempt
		c.mu.Unlock()
		cr.c = c
		return nil
	}
}

// finish ends the handler's run. An interrupted run leaves the call open
// for the client's retry. Otherwise the call is completed (journaled as
// such) — once its answer went out on the exchange that carried it, if
// there is one: a run whose exchange ends before go-sdk wrote the answer
// (the session's runtime disposed as the session moved, the client gone)
// leaves the call open too, so the retry the client is told to make gets
// the journaled answer instead of being a new call. The turn is given
// back when the call is settled.
func (cr *callRun) finish(interrupted bool) {
	if cr.c == nil {
		return
	}
	complete := !cr.keep && !interrupted
	if complete && cr.ex != nil {
		if cr.ex.await(cr) {
			return // settled when the exchange is over
		}
		complete = false // over already: its answer may not have gone out
	}
	cr.settle(complete)
}

// settle completes the run's call (complete) or leaves it open, and gives
// the turn back.
func (cr *callRun) settle(complete bool) {
	c := cr.c
	c.mu.Lock()
	if cr.preempt == c.preempt {
		c.preempt = nil
	}
	if complete && c.stored && c.row.Completed.IsZero() {
		c.row.Completed = cr.a.now()
		if err := cr.a.save(c, nil, nil); err != nil {
			c.row.Completed = time.Time{}
			complete = false
			cr.a.r.log.Warn("mcpruntime: complete a durable tool call", "call", c.row.ID, "err", err)
		}
	}
	c.completed = c.completed || complete
	c.mu.Unlock()
	<-c.turn
	cr.a.release(c, complete)
}

// release drops a run's use of c; a completed call is forgotten (the next
// identical call is a new one; a run still waiting for its turn finds it
// completed and starts anew).
func (a *asks) release(c *durableCall, completed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c.users--
	if completed && a.open[c.row.Ident] == c {
		a.dropOpen(c.row.Ident)
	}
}

// Step implements app.Call.
func (cr *callRun) Step(ctx context.Context, name string, f func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	if err := cr.acquire(ctx); err != nil {
		return nil, err
	}
	res, interrupted, err := runStep(ctx, sessionJournal{cr}, cr.steps, name, f)
	if interrupted {
		cr.keep = true
	}
	if err != nil {
		return nil, err
	}
	cr.steps++
	return res, nil
}

// sessionJournal is the journal of the session's call a run holds.
type sessionJournal struct{ cr *callRun }

func (j sessionJournal) lockJournal() (*callDoc, *sync.Mutex, string) {
	c := j.cr.c
	c.mu.Lock()
	return &c.doc, &c.mu, c.row.ID
}

func (j sessionJournal) saveJournal() error { return j.cr.a.save(j.cr.c, nil, nil) }

// cutErr: a run whose exchange ended does not start a step (the client's
// retry runs it).
func (j sessionJournal) cutErr() error {
	if j.cr.isCut() {
		return errCut
	}
	return nil
}

// Ask implements app.Call.
func (cr *callRun) Ask(ctx context.Context, q app.Question) (app.Decision, error) {
	if q.Summary == "" {
		return app.Decision{}, errors.New("mcpgrain: a Question needs a Summary")
	}
	if err := cr.acquire(ctx); err != nil {
		return app.Decision{}, err
	}
	c, j := cr.c, cr.asked
	c.mu.Lock()
	if j < len(c.doc.Asks) {
		if d := c.doc.Asks[j].Decision; d != nil {
			c.mu.Unlock()
			cr.asked++
			return *d, nil
		}
		id, deadline := c.doc.Asks[j].ID, time.UnixMilli(c.doc.Asks[j].DeadlineMs)
		c.mu.Unlock()
		p, created := cr.a.waitFor(id, c, j)
		if created { // not restored with the runtime: the session arms its deadline now
			cr.a.leases.Paused(id, deadline)
		}
		defer cr.askClient(ctx, id, q)()
		return cr.wait(ctx, p)
	}
	id := engine.NewExecutionID()
	deadline := cr.a.now().Add(cr.a.window)
	c.doc.Asks = append(c.doc.Asks, callQuestion{ID: id, Summary: q.Summary, Details: q.Details, Form: q.Form != nil, DeadlineMs: deadline.UnixMilli(),
		InBand: q.ClientMayDecide})
	c.row.PauseID = id
	if err := cr.a.save(c, cr.a.directoryRow(c, j), nil); err != nil {
		c.doc.Asks = c.doc.Asks[:j]
		c.row.PauseID = ""
		c.mu.Unlock()
		cr.keep = true
		return app.Decision{}, err
	}
	c.mu.Unlock()
	p, _ := cr.a.waitFor(id, c, j)
	cr.a.leases.Paused(id, deadline) // after waitFor: the session sees a pause held in memory (a lease)
	defer cr.askClient(ctx, id, q)()
	return cr.wait(ctx, p)
}

// waitFor registers a handler run waiting for question idx of c (its
// pause id): the pause counts as held in memory until the wait ends.
// created reports a pause the runtime did not know yet.
func (a *asks) waitFor(id string, c *durableCall, idx int) (p *askPause, created bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pauses[id]
	if !ok {
		p = &askPause{c: c, idx: idx, done: make(chan struct{})}
		a.setPause(id, p)
	}
	p.waiters++
	return p, !ok
}

// wait waits for p's decision.
func (cr *callRun) wait(ctx context.Context, p *askPause) (app.Decision, error) {
	defer func() {
		cr.a.mu.Lock()
		p.waiters--
		cr.a.mu.Unlock()
	}()
	var err error
	select {
	case <-p.done:
		if cr.isCut() { // journaled: the client's retry gets the decision
			err = errCut
			break
		}
		p.c.mu.Lock()
		d := p.c.doc.Asks[p.idx].Decision
		p.c.mu.Unlock()
		cr.asked++
		return *d, nil
	case <-ctx.Done():
		err = fmt.Errorf("%w: %v", app.ErrRetry, ctx.Err())
	case <-cr.preempt:
		err = errPreempted
	case <-cr.cut:
		err = errCut
	case <-cr.a.closing():
		err = fmt.Errorf("%w: the session's runtime closed while the call waited for a decision", app.ErrRetry)
	}
	cr.keep = true
	return app.Decision{}, err
}

// resolve takes a decision the session recorded for question execID (a
// human's, or the deadline's decline): it is journaled with the call (and
// the directory row settled) and handed to the run waiting for it, if
// any. It reports whether execID is one of the runtime's questions.
func (a *asks) resolve(execID string, d *pb.ApprovalDecision) bool {
	a.mu.Lock()
	p, ok := a.pauses[execID]
	if ok {
		p.deciding = true
	}
	a.mu.Unlock()
	if !ok {
		return false
	}
	go func() {
		c := p.c
		c.mu.Lock()
		q := &c.doc.Asks[p.idx]
		if q.Decision == nil {
			q.Decision = decisionOf(d, q.Form)
			if c.row.PauseID == execID {
				c.row.PauseID = ""
			}
			if c.doc.Later { // a pending question's call is over once decided
				c.row.Completed = a.now()
			}
			if err := a.save(c, nil, []string{execID}); err != nil {
				q.Decision, c.row.PauseID, c.row.Completed = nil, execID, time.Time{}
				c.mu.Unlock()
				a.mu.Lock()
				p.deciding = false
				a.mu.Unlock()
				a.r.log.Warn("mcpruntime: journal the decision of a tool call", "execution", execID, "err", err)
				return
			}
		}
		c.mu.Unlock()
		a.mu.Lock()
		a.dropPause(execID)
		if c.doc.Later && a.open[c.row.Ident] == c {
			a.dropOpen(c.row.Ident)
		}
		a.mu.Unlock()
		close(p.done)
		a.leases.Settled(execID)
	}()
	return true
}

// decisionOf is the SDK's view of a recorded decision.
func decisionOf(d *pb.ApprovalDecision, form bool) *app.Decision {
	out := &app.Decision{Accepted: d.GetAction() == engine.Accept, Reason: d.GetReason(), By: d.GetDecidedBy()}
	if form && out.Accepted && d.GetContentJson() != "" {
		var in map[string]any
		if json.Unmarshal([]byte(d.GetContentJson()), &in) == nil {
			delete(in, "reason")
			out.Input = in
		}
	}
	return out
}

// paused describes question execID, if it waits for a decision.
func (a *asks) paused(execID string) (*pb.PausedExecution, bool) {
	a.mu.Lock()
	p, ok := a.pauses[execID]
	a.mu.Unlock()
	if !ok {
		return nil, false
	}
	p.c.mu.Lock()
	row := a.directoryRow(p.c, p.idx)
	p.c.mu.Unlock()
	pr := a.r.scope.principal
	return &pb.PausedExecution{
		ExecutionId: row.ID, Address: row.Address, ArgumentsJson: row.ArgsJSON, Message: row.Message, ApprovalText: row.ApprovalText,
		DeadlineMs: row.Deadline.UnixMilli(), Principal: &pb.Principal{User: pr.GetUser(), Org: pr.GetOrg(), Role: pr.GetRole()},
	}, true
}

// list describes every question waiting for a decision.
func (a *asks) list() []*pb.PausedExecution {
	a.mu.Lock()
	ids := make([]string, 0, len(a.pauses))
	for id := range a.pauses {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	var out []*pb.PausedExecution
	for _, id := range ids {
		if p, ok := a.paused(id); ok {
			out = append(out, p)
		}
	}
	return out
}

// counts returns the questions waited for in memory and those only
// journaled (no handler run waits: durable, they keep nothing resident).
func (a *asks) counts() (inMemory, durable int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pauses {
		if p.waiters > 0 {
			inMemory++
		} else {
			durable++
		}
	}
	return inMemory, durable
}

// has reports whether execID is one of the runtime's questions.
func (a *asks) has(execID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.pauses[execID]
	return ok
}

// durablePause reports whether execID is a question no handler run waits
// for in memory.
func (a *asks) durablePause(execID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pauses[execID]
	return ok && p.waiters == 0
}
