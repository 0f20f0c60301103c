package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// offer is a decision offered for a question: an approval surface's or
// the client's (its retry's input response).
type offer struct {
	Action, Reason, By, Role, ContentJSON string
}

// verdict is what settleQuestion made of a question and an answer.
type verdict int

const (
	// verdictDecided: the question was decided before; its decision stands.
	verdictDecided verdict = iota
	// verdictLapsed: its deadline passed: the window's decline, to record.
	verdictLapsed
	// verdictAccepted: the answer is the decision, to record.
	verdictAccepted
	// verdictForbidden: the answerer's role may not decide; still waiting.
	verdictForbidden
	// verdictInvalid: the answer's action is none of accept, decline,
	// cancel; still waiting.
	verdictInvalid
	// verdictWaiting: no answer, within the window.
	verdictWaiting
)

// settleQuestion decides what question q comes to at now with answer a
// (nil: none): the decision recorded first stands, the window's decline
// once the deadline passed, else an answer of a role that may decide.
// d is the decision that holds afterwards (nil while it waits).
func settleQuestion(q callQuestion, now time.Time, a *offer, mayDecide func(role string) bool) (d *app.Decision, v verdict) {
	switch {
	case q.Decision != nil:
		return q.Decision, verdictDecided
	case q.DeadlineMs != 0 && now.UnixMilli() >= q.DeadlineMs:
		return &app.Decision{Reason: engine.ReasonApprovalTimeout}, verdictLapsed
	case a == nil:
		return nil, verdictWaiting
	case a.Action != engine.Accept && a.Action != engine.Decline && a.Action != engine.Cancel:
		return nil, verdictInvalid
	case !mayDecide(a.Role):
		return nil, verdictForbidden
	}
	return decisionOf(&pb.ApprovalDecision{Action: a.Action, Reason: a.Reason, DecidedBy: a.By, ContentJson: a.ContentJSON}, q.Form), verdictAccepted
}

// grainRun is one run of a continuation grain's tool call handler (an
// app.Call).
type grainRun struct {
	gc        *GrainCalls
	req       *mcp.CallToolRequest
	who       *pb.Principal
	tool      string
	args      json.RawMessage
	c         *grainCall        // held (Bind for a retry, else the first Step or Ask)
	answerFor string            // the question the retry's requestState was issued for
	answer    *mcp.ElicitResult // the retry's input response to it (nil: none)
	turn      bool              // the run holds c's turn
	steps     int
	asked     int
	keep      bool // the call stays open (it waits, or was interrupted)
}

var _ app.Call = (*grainRun)(nil)

// acquire holds the call (a new one for a first request) and its turn:
// runs of one call use its journal one at a time.
func (r *grainRun) acquire(ctx context.Context) error {
	if r.c == nil && r.gc.cfg.Call != "" {
		c, err := r.gc.loadOne(ctx, r)
		if err != nil {
			r.keep = true
			return err
		}
		r.c = c
	}
	if r.c == nil {
		r.c = r.gc.create(r)
	}
	if r.turn {
		return nil
	}
	select {
	case r.c.turn <- struct{}{}:
		r.turn = true
		return nil
	case <-ctx.Done():
		r.keep = true
		return fmt.Errorf("%w: %v", app.ErrRetry, ctx.Err())
	}
}

// finish ends the run: a call that journaled something is completed
// unless it waits or the run was interrupted.
func (r *grainRun) finish(interrupted bool) {
	c := r.c
	if c == nil {
		return
	}
	if r.turn {
		c.mu.Lock()
		if !r.keep && !interrupted && c.stored && c.row.Completed.IsZero() {
			c.row.Completed = r.gc.cfg.Now()
			if err := r.gc.save(c, nil, nil); err != nil {
				c.row.Completed = time.Time{}
				r.gc.cfg.Logger.Warn("mcpruntime: complete a durable tool call", "call", c.row.ID, "err", err)
			}
		}
		c.mu.Unlock()
		<-c.turn
	}
	r.gc.release(c)
}

// Step implements app.Call.
func (r *grainRun) Step(ctx context.Context, name string, f func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	if err := r.acquire(ctx); err != nil {
		return nil, err
	}
	res, interrupted, err := runStep(ctx, grainJournal{r}, r.steps, name, f)
	if interrupted {
		r.keep = true
	}
	if err != nil {
		return nil, err
	}
	r.steps++
	return res, nil
}

// grainJournal is the journal of the grain's call a run holds.
type grainJournal struct{ r *grainRun }

func (j grainJournal) lockJournal() (*callDoc, *sync.Mutex, string) {
	c := j.r.c
	c.mu.Lock()
	return &c.doc, &c.mu, c.row.ID
}

func (j grainJournal) saveJournal() error { return j.r.gc.save(j.r.c, nil, nil) }

// cutErr: a grain's run is never cut (its request's context ends it).
func (grainJournal) cutErr() error { return nil }

// Ask implements app.Call: the question's decision if it has one (or
// gets one now: the window's decline, the retry's answer), else an
// *app.InputRequiredError asking the client for it.
func (r *grainRun) Ask(ctx context.Context, q app.Question) (app.Decision, error) {
	if q.Summary == "" {
		return app.Decision{}, errors.New("mcpgrain: a Question needs a Summary")
	}
	if err := r.acquire(ctx); err != nil {
		return app.Decision{}, err
	}
	c, j := r.c, r.asked
	c.mu.Lock()
	defer c.mu.Unlock()
	if j == len(c.doc.Asks) {
		return app.Decision{}, r.askNew(c, q)
	}
	a, err := r.answerTo(c.doc.Asks[j], q)
	if err != nil {
		r.keep = true
		return app.Decision{}, err
	}
	d, v := settleQuestion(c.doc.Asks[j], r.gc.cfg.Now(), a, r.gc.cfg.MayDecide)
	switch v {
	case verdictLapsed, verdictAccepted:
		if err := r.gc.record(c, j, d); err != nil {
			r.keep = true
			return app.Decision{}, err
		}
	case verdictForbidden:
		r.keep = true
		return app.Decision{}, fmt.Errorf("mcpgrain: your role (%s) may not decide %q: it still waits for an approver of your organization (execution %s); retry the call once one decided",
			roleName(a.Role), c.doc.Asks[j].Summary, c.doc.Asks[j].ID)
	case verdictInvalid:
		r.keep = true
		return app.Decision{}, fmt.Errorf("mcpgrain: the answer to %q has the unknown action %q", approvalKey, a.Action)
	case verdictWaiting:
		r.keep = true
		return app.Decision{}, r.inputRequired(c, j, q)
	}
	r.asked++
	return *d, nil
}

// askNew journals and publishes question q as the call's next (c.mu held)
// and returns the input_required error that asks the client.
func (r *grainRun) askNew(c *grainCall, q app.Question) error {
	j := len(c.doc.Asks)
	id := engine.NewExecutionID()
	deadline := r.gc.cfg.Now().Add(r.gc.cfg.Window)
	c.doc.Asks = append(c.doc.Asks, callQuestion{ID: id, Summary: q.Summary, Details: q.Details, Form: q.Form != nil, DeadlineMs: deadline.UnixMilli()})
	pause := c.row.PauseID
	c.row.PauseID = id
	r.keep = true
	if err := r.gc.save(c, r.gc.directoryRow(c, j), nil); err != nil {
		c.doc.Asks = c.doc.Asks[:j]
		c.row.PauseID = pause
		return err
	}
	return r.inputRequired(c, j, q)
}

// answerTo is the retry's answer to question cq (nil: none): only the
// question its requestState was issued for takes it, once per run; an
// accepted form's content must match q's form.
func (r *grainRun) answerTo(cq callQuestion, q app.Question) (*offer, error) {
	if r.answer == nil || r.answerFor != cq.ID {
		return nil, nil
	}
	in := r.answer
	r.answer = nil
	a := &offer{Action: in.Action, By: r.who.GetUser(), Role: r.who.GetRole()}
	if len(in.Content) > 0 {
		b, err := json.Marshal(in.Content)
		if err != nil {
			return nil, fmt.Errorf("mcpgrain: the answer to %q: %w", approvalKey, err)
		}
		a.ContentJSON = string(b)
		if s, ok := in.Content["reason"].(string); ok {
			a.Reason = s
		}
	}
	if in.Action == engine.Accept && q.Form != nil {
		if err := checkForm(q.Form, in.Content); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// checkForm checks an accepted answer's content against form.
func checkForm(form *jsonschema.Schema, content map[string]any) error {
	resolved, err := form.Resolve(nil)
	if err != nil {
		return fmt.Errorf("mcpgrain: the question's form: %w", err)
	}
	if content == nil {
		content = map[string]any{}
	}
	if err := resolved.Validate(content); err != nil {
		return fmt.Errorf("mcpgrain: the answer does not match the question's form: %w", err)
	}
	return nil
}

// inputRequired is the error that asks the client question j of c (q as
// the handler asks it now) with the call's input_required result.
func (r *grainRun) inputRequired(c *grainCall, j int, q app.Question) error {
	cq := c.doc.Asks[j]
	params := &mcp.ElicitParams{Message: cq.Summary, RequestedSchema: confirmSchema}
	if q.Form != nil {
		params.RequestedSchema = q.Form
	}
	return &app.InputRequiredError{
		Requests: mcp.InputRequestMap{approvalKey: params},
		State:    callStatePrefix + c.row.ID + "." + cq.ID,
	}
}

// roleName is a role as a message names it.
func roleName(role string) string {
	if role == "" {
		return "none"
	}
	return role
}
