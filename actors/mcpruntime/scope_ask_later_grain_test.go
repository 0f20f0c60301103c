package mcpruntime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// laterWorld is a real (SQLite) store whose grains ask without waiting on
// one injected clock.
type laterWorld struct {
	t        *testing.T
	st       store.Store
	mu       sync.Mutex
	now      time.Time
	refusals *mcpruntime.LaterRefusals
	reg      *prometheus.Registry
	alarms   *alarms
}

// alarms are the reminders of the world's pending questions, by
// question: when each is due (absent: none).
type alarms struct {
	mu  sync.Mutex
	due map[string]time.Time
}

func (a *alarms) Arm(_ context.Context, id string, due time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.due[id] = due
	return nil
}

func (a *alarms) Disarm(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.due, id)
}

// dueAt is when question id's reminder is due (ok false: none).
func (a *alarms) dueAt(id string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, ok := a.due[id]
	return d, ok
}

func newLaterWorld(t *testing.T) *laterWorld {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "calls.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg := prometheus.NewRegistry()
	refusals, err := mcpruntime.NewLaterRefusals(reg)
	if err != nil {
		t.Fatal(err)
	}
	return &laterWorld{t: t, st: st, now: time.UnixMilli(1_800_000_000_000), refusals: refusals, reg: reg,
		alarms: &alarms{due: map[string]time.Time{}}}
}

// refused is the refusal metric's value for owner kind.
func (w *laterWorld) refused(owner string) float64 {
	w.t.Helper()
	mfs, err := w.reg.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcpgrain_pending_asks_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "owner" && l.GetValue() == owner {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	w.t.Fatalf("no series owner=%s", owner)
	return 0
}

func (w *laterWorld) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *laterWorld) advance(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = w.now.Add(d)
}

// grain returns the calls of grain owner (a continuation's "c-…" or a
// task's "task-…": one call), owned in the store, capped at max.
func (w *laterWorld) grain(owner string, max int) *mcpruntime.GrainCalls {
	w.t.Helper()
	key := exchange.OwnerKind(owner) + "/" + owner
	own, err := w.st.Acquire(context.Background(), key, "n1")
	if err != nil {
		w.t.Fatal(err)
	}
	cfg := mcpruntime.GrainCallsConfig{Store: w.st, Grain: key, Owner: owner, Epoch: own.Epoch, Window: time.Minute,
		MayDecide: policy.Approvers("").MayDecide, Now: w.clock,
		Later: mcpruntime.LaterConfig{PublicURL: "https://approve.example", MaxPendingAsks: max, Refusals: w.refusals}, Alarms: w.alarms}
	if exchange.OwnerKind(owner) == exchange.KindTask {
		cfg.Call = "call_" + owner
	}
	gc, err := mcpruntime.NewGrainCalls(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return gc
}

// who is a 2026-07-28 tool call of user (org, role) of tool with args.
func who(user, org, role, tool, args string) *mcp.CallToolRequest {
	h := exchange.Identity(&pb.HttpExchange{Principal: &pb.Principal{User: user, Org: org, Role: role}}, "c-n1-0", true)
	return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tool, Arguments: json.RawMessage(args)}, Extra: &mcp.RequestExtra{Header: h}}
}

// inCall runs f in a tool call req bound to gc, as the continuation
// server (or a task's runner) does.
func inCall[T any](t *testing.T, gc *mcpruntime.GrainCalls, req *mcp.CallToolRequest, f func(context.Context, app.Later) (T, error)) (T, error) {
	t.Helper()
	ctx, finish, err := gc.Bind(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer finish(false)
	l, err := app.LaterOf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return f(ctx, l)
}

func askLater(t *testing.T, gc *mcpruntime.GrainCalls, req *mcp.CallToolRequest, summary string) (app.Pending, error) {
	return inCall(t, gc, req, func(ctx context.Context, l app.Later) (app.Pending, error) {
		return l.AskLater(ctx, app.Question{Summary: summary, Details: map[string]any{"v": "1"}})
	})
}

func status(t *testing.T, gc *mcpruntime.GrainCalls, req *mcp.CallToolRequest, id string) (app.PendingStatus, error) {
	return inCall(t, gc, req, func(ctx context.Context, l app.Later) (app.PendingStatus, error) { return l.AskStatus(ctx, id) })
}

func decide(t *testing.T, gc *mcpruntime.GrainCalls, id, user, role, action string) pb.ExecutionReply_Status {
	t.Helper()
	st, found, err := gc.Decide(context.Background(), &pb.ExecutionDecide{ExecutionId: id, Action: action,
		Principal: &pb.Principal{User: user, Org: "acme", Role: role}})
	if err != nil || !found {
		t.Fatalf("decide %s by %s: %v found %v", id, user, err, found)
	}
	return st
}

// A 2026-07-28 call's AskLater publishes its question owned by the
// request's continuation grain and returns at once; a later call of the
// same principal on another continuation grain reads it; another user of
// the organization is refused (ErrForeignAsk), another organization finds
// nothing (ErrUnknownAsk), and AwaitAsk there is ErrAwaitElsewhere while
// undecided. A viewer may not decide it; a member's accept is read
// everywhere; past its deadline an undecided question reads expired
// with nobody recording it, and a late accept is the window's decline.
func TestASessionlessCallAsksLaterAndAnotherCallReadsIt(t *testing.T) {
	w := newLaterWorld(t)
	first, second := w.grain("c-n1-0", 0), w.grain("c-n1-1", 0)
	alice := who("alice", "acme", "member", "request_deploy", `{"v":"1"}`)
	p, err := askLater(t, first, alice, "Deploy 1?")
	if err != nil || p.URL != "https://approve.example/approve/"+p.ID || !p.Deadline.Equal(w.clock().Add(time.Minute)) {
		t.Fatalf("AskLater: %+v %v", p, err)
	}
	row, err := directory.New(w.st).GetExecution(context.Background(), p.ID)
	if err != nil || row.Session != "c-n1-0" || row.User != "alice" || row.Org != "acme" || row.Address != "request_deploy" || !row.Settled.IsZero() {
		t.Fatalf("listed %+v %v, want alice's question owned by the continuation grain", row, err)
	}
	aliceLater := who("alice", "acme", "member", "deploy_status", `{}`)
	if s, err := status(t, second, aliceLater, p.ID); err != nil || s.State != app.AskWaiting || s.Summary != "Deploy 1?" || s.Details["v"] != "1" {
		t.Fatalf("alice's status from another call: %+v %v", s, err)
	}
	if _, err := status(t, second, who("bob", "acme", "admin", "deploy_status", `{}`), p.ID); !errors.Is(err, app.ErrForeignAsk) {
		t.Fatalf("bob's status: %v, want ErrForeignAsk", err)
	}
	if _, err := status(t, second, who("alice", "evil", "admin", "deploy_status", `{}`), p.ID); !errors.Is(err, app.ErrUnknownAsk) {
		t.Fatalf("another organization's status: %v, want ErrUnknownAsk", err)
	}
	if _, err := status(t, second, aliceLater, "exec_unknown"); !errors.Is(err, app.ErrUnknownAsk) {
		t.Fatalf("an unknown id: %v, want ErrUnknownAsk", err)
	}
	_, err = inCall(t, second, aliceLater, func(ctx context.Context, l app.Later) (app.PendingStatus, error) { return l.AwaitAsk(ctx, p.ID) })
	if !errors.Is(err, app.ErrAwaitElsewhere) {
		t.Fatalf("AwaitAsk of an undecided question: %v, want ErrAwaitElsewhere at once", err)
	}
	if st := decide(t, first, p.ID, "vic", "viewer", "accept"); st != pb.ExecutionReply_STATUS_FORBIDDEN {
		t.Fatalf("a viewer's accept: %v, want FORBIDDEN", st)
	}
	if st, found, _ := first.Decide(context.Background(), &pb.ExecutionDecide{ExecutionId: p.ID, Action: "accept",
		Principal: &pb.Principal{User: "eve", Org: "evil", Role: "admin"}}); found && st == pb.ExecutionReply_STATUS_OK {
		t.Fatal("another organization decided the question")
	}
	if st := decide(t, first, p.ID, "bob", "member", "accept"); st != pb.ExecutionReply_STATUS_OK {
		t.Fatalf("bob's accept: %v", st)
	}
	for _, gc := range []*mcpruntime.GrainCalls{first, second} {
		s, err := status(t, gc, aliceLater, p.ID)
		if err != nil || s.State != app.AskDecided || !s.Decision.Accepted || s.Decision.By != "bob" {
			t.Fatalf("status after the accept: %+v %v", s, err)
		}
	}
	if row, _ := directory.New(w.st).GetExecution(context.Background(), p.ID); row.Settled.IsZero() {
		t.Fatal("the decided question is still listed")
	}

	late, err := askLater(t, first, alice, "Deploy 2?")
	if err != nil {
		t.Fatal(err)
	}
	w.advance(time.Minute)
	s, err := status(t, second, aliceLater, late.ID)
	if err != nil || s.State != app.AskExpired || s.Decision.Reason != "approval_timeout" || s.Decision.By != "" {
		t.Fatalf("status past the deadline: %+v %v, want expired", s, err)
	}
	if st := decide(t, first, late.ID, "bob", "member", "accept"); st != pb.ExecutionReply_STATUS_ALREADY_DECIDED {
		t.Fatalf("a late accept: %v, want ALREADY_DECIDED (the window's decline)", st)
	}
	if s, _ := status(t, second, aliceLater, late.ID); s.State != app.AskExpired {
		t.Fatalf("after the late accept: %+v, want expired", s)
	}
}

// The bug of a session that ended: its question's reminder is gone with
// it, so nobody records the window's decline. A read from any call past
// the deadline says expired anyway (before it: pending).
func TestAnEndedSessionsQuestionReadsExpiredPastItsDeadline(t *testing.T) {
	w := newLaterWorld(t)
	own, err := w.st.Acquire(context.Background(), "session/S1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	deadline := w.clock().Add(time.Minute)
	doc := fmt.Sprintf(`{"tool":"request_deploy","later":true,"asks":[{"id":"exec_s1","summary":"Deploy?","deadlineMs":%d}]}`, deadline.UnixMilli())
	err = callstore.New(w.st).Put(context.Background(), "session/S1", own.Epoch, callstore.Write{
		Call:    callstore.Call{ID: "later_exec_s1", Session: "S1", Ident: "later/exec_s1", Doc: doc, PauseID: "exec_s1", Created: w.clock()},
		Publish: &directory.Execution{ID: "exec_s1", Session: "S1", User: "alice", Org: "acme", Address: "request_deploy", Message: "Deploy?", Deadline: deadline},
	})
	if err != nil {
		t.Fatal(err)
	}
	reader := w.grain("c-n1-5", 0)
	alice := who("alice", "acme", "member", "deploy_status", `{}`)
	if s, err := status(t, reader, alice, "exec_s1"); err != nil || s.State != app.AskWaiting {
		t.Fatalf("before the deadline: %+v %v, want pending", s, err)
	}
	w.advance(time.Minute + time.Millisecond)
	s, err := status(t, reader, alice, "exec_s1")
	if err != nil || s.State != app.AskExpired || s.Decision.Reason != "approval_timeout" || s.Decision.Accepted {
		t.Fatalf("past the deadline of an ended session's question: %+v %v, want expired", s, err)
	}
	if _, err := status(t, reader, who("bob", "acme", "admin", "deploy_status", `{}`), "exec_s1"); !errors.Is(err, app.ErrForeignAsk) {
		t.Fatalf("bob reads alice's session question: %v, want ErrForeignAsk", err)
	}
}

// In a task's run AskLater publishes a question owned by the task grain
// and the run goes on; a re-run of the task's one call (a new round, or
// the re-run after a node loss) gets the same question, listed once.
func TestATasksRunAsksLaterOnce(t *testing.T) {
	w := newLaterWorld(t)
	task := w.grain("task-1", 0)
	ann := who("ann", "acme", "admin", "request_deploy", `{"v":"1"}`)
	p, err := askLater(t, task, ann, "Deploy 1?")
	if err != nil {
		t.Fatal(err)
	}
	task = w.grain("task-1", 0) // a new activation (the old one is fenced)
	again, err := askLater(t, task, ann, "Deploy 1?")
	if err != nil || again.ID != p.ID {
		t.Fatalf("the re-run asked %+v %v, want the same question %s", again, err, p.ID)
	}
	rows, err := directory.New(w.st).ListExecutions(context.Background(), "acme", w.clock(), 10)
	if err != nil || len(rows) != 1 || rows[0].Session != "task-1" {
		t.Fatalf("listed %+v %v, want one question owned by the task", rows, err)
	}
	if st := decide(t, task, p.ID, "bob", "member", "decline"); st != pb.ExecutionReply_STATUS_OK {
		t.Fatalf("decline: %v", st)
	}
	s, err := status(t, w.grain("c-n1-2", 0), who("ann", "acme", "viewer", "deploy_status", `{}`), p.ID)
	if err != nil || s.State != app.AskDecided || s.Decision.Accepted || s.Decision.By != "bob" {
		t.Fatalf("status from a 2026-07-28 call: %+v %v", s, err)
	}
}

// At --max-pending-asks-per-principal the next AskLater of the principal
// is ErrTooManyPendingAsks, publishes nothing and is counted by the
// refusal metric under its owner's kind; another user, and the same user
// after a decision, are not refused.
func TestAGrainsAskLaterIsCappedAndCounted(t *testing.T) {
	w := newLaterWorld(t)
	gc := w.grain("c-n1-0", 1)
	alice := func(args string) *mcp.CallToolRequest { return who("alice", "acme", "member", "request_deploy", args) }
	p, err := askLater(t, gc, alice(`{"v":"1"}`), "Deploy 1?")
	if err != nil {
		t.Fatal(err)
	}
	_, err = askLater(t, gc, alice(`{"v":"2"}`), "Deploy 2?")
	if !errors.Is(err, app.ErrTooManyPendingAsks) || !strings.Contains(err.Error(), "--max-pending-asks-per-principal") {
		t.Fatalf("the second: %v, want ErrTooManyPendingAsks", err)
	}
	if n := w.refused(exchange.KindContinuation); n != 1 {
		t.Fatalf("%v refusals counted, want 1", n)
	}
	if n := w.refused(exchange.KindSession); n != 0 {
		t.Fatalf("%v session refusals counted, want 0", n)
	}
	if _, err := askLater(t, gc, who("bob", "acme", "member", "request_deploy", `{"v":"2"}`), "Deploy 2?"); err != nil {
		t.Fatalf("bob: %v", err)
	}
	rows, _ := directory.New(w.st).ListExecutions(context.Background(), "acme", w.clock(), 10)
	if len(rows) != 2 {
		t.Fatalf("%d listed, want alice's first and bob's", len(rows))
	}
	decide(t, gc, p.ID, "bob", "member", "accept")
	if _, err := askLater(t, gc, alice(`{"v":"3"}`), "Deploy 3?"); err != nil {
		t.Fatalf("after the decision: %v", err)
	}
	if w.refused(exchange.KindTask) != 0 || w.refused(exchange.KindContinuation) != 1 {
		t.Fatal("the refusal metric moved without a refusal")
	}
}

// The reminder of a pending question of a continuation grain or a task is
// armed at its deadline when it is published. Fired early it is due
// again at the deadline; at the deadline it records the window's
// decline: the directory row settles at the deadline with no decider (the
// inbox's "timed out"), the question is expired for any reader, a late
// accept decides nothing, and a second firing does nothing. A question
// decided first has its reminder cancelled, and a leftover firing does
// nothing either.
func TestTheWindowDeclinesAGrainsPendingQuestionAtItsDeadline(t *testing.T) {
	for _, owner := range []string{"c-n1-0", "task-1"} {
		t.Run(exchange.OwnerKind(owner), func(t *testing.T) {
			w := newLaterWorld(t)
			gc := w.grain(owner, 0)
			alice := who("alice", "acme", "member", "request_deploy", `{"v":"1"}`)
			asked, err := inCall(t, gc, alice, func(ctx context.Context, l app.Later) ([]app.Pending, error) {
				p, err := l.AskLater(ctx, app.Question{Summary: "Deploy 1?"})
				if err != nil {
					return nil, err
				}
				q, err := l.AskLater(ctx, app.Question{Summary: "Deploy 2?"})
				return []app.Pending{p, q}, err
			})
			if err != nil {
				t.Fatal(err)
			}
			p, q := asked[0], asked[1]
			for _, a := range asked {
				if due, ok := w.alarms.dueAt(a.ID); !ok || !due.Equal(a.Deadline) {
					t.Fatalf("reminder due %v (%v), want at the deadline %v", due, ok, a.Deadline)
				}
			}
			fire := func(id string) time.Time {
				t.Helper()
				again, err := gc.OnLaterAlarm(context.Background(), id, w.clock())
				if err != nil {
					t.Fatal(err)
				}
				return again
			}
			if again := fire(p.ID); !again.Equal(p.Deadline) {
				t.Fatalf("fired early: due again %v, want at the deadline %v", again, p.Deadline)
			}
			if row, _ := directory.New(w.st).GetExecution(context.Background(), p.ID); !row.Settled.IsZero() {
				t.Fatal("an early firing settled the question")
			}
			if st := decide(t, gc, q.ID, "bob", "member", "accept"); st != pb.ExecutionReply_STATUS_OK {
				t.Fatalf("accept: %v", st)
			}
			if _, ok := w.alarms.dueAt(q.ID); ok {
				t.Fatal("the decided question's reminder was not cancelled")
			}
			w.advance(time.Minute)
			for _, id := range []string{p.ID, p.ID, q.ID} { // the window's, a second firing, a leftover
				if again := fire(id); !again.IsZero() {
					t.Fatalf("%s at the deadline: due again %v, want done", id, again)
				}
			}
			row, err := directory.New(w.st).GetExecution(context.Background(), p.ID)
			if err != nil || row.Settled.Before(row.Deadline) || row.Decision != "" || row.DecidedBy != "" {
				t.Fatalf("directory row %+v %v, want settled at its deadline by nobody (timed out)", row, err)
			}
			reader, aliceLater := w.grain("c-n1-9", 0), who("alice", "acme", "member", "deploy_status", `{}`)
			s, err := status(t, reader, aliceLater, p.ID)
			if err != nil || s.State != app.AskExpired || s.Decision.Reason != "approval_timeout" || s.Decision.By != "" {
				t.Fatalf("status: %+v %v, want expired", s, err)
			}
			st, _, err := gc.Decide(context.Background(), &pb.ExecutionDecide{ExecutionId: p.ID, Action: "accept",
				Principal: &pb.Principal{User: "bob", Org: "acme", Role: "member"}})
			if err != nil || st == pb.ExecutionReply_STATUS_OK {
				t.Fatalf("a late accept: %v %v, want it to decide nothing", st, err)
			}
			s, err = status(t, reader, aliceLater, q.ID)
			if err != nil || s.State != app.AskDecided || !s.Decision.Accepted || s.Decision.By != "bob" {
				t.Fatalf("the decided question after its reminder fired: %+v %v", s, err)
			}
		})
	}
}

// A question refused at the cap leaves no reminder armed.
func TestARefusedPendingQuestionLeavesNoReminder(t *testing.T) {
	w := newLaterWorld(t)
	gc := w.grain("c-n1-0", 1)
	if _, err := askLater(t, gc, who("alice", "acme", "member", "request_deploy", `{"v":"1"}`), "Deploy 1?"); err != nil {
		t.Fatal(err)
	}
	if _, err := askLater(t, gc, who("alice", "acme", "member", "request_deploy", `{"v":"2"}`), "Deploy 2?"); !errors.Is(err, app.ErrTooManyPendingAsks) {
		t.Fatalf("the second: %v, want refused", err)
	}
	w.alarms.mu.Lock()
	defer w.alarms.mu.Unlock()
	if n := len(w.alarms.due); n != 1 {
		t.Fatalf("%d reminders armed, want only the published question's", n)
	}
}
