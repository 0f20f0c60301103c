package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Continuations of pending questions (docs/sdk.md §4, "Continuing on the
// owner"): a question asked with AskLater names a continuation the
// server registers (Question.Continuation, app.Handlers.Continuations);
// a later tool call of the asker, in any of its sessions, continues it
// once it is decided (app.Continuer). The call finds the owner as
// AskStatus does (the execution directory, the same organization and
// user rule) and sends it an AskContinue (Config.Continue: the session
// grain checks the principal and hands it to its runtime, restored if it
// had passivated). The owner runs the continuation with the decision,
// bound to its own scope and to the question's durable call as a run of
// it — its Steps journal in the question's journal — and records the
// result in that journal (fenced by the session grain's epoch), from
// where it answers every later caller: the continuation completes once.
// An error or a panic records nothing; the next call runs it again (its
// completed steps replay).

// ContinueTimeout bounds a continuation's run on the owner, and a
// caller's wait for it.
const ContinueTimeout = 50 * time.Second

// continueStep is the StepKey suffix a continuation runs with (its own
// steps have their own keys).
const continueStep = "mcpgrain.continue"

// continued is a continuation's recorded run.
type continued struct {
	Result json.RawMessage `json:"result"`
	By     string          `json:"by,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	AtMs   int64           `json:"atMs"`
}

// ContinueAsk implements app.Continuer: question id's continuation, run
// on the session that owns it (this one, or another of the principal's).
func (cr *callRun) ContinueAsk(ctx context.Context, id string, input json.RawMessage) (*mcp.CallToolResult, error) {
	q, own, err := cr.a.laterQuestion(ctx, id)
	if err != nil {
		return nil, err
	}
	if q.Continuation == "" {
		return nil, app.ErrNoContinuation
	}
	// Whether it is decided is the owner's to say: a surface's decision is
	// journaled by the owner a moment after the surface answered.
	p := cr.a.r.scope.principal
	m := &pb.AskContinue{Principal: &pb.Principal{User: p.GetUser(), Org: p.GetOrg(), Role: cr.caller().GetRole()},
		ExecutionId: id, InputJson: string(input)}
	if own {
		done := make(chan *pb.AskContinueReply, 1)
		cr.a.r.ContinueAsk(ctx, m, func(r *pb.AskContinueReply) { done <- r })
		select {
		case r := <-done:
			return continueOutcome(r)
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", app.ErrRetry, ctx.Err())
		}
	}
	owner, err := cr.a.sessionOwner(ctx, id, app.ErrContinueNeedsSession)
	if err != nil {
		return nil, err
	}
	if cr.a.cont == nil {
		return nil, errors.New("mcpgrain: this node cannot route continuations (mcpruntime.Config.Continue unset)")
	}
	sctx, cancel := context.WithTimeout(ctx, ContinueTimeout)
	defer cancel()
	reply, err := cr.a.cont(sctx, owner, m)
	if err != nil {
		return nil, fmt.Errorf("%w: continue on the question's session: %v", app.ErrRetry, err)
	}
	return continueOutcome(reply)
}

// continueOutcome is what ContinueAsk answers for the owner's reply.
func continueOutcome(r *pb.AskContinueReply) (*mcp.CallToolResult, error) {
	switch r.GetOutcome() {
	case pb.AskContinueReply_OUTCOME_OK:
		var res mcp.CallToolResult
		if err := json.Unmarshal([]byte(r.GetResultJson()), &res); err != nil {
			return nil, fmt.Errorf("mcpgrain: read the continuation's result: %w", err)
		}
		return &res, nil
	case pb.AskContinueReply_OUTCOME_FOREIGN:
		return nil, app.ErrForeignAsk
	case pb.AskContinueReply_OUTCOME_PENDING:
		return nil, app.ErrAskPending
	case pb.AskContinueReply_OUTCOME_NO_CONTINUATION:
		return nil, app.ErrNoContinuation
	case pb.AskContinueReply_OUTCOME_UNKNOWN_CONTINUATION:
		return nil, fmt.Errorf("%w: %s", app.ErrUnknownContinuation, r.GetError())
	case pb.AskContinueReply_OUTCOME_FAILED:
		return nil, fmt.Errorf("%w: %s", app.ErrContinuationFailed, r.GetError())
	case pb.AskContinueReply_OUTCOME_RETRY:
		return nil, fmt.Errorf("%w: %s", app.ErrRetry, r.GetError())
	}
	return nil, app.ErrUnknownAsk
}

var _ session.AskContinuer = (*Runtime)(nil)

// ContinueAsk implements session.AskContinuer: it starts question
// m.execution_id's continuation (counted as a running execution, so the
// session stays resident until it ends) and calls answer with what came
// of it. The run is bounded by ContinueTimeout, not by ctx: a caller that
// went away finds the recorded result when it calls again.
func (r *Runtime) ContinueAsk(ctx context.Context, m *pb.AskContinue, answer func(*pb.AskContinueReply)) {
	switch m.GetContinuation() {
	case "":
	case session.CodeResumeContinuation:
		r.continueCode(ctx, m, answer) // codemode_continue.go
		return
	default: // a later release's: answered as an earlier release answers it
		answer(&pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_UNKNOWN})
		return
	}
	a := r.asks
	if a == nil {
		answer(&pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_UNKNOWN})
		return
	}
	a.running.Add(1)
	go func() {
		defer a.running.Add(-1)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ContinueTimeout)
		defer cancel()
		answer(a.continueAsk(rctx, m))
	}()
}

// continueAsk runs question m.execution_id's continuation, once: one run
// at a time per question on this runtime (its slot), the recorded result
// after the first that completed.
func (a *asks) continueAsk(ctx context.Context, m *pb.AskContinue) *pb.AskContinueReply {
	id := m.GetExecutionId()
	unlock := a.continueSlot(id)
	defer unlock()
	c, err := a.laterCall(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_UNKNOWN}
	case err != nil:
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_RETRY, Error: err.Error()}
	}
	c.mu.Lock()
	done, q := c.doc.Continued, c.doc.Asks[0]
	c.mu.Unlock()
	switch {
	case done != nil:
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_OK, ResultJson: string(done.Result)}
	case q.Continuation == "":
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_NO_CONTINUATION}
	case q.Decision == nil:
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_PENDING}
	}
	f, ok := a.r.continuations()[q.Continuation]
	if !ok {
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_UNKNOWN_CONTINUATION, Error: fmt.Sprintf("%q", q.Continuation)}
	}
	return a.runContinuation(ctx, c, q, f, m)
}

// runContinuation runs f for question q of call c and records its
// result: a fenced write first (an owner that lost the session never runs
// f), f bound to the session's scope and to c as a run of it, then the
// result journaled. f's error or panic records nothing.
func (a *asks) runContinuation(ctx context.Context, c *durableCall, q callQuestion, f app.ContinueFunc, m *pb.AskContinue) *pb.AskContinueReply {
	retry := func(err error) *pb.AskContinueReply {
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_RETRY, Error: err.Error()}
	}
	c.mu.Lock()
	err := a.save(c, nil, nil)
	c.mu.Unlock()
	if err != nil {
		return retry(err)
	}
	input := json.RawMessage(m.GetInputJson())
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	k := app.Continuation{ID: q.ID, Name: q.Continuation, Summary: q.Summary, Details: q.Details,
		State: laterStatus(q, a.now()).State, Decision: *q.Decision, Input: input, Caller: m.GetPrincipal().GetUser()}
	run := &continueRun{a: a, c: c}
	rctx := app.WithStepKey(app.WithCall(app.WithScope(ctx, a.r.scope), run), stepKeyOf(c.row.ID, 0, continueStep))
	res, err := callContinuation(rctx, f, k)
	if err != nil {
		a.r.log.Info("mcpruntime: a continuation failed; nothing recorded", "execution", q.ID, "continuation", q.Continuation, "err", err)
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_FAILED, Error: err.Error()}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_FAILED, Error: "encode its result: " + err.Error()}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.doc.Continued = &continued{Result: raw, By: m.GetPrincipal().GetUser(), Input: input, AtMs: a.now().UnixMilli()}
	if err := a.save(c, nil, nil); err != nil {
		c.doc.Continued = nil
		return retry(err)
	}
	return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_OK, ResultJson: string(raw)}
}

// callContinuation calls f, turning a panic into an error; a nil result
// is an empty one.
func callContinuation(ctx context.Context, f app.ContinueFunc, k app.Continuation) (res *mcp.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	res, err = f(ctx, k)
	if err == nil && res == nil {
		res = &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	return res, err
}

// laterCall is the durable call of the session's pending question id:
// the one its pause holds in memory, else the one stored
// (store.ErrNotFound: none). A decision handed over to the pause but not
// journaled yet (resolve runs it outside the grain's turn) is waited for:
// a surface answered OK, so the continuation must see it.
func (a *asks) laterCall(ctx context.Context, id string) (*durableCall, error) {
	a.mu.Lock()
	p, ok := a.pauses[id]
	deciding := ok && p.deciding
	a.mu.Unlock()
	if deciding { // a surface's decision is being journaled: wait for it
		select {
		case <-p.done:
			ok = false // journaled, the pause dropped: read the row
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the question's decision is still being journaled", app.ErrRetry)
		}
	}
	if ok && p.c.doc.Later {
		return p.c, nil
	}
	row, err := a.st.Get(ctx, a.r.id, laterCallID(id))
	if err != nil {
		return nil, err
	}
	c := &durableCall{row: row, stored: true, turn: make(chan struct{}, 1)}
	if err := json.Unmarshal([]byte(row.Doc), &c.doc); err != nil || !c.doc.Later || len(c.doc.Asks) != 1 {
		return nil, store.ErrNotFound
	}
	return c, nil
}

// continueSlot takes the turn of question id's continuation on this
// runtime and returns the function that gives it back.
func (a *asks) continueSlot(id string) (unlock func()) {
	a.mu.Lock()
	if a.conts == nil {
		a.conts = map[string]*contSlot{}
	}
	s, ok := a.conts[id]
	if !ok {
		s = &contSlot{}
		a.conts[id] = s
	}
	s.users++
	a.mu.Unlock()
	s.mu.Lock()
	return func() {
		s.mu.Unlock()
		a.mu.Lock()
		s.users--
		if s.users == 0 {
			delete(a.conts, id)
		}
		if len(a.conts) == 0 {
			a.conts = nil
		}
		a.mu.Unlock()
	}
}

// contSlot orders the continuations of one question on a runtime.
type contSlot struct {
	mu    sync.Mutex
	users int // guarded by asks.mu
}

// continueRun is a continuation's run (an app.Call): its Steps journal in
// the question's call.
type continueRun struct {
	a     *asks
	c     *durableCall
	steps int
}

var _ app.ContinuationCall = (*continueRun)(nil)

// ContinuationRun implements app.ContinuationCall.
func (k *continueRun) ContinuationRun() {}

// Step implements app.Call.
func (k *continueRun) Step(ctx context.Context, name string, f func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	res, _, err := runStep(ctx, k, k.steps, name, f)
	if err != nil {
		return nil, err
	}
	k.steps++
	return res, nil
}

// Ask implements app.Call: a continuation asks nothing (it runs outside
// a tool call of its own).
func (k *continueRun) Ask(context.Context, app.Question) (app.Decision, error) {
	return app.Decision{}, fmt.Errorf("%w: Ask in a continuation (ask with AskLater in a tool call)", app.ErrNoCall)
}

func (k *continueRun) lockJournal() (*callDoc, *sync.Mutex, string) {
	k.c.mu.Lock()
	return &k.c.doc, &k.c.mu, k.c.row.ID
}

func (k *continueRun) saveJournal() error { return k.a.save(k.c, nil, nil) }

func (k *continueRun) cutErr() error { return nil }
