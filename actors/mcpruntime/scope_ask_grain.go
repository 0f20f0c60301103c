package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The SDK's durable tool calls in the 2026-07-28 (sessionless) era
// (docs/sdk.md §4). A tools/call served by a continuation grain whose
// handler calls Step or Ask becomes a durable call of that grain, kept in
// callstore under the grain's store key ("continuation/<id>", never a
// session id) and fenced by its epoch. There is no session to hold a
// handler while a human decides: Ask publishes its question in the
// execution directory (every approval surface lists and decides it, as a
// code-mode pause of the grain) and ends the request with an
// input_required result (an "approval" elicitation: a confirmation, or
// the Question's form) whose requestState names the call and the
// question. The client's retry (the state sealed by the grain: it comes
// back to this grain, wherever it lives) runs the handler again: each
// Step returns its journaled result, each decided Ask its decision, and
// the pending Ask takes, first come first served, the decision an
// approval surface recorded, the window's decline once its deadline
// passed, or the retry's own answer (an approver's: a role that may not
// decide is told so and the question keeps waiting).

// callStatePrefix marks the inner requestState of an Ask's input_required
// result: prefix + call id + "." + question (execution) id.
const callStatePrefix = "mcpgrain-call.v1."

// approvalKey is the input request key of an Ask (code mode's too).
const approvalKey = "approval"

// confirmSchema is the requested schema of a question without a form.
var confirmSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// ErrForeignCall is the answer to a retry whose requestState names no
// durable call of this grain for this caller, tool and arguments: the
// handler never runs for it.
var ErrForeignCall = errors.New("mcpgrain: the requestState names another tool call")

// GrainCallsConfig configures the durable tool calls of a continuation
// grain.
type GrainCallsConfig struct {
	// Store keeps the calls (required).
	Store store.Store
	// Grain is the grain's store key (grain.Key): it fences the writes and
	// keys the calls (required).
	Grain string
	// Owner is the grain's identity, the owner its questions' directory
	// rows name (exchange.OwnerKind routes decisions to it; required).
	Owner string
	// Epoch is the activation's ownership epoch.
	Epoch uint64
	// Call, if set, is the id of the grain's one durable call: every
	// tools/call the grain serves is this call, whatever its
	// requestState (a task grain: its rounds and its re-runs after a node
	// loss are one tool call). "": each call is its own (a continuation
	// grain: the requestState of an Ask names the call).
	Call string
	// Window is how long a question waits for a decision. Default
	// engine.DefaultApprovalWindow.
	Window time.Duration
	// MayDecide reports whether a role may decide (policy.Approvers);
	// nil: nobody may, but the window still declines.
	MayDecide func(role string) bool
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger logs problems. Default slog.Default().
	Logger *slog.Logger
	// Later configures the grain's pending questions (AskLater).
	Later LaterConfig
	// Alarms arms the reminders that decline the grain's pending
	// questions at their deadline (GrainAlarms; nil: none, a question is
	// expired only when read past its deadline).
	Alarms LaterAlarms
}

// GrainCalls are the durable tool calls of one continuation grain
// activation. Its methods are safe for concurrent use.
type GrainCalls struct {
	cfg GrainCallsConfig
	st  *callstore.Store
	// loadMu orders loading a call from the store with the calls held in
	// memory: a call is read only while no run or decision holds it, so
	// the store has every write made to it.
	loadMu sync.Mutex
	mu     sync.Mutex
	calls  map[string]*grainCall // held by a run or a decision, by call id
}

// grainCall is one durable call while a run or a decision holds it.
type grainCall struct {
	turn   chan struct{} // one token per run using the journal (capacity 1)
	mu     sync.Mutex    // guards row, doc, stored
	row    callstore.Call
	doc    callDoc
	stored bool
	users  int // holders (guarded by GrainCalls.mu)
}

// NewGrainCalls returns the durable calls of a continuation grain
// activation.
func NewGrainCalls(cfg GrainCallsConfig) (*GrainCalls, error) {
	if cfg.Store == nil || cfg.Grain == "" || cfg.Owner == "" {
		return nil, errors.New("mcpruntime: GrainCallsConfig.Store, Grain and Owner are required")
	}
	if cfg.Window <= 0 {
		cfg.Window = engine.DefaultApprovalWindow
	}
	if cfg.MayDecide == nil {
		cfg.MayDecide = func(string) bool { return false }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &GrainCalls{cfg: cfg, st: callstore.New(cfg.Store), calls: map[string]*grainCall{}}, nil
}

// Bind binds a tools/call served by the grain to ctx as a possible
// durable call (app.WithCall); call finish once its handler returned
// (interrupted: its request was cut). A retry whose requestState is an
// Ask's must name a call of this grain made by the same caller with the
// same tool and JSON-equal arguments, else Bind fails with
// [ErrForeignCall] and the handler must not run.
func (gc *GrainCalls) Bind(ctx context.Context, req *mcp.CallToolRequest) (context.Context, func(interrupted bool), error) {
	run := &grainRun{gc: gc, req: req, who: &pb.Principal{}}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		run.who = exchange.PrincipalOf(ex.Header)
	}
	if p := req.Params; p != nil {
		run.tool, run.args = p.Name, p.Arguments
		if gc.cfg.Call != "" {
			return gc.bindOne(ctx, run, p)
		}
		if rest, ok := strings.CutPrefix(p.RequestState, callStatePrefix); ok {
			callID, pauseID, _ := strings.Cut(rest, ".")
			c, err := gc.load(ctx, func(ctx context.Context) (callstore.Call, error) { return gc.st.Get(ctx, gc.cfg.Grain, callID) },
				callID, nil)
			if errors.Is(err, store.ErrNotFound) {
				return ctx, func(bool) {}, ErrForeignCall
			}
			if err != nil {
				return ctx, func(bool) {}, err
			}
			if !run.owns(c) {
				gc.release(c)
				return ctx, func(bool) {}, ErrForeignCall
			}
			run.c, run.answerFor = c, pauseID
			if r, ok := p.InputResponses[approvalKey].(*mcp.ElicitResult); ok && r != nil {
				run.answer = r
			}
		}
	}
	return app.WithCall(ctx, run), run.finish, nil
}

// bindOne binds a run of the grain's one call (GrainCallsConfig.Call)
// with the answer the request brings to the question its requestState
// names. The call is read at the run's first Step or Ask (loadOne): a
// handler that calls neither reads nothing.
func (gc *GrainCalls) bindOne(ctx context.Context, run *grainRun, p *mcp.CallToolParamsRaw) (context.Context, func(bool), error) {
	if callID, pauseID, ok := CallState(p.RequestState); ok && callID == gc.cfg.Call {
		run.answerFor = pauseID
		if r, ok := p.InputResponses[approvalKey].(*mcp.ElicitResult); ok && r != nil {
			run.answer = r
		}
	}
	return app.WithCall(ctx, run), run.finish, nil
}

// loadOne holds the grain's one call for run: as journaled, or a new one
// (stored at its first journal write). A journal of another caller, tool
// or arguments is ErrForeignCall.
func (gc *GrainCalls) loadOne(ctx context.Context, run *grainRun) (*grainCall, error) {
	id := gc.cfg.Call
	gc.loadMu.Lock()
	defer gc.loadMu.Unlock()
	c := gc.held(id, nil)
	if c == nil {
		row, err := gc.st.Get(ctx, gc.cfg.Grain, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return gc.create(run), nil
		case err != nil:
			return nil, fmt.Errorf("%w: read the tool call: %v", app.ErrRetry, err)
		}
		c = &grainCall{row: row, stored: true, turn: make(chan struct{}, 1), users: 1}
		if err := json.Unmarshal([]byte(row.Doc), &c.doc); err != nil {
			return nil, fmt.Errorf("mcpgrain: read the journal of call %s: %w", row.ID, err)
		}
		gc.mu.Lock()
		gc.calls[id] = c
		gc.mu.Unlock()
	}
	if !run.owns(c) {
		gc.release(c)
		return nil, ErrForeignCall
	}
	return c, nil
}

// CallState parses the requestState of an Ask's input_required result:
// the call and the question (execution id) it names.
func CallState(state string) (callID, execID string, ok bool) {
	rest, ok := strings.CutPrefix(state, callStatePrefix)
	if !ok {
		return "", "", false
	}
	callID, execID, ok = strings.Cut(rest, ".")
	if !ok || callID == "" || execID == "" {
		return "", "", false
	}
	return callID, execID, true
}

// owns reports whether c is the run's tool call: same caller, tool and
// canonical arguments.
func (r *grainRun) owns(c *grainCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doc.User == r.who.GetUser() && c.doc.Org == r.who.GetOrg() && c.row.Ident == identity(r.tool, r.args)
}

// load returns the call held in memory with id id (if not "") or that
// matches is, else the one read reads from the store, counting the
// caller as a holder.
func (gc *GrainCalls) load(ctx context.Context, read func(context.Context) (callstore.Call, error), id string, is func(*grainCall) bool) (*grainCall, error) {
	gc.loadMu.Lock()
	defer gc.loadMu.Unlock()
	if c := gc.held(id, is); c != nil {
		return c, nil
	}
	row, err := read(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read the tool call: %v", app.ErrRetry, err)
	}
	c := &grainCall{row: row, stored: true, turn: make(chan struct{}, 1), users: 1}
	if err := json.Unmarshal([]byte(row.Doc), &c.doc); err != nil {
		return nil, fmt.Errorf("mcpgrain: read the journal of call %s: %w", row.ID, err)
	}
	gc.mu.Lock()
	gc.calls[row.ID] = c
	gc.mu.Unlock()
	return c, nil
}

// held returns the call in memory with id id (if not "") or that matches
// is, counting the caller as a holder, or nil.
func (gc *GrainCalls) held(id string, is func(*grainCall) bool) *grainCall {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if id != "" {
		c, ok := gc.calls[id]
		if ok {
			c.users++
		}
		return c
	}
	for _, c := range gc.calls {
		c.mu.Lock()
		ok := is(c)
		c.mu.Unlock()
		if ok {
			c.users++
			return c
		}
	}
	return nil
}

// create holds a new call (stored at its first journal write).
func (gc *GrainCalls) create(r *grainRun) *grainCall {
	id := gc.cfg.Call
	if id == "" {
		id = newCallID()
	}
	c := &grainCall{turn: make(chan struct{}, 1), users: 1,
		row: callstore.Call{ID: id, Session: gc.cfg.Grain, Ident: identity(r.tool, r.args), Created: gc.cfg.Now()},
		doc: callDoc{Tool: r.tool, Args: r.args, User: r.who.GetUser(), Org: r.who.GetOrg()}}
	gc.mu.Lock()
	gc.calls[c.row.ID] = c
	gc.mu.Unlock()
	return c
}

// release drops a holder of c; a call nobody holds leaves memory (the
// store has all of it).
func (gc *GrainCalls) release(c *grainCall) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	c.users--
	if c.users == 0 {
		delete(gc.calls, c.row.ID)
	}
}

// save writes c's row (c.mu held), publishing or settling directory rows
// in the same transaction; a fenced or failed write wraps app.ErrRetry.
func (gc *GrainCalls) save(c *grainCall, publish *directory.Execution, settle []string) error {
	doc, err := json.Marshal(c.doc)
	if err != nil {
		return fmt.Errorf("mcpgrain: encode the call's journal: %w", err)
	}
	c.row.Doc = string(doc)
	ctx, cancel := context.WithTimeout(context.Background(), askWriteTimeout)
	defer cancel()
	w := callstore.Write{Call: c.row, Publish: publish, Settle: settle, SettledAt: gc.cfg.Now()}
	err = store.ThroughOutage(ctx, func() error { return gc.st.Put(ctx, gc.cfg.Grain, gc.cfg.Epoch, w) })
	if err != nil {
		return fmt.Errorf("%w: journal the tool call: %v", app.ErrRetry, err)
	}
	c.stored = true
	return nil
}

// directoryRow is question i of c as the approval surfaces list it.
func (gc *GrainCalls) directoryRow(c *grainCall, i int) *directory.Execution {
	q := c.doc.Asks[i]
	args, _ := json.Marshal(q.Details)
	return &directory.Execution{
		ID: q.ID, Session: gc.cfg.Owner, User: c.doc.User, Org: c.doc.Org, Address: c.doc.Tool, Message: q.Summary,
		ApprovalText: "tool " + c.doc.Tool, ArgsJSON: string(args), Deadline: time.UnixMilli(q.DeadlineMs),
	}
}

// record journals decision d of question i of c (c.mu held) and settles
// its directory row; on failure c is as before.
func (gc *GrainCalls) record(c *grainCall, i int, d *app.Decision) error {
	q := &c.doc.Asks[i]
	pause := c.row.PauseID
	q.Decision = d
	if pause == q.ID {
		c.row.PauseID = ""
	}
	if c.doc.Later { // a pending question's call is over once decided
		c.row.Completed = gc.cfg.Now()
	}
	if err := gc.save(c, nil, []string{q.ID}); err != nil {
		q.Decision, c.row.PauseID, c.row.Completed = nil, pause, time.Time{}
		return err
	}
	return nil
}

// Decide takes an approval surface's decision (pb.ExecutionDecide) for
// one of the grain's questions; found is false if the execution is none
// of them (a code-mode pause of the grain, or nothing). Only the
// question's organization finds it; a role that may not decide is
// FORBIDDEN; the first decision wins (ALREADY_DECIDED after, and past the
// deadline: the window's decline is recorded instead).
func (gc *GrainCalls) Decide(ctx context.Context, m *pb.ExecutionDecide) (st pb.ExecutionReply_Status, found bool, err error) {
	id := m.GetExecutionId()
	c, err := gc.load(ctx, func(ctx context.Context) (callstore.Call, error) { return gc.st.ByPause(ctx, gc.cfg.Grain, id) },
		"", func(c *grainCall) bool { return c.doc.question(id) >= 0 })
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, true, err
	}
	defer gc.release(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.doc.question(id)
	who := m.GetPrincipal()
	if i < 0 || who.GetOrg() == "" || who.GetOrg() != c.doc.Org {
		return pb.ExecutionReply_STATUS_NOT_FOUND, true, nil
	}
	content := m.GetContentJson()
	a := &offer{Action: m.GetAction(), Reason: session.DecisionReason(content), By: who.GetUser(), Role: who.GetRole(), ContentJSON: content}
	d, v := settleQuestion(c.doc.Asks[i], gc.cfg.Now(), a, gc.cfg.MayDecide)
	switch v {
	case verdictDecided:
		return pb.ExecutionReply_STATUS_ALREADY_DECIDED, true, nil
	case verdictForbidden:
		return pb.ExecutionReply_STATUS_FORBIDDEN, true, nil
	case verdictInvalid, verdictWaiting:
		return pb.ExecutionReply_STATUS_NOT_FOUND, true, nil
	}
	if err := gc.record(c, i, d); err != nil {
		return 0, true, err
	}
	if c.doc.Later {
		gc.disarmLater(id)
	}
	if v == verdictLapsed {
		return pb.ExecutionReply_STATUS_ALREADY_DECIDED, true, nil
	}
	return pb.ExecutionReply_STATUS_OK, true, nil
}

// question is the index of the question with execution id id (-1: none).
func (d *callDoc) question(id string) int {
	for i, q := range d.Asks {
		if q.ID == id {
			return i
		}
	}
	return -1
}

// Lapse settles question execID as the approval window does: once its
// deadline passed, the window's decline is journaled (unless a decision
// was recorded first). decided reports that the question has its
// decision now; else deadline is when the window lapses. found is false
// if execID is none of the grain's questions.
func (gc *GrainCalls) Lapse(ctx context.Context, execID string) (decided bool, deadline time.Time, found bool, err error) {
	c, err := gc.load(ctx, func(ctx context.Context) (callstore.Call, error) { return gc.st.ByPause(ctx, gc.cfg.Grain, execID) },
		"", func(c *grainCall) bool { return c.doc.question(execID) >= 0 })
	if errors.Is(err, store.ErrNotFound) {
		return false, time.Time{}, false, nil
	}
	if err != nil {
		return false, time.Time{}, true, err
	}
	defer gc.release(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.doc.question(execID)
	if i < 0 {
		return false, time.Time{}, false, nil
	}
	d, v := settleQuestion(c.doc.Asks[i], gc.cfg.Now(), nil, gc.cfg.MayDecide)
	switch v {
	case verdictDecided:
		return true, time.Time{}, true, nil
	case verdictLapsed:
		if err := gc.record(c, i, d); err != nil {
			return false, time.Time{}, true, err
		}
		return true, time.Time{}, true, nil
	}
	return false, time.UnixMilli(c.doc.Asks[i].DeadlineMs), true, nil
}

// Withdraw ends question execID without a human's decision (its task was
// cancelled): a decline with reason, journaled, and its directory row
// settled, so it leaves the approval surfaces. A decided question is left
// as it is.
func (gc *GrainCalls) Withdraw(ctx context.Context, execID, reason string) error {
	c, err := gc.load(ctx, func(ctx context.Context) (callstore.Call, error) { return gc.st.ByPause(ctx, gc.cfg.Grain, execID) },
		"", func(c *grainCall) bool { return c.doc.question(execID) >= 0 })
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer gc.release(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.doc.question(execID)
	if i < 0 || c.doc.Asks[i].Decision != nil {
		return nil
	}
	return gc.record(c, i, &app.Decision{Reason: reason})
}

// WithdrawAll ends every undecided question of the grain — its pending
// questions (AskLater) and an Ask its call waits for — as Withdraw does,
// with reason: the grain is going away (a task at its TTL), and nothing
// would decide them or decline them at their deadline.
func (gc *GrainCalls) WithdrawAll(ctx context.Context, reason string) error {
	calls, err := gc.st.Paused(ctx, gc.cfg.Grain)
	if err != nil {
		return fmt.Errorf("%w: list the grain's questions: %v", app.ErrRetry, err)
	}
	for _, c := range calls {
		if err := gc.Withdraw(ctx, c.PauseID, reason); err != nil {
			return fmt.Errorf("withdraw question %s: %w", c.PauseID, err)
		}
	}
	return nil
}

// Journaled reports whether the grain's one call (GrainCallsConfig.Call)
// journaled anything: a re-run of its handler replays its steps and
// decisions.
func (gc *GrainCalls) Journaled(ctx context.Context) (bool, error) {
	if gc.cfg.Call == "" {
		return false, nil
	}
	_, err := gc.st.Get(ctx, gc.cfg.Grain, gc.cfg.Call)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
