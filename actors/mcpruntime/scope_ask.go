package mcpruntime

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The SDK's durable tool calls (docs/sdk.md §4): a tools/call of a
// session whose handler calls Step or Ask becomes a durable call, kept in
// callstore. Its identity is the session, the tool's name and its
// canonical arguments, among the session's open calls (whose handler never
// returned): the client's retry of a call lost with its node runs the
// handler again against the same journal. An asked question is a pause of
// the session exactly as a code-mode pause is: a row of the execution
// directory (published in the transaction that journals it), a lease of
// the session while a handler waits for it in memory, the approval
// deadline's decline, decisions taken by the session grain (roles
// checked there) and handed over through ResolveApproval.

// callDoc is a durable call's journal (callstore.Call.Doc).
type callDoc struct {
	Tool  string          `json:"tool"`
	Steps []callStep      `json:"steps,omitempty"`
	Asks  []callQuestion  `json:"asks,omitempty"`
	Args  json.RawMessage `json:"args,omitempty"`
	// User and Org are the caller of a continuation grain's call (a
	// session's calls are its principal's).
	User string `json:"user,omitempty"`
	Org  string `json:"org,omitempty"`
	// Later marks a pending question's call (AskLater): its one question
	// is the whole call, completed when it is decided.
	Later bool `json:"later,omitempty"`
	// Continued is a pending question's continuation's recorded result,
	// once it ran (its Steps are the continuation's).
	Continued *continued `json:"continued,omitempty"`
}

// callStep is one journaled Step.
type callStep struct {
	Name   string          `json:"name"`
	Result json.RawMessage `json:"result"`
}

// callQuestion is one Ask: its pause and, once decided, the decision.
type callQuestion struct {
	ID         string         `json:"id"`
	Summary    string         `json:"summary"`
	Details    map[string]any `json:"details,omitempty"`
	Form       bool           `json:"form,omitempty"`
	DeadlineMs int64          `json:"deadlineMs"`
	Decision   *app.Decision  `json:"decision,omitempty"`
	// InBand: asked with Question.ClientMayDecide (the caller's client
	// may decide it in band: scope_ask_inband.go).
	InBand bool `json:"inBand,omitempty"`
	// Continuation is the continuation a pending question names
	// (Question.Continuation: scope_ask_continue.go).
	Continuation string `json:"continuation,omitempty"`
}

// durableCall is one open durable call of the session, shared by the
// handler runs of the call and its pause.
type durableCall struct {
	mu        sync.Mutex // guards row, doc, stored, completed, preempt
	row       callstore.Call
	doc       callDoc
	stored    bool          // the row exists in the store
	completed bool          // a run's handler returned and its answer went out: the call is over
	preempt   chan struct{} // closed to ask the run holding turn to let go
	turn      chan struct{} // holds one token per running handler run (capacity 1)
	users     int           // runs using it (guarded by asks.mu)
}

// askPause is an asked question waiting for its decision.
type askPause struct {
	c       *durableCall
	idx     int
	waiters int           // handler runs waiting in memory (guarded by asks.mu)
	done    chan struct{} // closed once the decision is journaled
	// deciding: a decision was handed over (resolve) and is being
	// journaled (guarded by asks.mu): a continuation waits for done.
	deciding bool
}

// askNode is what the durable calls of every runtime of a node share: the
// node's settings, made once by NewBuilder (Builder.asks), not copied into
// every session (a resident session pays one pointer for them).
type askNode struct {
	st     *callstore.Store
	window time.Duration
	// dir finds the session that owns another session's pending question
	// (nil: none is found); publicURL is the origin of approval links
	// ("": the request's).
	dir       *directory.Store
	publicURL string
	// laterCap caps the principal's pending questions (0: unlimited).
	laterCap int
	// approvers is who may decide in band (Config.Approvers); decide sends
	// an in-band decision to a session grain (Config.Decide; nil: none is
	// taken).
	approvers policy.Approvers
	decide    func(ctx context.Context, sessionID string, m *pb.ExecutionDecide) (*pb.ExecutionReply, error)
	// cont sends a continuation to the session grain that owns its
	// question (Config.Continue; nil: only the session's own questions
	// are continued).
	cont func(ctx context.Context, sessionID string, m *pb.AskContinue) (*pb.AskContinueReply, error)
	// now is the clock (Config.Clock).
	now func() time.Time
}

// asks are the durable calls of one session runtime.
type asks struct {
	*askNode // the node's settings (Builder.asks)
	r        *Runtime
	grain    string
	epoch    func() uint64
	leases   session.LeaseHooks
	// running counts the continuations running here.
	running atomic.Int32

	mu     sync.Mutex
	closed chan struct{}           // closed once shut (nil until closing is called)
	shut   bool                    // the runtime closed
	open   map[string]*durableCall // by identity (nil while none: see setOpen)
	pauses map[string]*askPause    // by execution id (nil while none)
	conts  map[string]*contSlot    // continuations running or waiting, by question (nil while none)
}

// setOpen records c as the open call with identity ident (a.mu held). The
// maps of open calls and pauses are made on first use and dropped when
// emptied: most sessions never make a durable call, and an emptied map
// keeps its table.
func (a *asks) setOpen(ident string, c *durableCall) {
	if a.open == nil {
		a.open = map[string]*durableCall{}
	}
	a.open[ident] = c
}

// setPause records p as the pause of execution id (a.mu held).
func (a *asks) setPause(id string, p *askPause) {
	if a.pauses == nil {
		a.pauses = map[string]*askPause{}
	}
	a.pauses[id] = p
}

// dropOpen forgets the open call with identity ident (a.mu held).
func (a *asks) dropOpen(ident string) {
	delete(a.open, ident)
	if len(a.open) == 0 {
		a.open = nil
	}
}

// dropPause forgets the pause of execution id (a.mu held).
func (a *asks) dropPause(id string) {
	delete(a.pauses, id)
	if len(a.pauses) == 0 {
		a.pauses = nil
	}
}

// askWriteTimeout bounds one journal write (store outages included).
const askWriteTimeout = 10 * time.Second

// newAskNode returns the durable calls' node-wide settings of cfg, their
// journal st.
func newAskNode(cfg Config, st *callstore.Store) *askNode {
	w := cfg.AskWindow
	if w <= 0 && cfg.CodeMode != nil {
		w = cfg.CodeMode.Window
	}
	if w <= 0 {
		w = engine.DefaultApprovalWindow
	}
	return &askNode{st: st, window: w, dir: directory.New(cfg.Store), publicURL: cfg.PublicURL,
		laterCap: laterCap(cfg.MaxPendingAsks), approvers: cfg.Approvers, decide: cfg.Decide,
		cont: cfg.Continue, now: cfg.now()}
}

// newAsks returns the durable calls of r, fenced by the session grain's
// epoch (nil if the session has no grain key: nothing durable).
func newAsks(r *Runtime, in session.BuildInput) *asks {
	if in.Grain == "" || in.Epoch == nil || in.Leases == nil {
		return nil
	}
	return &asks{askNode: r.b.asks, r: r, grain: in.Grain, epoch: in.Epoch, leases: in.Leases}
}

// now is the clock of the SDK's durable calls (Config.Clock).
func (cfg Config) now() func() time.Time {
	switch {
	case cfg.Clock != nil:
		return cfg.Clock.Now
	case cfg.CodeMode != nil && cfg.CodeMode.Clock != nil:
		return cfg.CodeMode.Clock.Now
	}
	return time.Now
}

// close wakes every handler waiting for a decision (go-sdk closes a
// session only once its handlers returned).
func (a *asks) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.shut {
		return
	}
	a.shut = true
	if a.closed != nil {
		close(a.closed)
	}
}

// closing is the channel closed once the runtime closes, made on first
// use: only a handler waiting for a decision needs it.
func (a *asks) closing() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed == nil {
		a.closed = make(chan struct{})
		if a.shut {
			close(a.closed)
		}
	}
	return a.closed
}

// identity is the hash of a call's tool name and canonical arguments.
func identity(tool string, args json.RawMessage) string {
	var v any
	canon := []byte(args)
	if len(args) > 0 && json.Unmarshal(args, &v) == nil {
		canon, _ = json.Marshal(v) // object keys sorted
	}
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

func newCallID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// save writes c's row (c.mu held), publishing or settling directory rows
// in the same transaction; a fenced or failed write wraps app.ErrRetry.
func (a *asks) save(c *durableCall, publish *directory.Execution, settle []string) error {
	return a.write(c, callstore.Write{Publish: publish, Settle: settle})
}

// write stores c with w's directory changes (and w's cap) in one
// transaction: a refusal at the cap is app.ErrTooManyPendingAsks.
func (a *asks) write(c *durableCall, w callstore.Write) error {
	doc, err := json.Marshal(c.doc)
	if err != nil {
		return fmt.Errorf("mcpgrain: encode the call's journal: %w", err)
	}
	c.row.Doc = string(doc)
	ctx, cancel := context.WithTimeout(context.Background(), askWriteTimeout)
	defer cancel()
	w.Call, w.SettledAt = c.row, a.now()
	err = store.ThroughOutage(ctx, func() error { return a.st.Put(ctx, a.grain, a.epoch(), w) })
	if errors.Is(err, callstore.ErrCapReached) {
		a.r.b.refusals.refused(exchange.KindSession)
		return tooMany(a.laterCap)
	}
	if err != nil {
		return fmt.Errorf("%w: journal the tool call: %v", app.ErrRetry, err)
	}
	c.stored = true
	return nil
}

// callFor returns the open call with identity ident (the one in memory,
// the one stored, or a new one, not stored until it journals) and counts
// the caller as its user.
func (a *asks) callFor(ctx context.Context, ident, tool string, args json.RawMessage) (*durableCall, error) {
	a.mu.Lock()
	if c, ok := a.open[ident]; ok {
		c.users++
		a.mu.Unlock()
		return c, nil
	}
	a.mu.Unlock()
	c := &durableCall{turn: make(chan struct{}, 1)}
	row, err := a.st.Open(ctx, a.r.id, ident)
	switch {
	case err == nil:
		c.row, c.stored = row, true
		if err := json.Unmarshal([]byte(row.Doc), &c.doc); err != nil {
			return nil, fmt.Errorf("mcpgrain: read the journal of call %s: %w", row.ID, err)
		}
	case errors.Is(err, store.ErrNotFound):
		c.row = callstore.Call{ID: newCallID(), Session: a.r.id, Ident: ident, Created: a.now()}
		c.doc = callDoc{Tool: tool, Args: args}
	default:
		return nil, fmt.Errorf("%w: %v", app.ErrRetry, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.open[ident]; ok { // another run loaded it meanwhile
		c = old
	} else {
		a.setOpen(ident, c)
	}
	c.users++
	return c, nil
}

// restore brings back the session's calls that wait for a decision (after
// passivation, a restart or the loss of the node): each pause is
// published again (a graceful disposal drops the rows of the pauses it
// held in memory) and reported to the session (its deadline is armed
// again). A failure is logged: the next activation tries again.
func (a *asks) restore(ctx context.Context) {
	rows, err := a.st.Paused(ctx, a.r.id)
	if err != nil {
		a.r.log.Warn("mcpruntime: list the paused tool calls to restore", "err", err)
		return
	}
	for _, row := range rows {
		c := &durableCall{row: row, stored: true, turn: make(chan struct{}, 1)}
		if err := json.Unmarshal([]byte(row.Doc), &c.doc); err != nil {
			a.r.log.Warn("mcpruntime: read a paused tool call", "call", row.ID, "err", err)
			continue
		}
		for i, q := range c.doc.Asks {
			if q.ID != row.PauseID || q.Decision != nil {
				continue
			}
			c.mu.Lock()
			err := a.save(c, a.directoryRow(c, i), nil)
			c.mu.Unlock()
			if err != nil {
				a.r.log.Warn("mcpruntime: publish a restored question", "execution", q.ID, "err", err)
				break
			}
			a.mu.Lock()
			a.setOpen(row.Ident, c)
			a.setPause(q.ID, &askPause{c: c, idx: i, done: make(chan struct{})})
			a.mu.Unlock()
			a.leases.Paused(q.ID, time.UnixMilli(q.DeadlineMs))
			a.r.log.Info("mcpruntime: restored paused tool call", "call", row.ID, "execution", q.ID, "steps", len(c.doc.Steps))
		}
	}
}

// directoryRow is question i of c as the approval surfaces list it.
func (a *asks) directoryRow(c *durableCall, i int) *directory.Execution {
	q := c.doc.Asks[i]
	p := a.r.scope.principal
	args, _ := json.Marshal(q.Details)
	return &directory.Execution{
		ID: q.ID, Session: a.r.id, User: p.GetUser(), Org: p.GetOrg(), Address: c.doc.Tool, Message: q.Summary,
		ApprovalText: "tool " + c.doc.Tool, ArgsJSON: string(args), Deadline: time.UnixMilli(q.DeadlineMs),
	}
}
