package mcpruntime_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// decideFixture is a real demo API over HTTP, a real SQLite store and the
// code runtimes of successive activations of one continuation grain whose
// journal publishes its pauses (as a continuation grain's does).
type decideFixture struct {
	api *demo.API
	st  store.Store
	cfg *mcpruntime.CodeMode
	clk *clock.Fake
}

const decideGrain = "c-n1-0"

func newDecideFixture(t *testing.T) *decideFixture {
	t.Helper()
	f := &decideFixture{api: demo.NewAPI(), clk: clock.NewFake(time.UnixMilli(2_000_000_000_000))}
	ts := httptest.NewServer(f.api.Handler())
	t.Cleanup(ts.Close)
	spec := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(spec, f.api.Spec(ts.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := openapi.Load(context.Background(), openapi.Options{Name: "demo", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(src)
	if err != nil {
		t.Fatal(err)
	}
	if f.st, err = store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.st.Close() })
	f.cfg = &mcpruntime.CodeMode{Tools: reg, Limits: sandbox.Limits{WallTime: 10 * time.Second}, Window: time.Minute, Clock: f.clk, Durable: true}
	return f
}

// activate is a new activation of the grain: a new epoch and code runtime.
func (f *decideFixture) activate(t *testing.T) *mcpruntime.CodeRuntime {
	t.Helper()
	own, err := f.st.Acquire(context.Background(), "continuation/"+decideGrain, "n1")
	if err != nil {
		t.Fatal(err)
	}
	c := mcpruntime.NewCodeRuntime(f.cfg, decideGrain, nil,
		engine.StoreJournal{Store: runstore.New(f.st), Grain: own.Grain, Epoch: own.Epoch, Publish: true})
	t.Cleanup(c.Shutdown)
	return c
}

var (
	decAlice = engine.Principal{User: "alice", Org: "acme", Role: "admin"}
	mayAll   = func(role string) bool { return role != "viewer" }
)

func decision(user, org, role, action string, id string) *pb.ExecutionDecide {
	return &pb.ExecutionDecide{Principal: &pb.Principal{User: user, Org: org, Role: role}, ExecutionId: id, Action: action}
}

// An approval surface's decision of a sessionless pause reaches the
// continuation grain that holds it, after that grain's activation was
// lost: the pause is restored from the journal, checked against the
// decider's organization and role, decided once, and applied; the
// directory row settles and the owner reads the outcome.
func TestDecideRestoresChecksAndAppliesASurfaceDecision(t *testing.T) {
	f := newDecideFixture(t)
	ctx := context.Background()
	first := f.activate(t)
	out := first.Engine().ExecuteWithPause(ctx, `return (await tools.demo.createTodo({title: "ship it"})).title`, decAlice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	id := out.Pause.ID
	if row, err := directory.New(f.st).GetExecution(ctx, id); err != nil || row.Session != decideGrain || row.Org != "acme" || !row.Settled.IsZero() {
		t.Fatalf("directory row %+v %v: want the published pause", row, err)
	}
	first.Shutdown()

	c := f.activate(t)
	for _, tc := range []struct {
		name string
		m    *pb.ExecutionDecide
		want pb.ExecutionReply_Status
	}{
		{"another organization", decision("mallory", "evil", "admin", "accept", id), pb.ExecutionReply_STATUS_NOT_FOUND},
		{"no organization", decision("mallory", "", "admin", "accept", id), pb.ExecutionReply_STATUS_NOT_FOUND},
		{"an unknown id", decision("bob", "acme", "member", "accept", "exec_"+"00000000000000000000000000000000"), pb.ExecutionReply_STATUS_NOT_FOUND},
		{"a viewer of the organization", decision("vera", "acme", "viewer", "accept", id), pb.ExecutionReply_STATUS_FORBIDDEN},
	} {
		if st, apply := c.Decide(ctx, tc.m, mayAll); st != tc.want || apply != nil {
			t.Fatalf("%s: %s (apply %v), want %s and nothing to apply", tc.name, st, apply != nil, tc.want)
		}
	}
	st, apply := c.Decide(ctx, decision("bob", "acme", "member", "accept", id), mayAll)
	if st != pb.ExecutionReply_STATUS_OK || apply == nil {
		t.Fatalf("member's decision: %s", st)
	}
	if again, _ := c.Decide(ctx, decision("alice", "acme", "admin", "decline", id), mayAll); again != pb.ExecutionReply_STATUS_ALREADY_DECIDED {
		t.Fatalf("second decision before the first was applied: %s", again)
	}
	apply()
	if again, _ := c.Decide(ctx, decision("alice", "acme", "admin", "decline", id), mayAll); again != pb.ExecutionReply_STATUS_ALREADY_DECIDED {
		t.Fatalf("second decision after the first was applied: %s", again)
	}
	done, found := c.Engine().Outcome(ctx, id, engine.AsOwner(decAlice))
	if !found || done.Status != engine.StatusCompleted || done.Result.Value != "ship it" || len(f.api.Todos()) != 1 {
		t.Fatalf("outcome %v %+v, %d to-dos", found, done, len(f.api.Todos()))
	}
	if row, err := directory.New(f.st).GetExecution(ctx, id); err != nil || row.Settled.IsZero() {
		t.Fatalf("directory row %+v %v: want it settled", row, err)
	}
}

// A surface's decision after the pause's deadline is not applied as
// given: the engine declines the pause (approval_timeout) and the surface
// is told it was settled otherwise.
func TestDecideAfterTheDeadlineDeclines(t *testing.T) {
	f := newDecideFixture(t)
	ctx := context.Background()
	c := f.activate(t)
	out := c.Engine().ExecuteWithPause(ctx, `return (await tools.demo.createTodo({title: "late"})).title`, decAlice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	f.clk.Advance(2 * time.Minute)
	st, apply := c.Decide(ctx, decision("bob", "acme", "member", "accept", out.Pause.ID), mayAll)
	if st != pb.ExecutionReply_STATUS_ALREADY_DECIDED || apply == nil {
		t.Fatalf("late decision: %s (apply %v)", st, apply != nil)
	}
	apply()
	done, found := c.Engine().Outcome(ctx, out.Pause.ID, engine.AsOwner(decAlice))
	if !found || done.Status != engine.StatusError || len(f.api.Todos()) != 0 {
		t.Fatalf("outcome %v %+v, %d to-dos: want the timeout's decline", found, done, len(f.api.Todos()))
	}
}

// A retry that reaches the grain after an approval surface's decision was
// taken (its reply already sent) but before it reached the execution
// waits for it and gets what the execution came to — not "no outcome",
// which sent a viewer's client, whose own answer is refused, an
// insufficient_role instead of the approved result (gateway
// TestSessionlessPausesAreOnTheApprovalSurfaces, found flaky).
func TestDecidedOutcomeWaitsForASurfaceDecisionBeingApplied(t *testing.T) {
	f := newDecideFixture(t)
	ctx := context.Background()
	c := f.activate(t)
	vera := engine.Principal{User: "vera", Org: "acme", Role: "viewer"}
	out := c.Engine().ExecuteWithPause(ctx, `return (await tools.demo.createTodo({title: "ship it"})).title`, vera)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	id := out.Pause.ID
	if _, found := c.DecidedOutcome(ctx, id, engine.AsOwner(vera)); found {
		t.Fatal("an outcome before any decision")
	}
	st, apply := c.Decide(ctx, decision("alice", "acme", "admin", "accept", id), mayAll)
	if st != pb.ExecutionReply_STATUS_OK || apply == nil {
		t.Fatalf("decide: %v", st)
	}
	if got, found := c.Engine().Outcome(ctx, id, engine.AsOwner(vera)); found {
		t.Fatalf("the engine knows an outcome before the decision was applied: %+v", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, found := c.DecidedOutcome(cancelled, id, engine.AsOwner(vera)); found {
		t.Fatal("an outcome before the decision was applied")
	}
	type result struct {
		out   engine.Outcome
		found bool
	}
	waited := make(chan result, 1)
	go func() {
		o, found := c.DecidedOutcome(ctx, id, engine.AsOwner(vera))
		waited <- result{o, found}
	}()
	apply()
	r := <-waited
	if !r.found || r.out.Status != engine.StatusCompleted || r.out.Result.Value != "ship it" {
		t.Fatalf("the retry's outcome: %v %+v, want completed with the to-do", r.found, r.out)
	}
	if _, found := c.DecidedOutcome(ctx, id, engine.AsOwner(engine.Principal{User: "carol", Org: "globex"})); found {
		t.Fatal("another organization read the outcome")
	}
}
