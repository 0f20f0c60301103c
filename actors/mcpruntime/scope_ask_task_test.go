package mcpruntime_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// taskCalls are the durable calls of a task grain (one call, id) in st,
// as one activation of the grain sees them, on clock now.
func taskCalls(t *testing.T, st store.Store, epoch uint64, id string, now func() time.Time) *mcpruntime.GrainCalls {
	t.Helper()
	gc, err := mcpruntime.NewGrainCalls(mcpruntime.GrainCallsConfig{Store: st, Grain: "task/task-1", Owner: "task-1", Epoch: epoch,
		Call: id, Window: time.Minute, MayDecide: policy.Approvers("").MayDecide, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return gc
}

// taskRound runs a handler that steps once (counting f's runs in ran)
// and asks once, bound as a task's round with state (the task's stored
// requestState) and answer.
func taskRound(t *testing.T, gc *mcpruntime.GrainCalls, state string, answer *mcp.ElicitResult, ran *atomic.Int32) (app.Decision, error) {
	t.Helper()
	ctx, finish, err := gc.Bind(context.Background(), toolCall("ann", "admin", state, answer))
	if err != nil {
		t.Fatal(err)
	}
	defer finish(false)
	c, err := app.CallOf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(ctx, "prepare", func(context.Context) (json.RawMessage, error) { ran.Add(1); return json.RawMessage(`1`), nil }); err != nil {
		return app.Decision{}, err
	}
	return c.Ask(ctx, app.Question{Summary: "Deploy 1?"})
}

// A task grain's one call (GrainCallsConfig.Call) is every run of its
// handler, with or without a requestState: a re-run on a new activation
// (after a node loss) replays the step and asks the same question; Lapse
// reports the deadline while the window is open and journals the
// window's decline once it lapsed, which the next round's Ask returns.
func TestAGrainsOneCallIsEveryRunOfIt(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "calls.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	own, err := st.Acquire(context.Background(), "task/task-1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	gc := taskCalls(t, st, own.Epoch, "call_task-1", clock)
	if ok, err := gc.Journaled(context.Background()); ok || err != nil {
		t.Fatalf("Journaled before any run: %v %v", ok, err)
	}
	var ran atomic.Int32
	_, err = taskRound(t, gc, "", nil, &ran)
	var ir *app.InputRequiredError
	if !errors.As(err, &ir) {
		t.Fatalf("first round: %v, want input_required", err)
	}
	callID, execID, ok := mcpruntime.CallState(ir.State)
	if !ok || callID != "call_task-1" {
		t.Fatalf("state %q names call %q, want call_task-1", ir.State, callID)
	}
	if ok, err := gc.Journaled(context.Background()); !ok || err != nil {
		t.Fatalf("Journaled after the question: %v %v", ok, err)
	}

	// A new activation (the node was lost mid-round): the round runs again
	// without the state, against the same call.
	own, err = st.Acquire(context.Background(), "task/task-1", "n2")
	if err != nil {
		t.Fatal(err)
	}
	gc = taskCalls(t, st, own.Epoch, "call_task-1", clock)
	first := ir.State
	_, err = taskRound(t, gc, "", nil, &ran)
	if !errors.As(err, &ir) || ir.State != first {
		t.Fatalf("re-run: %v, want the same question %s asked again", err, execID)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("the step ran %d times, want 1 (replayed)", n)
	}
	decided, deadline, found, err := gc.Lapse(context.Background(), execID)
	if decided || !found || err != nil || !deadline.Equal(clock().Add(time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("Lapse within the window: %v %v %v %v, want the deadline a minute on", decided, deadline, found, err)
	}
	now.Add(time.Minute.Milliseconds())
	if decided, _, found, err := gc.Lapse(context.Background(), execID); !decided || !found || err != nil {
		t.Fatalf("Lapse after the deadline: %v %v %v, want the window's decline", decided, found, err)
	}
	d, err := taskRound(t, gc, ir.State, &mcp.ElicitResult{Action: "accept"}, &ran)
	if err != nil || d.Accepted || d.Reason != engine.ReasonApprovalTimeout {
		t.Fatalf("the round after the lapse: %+v %v, want the window's decline (the late accept ignored)", d, err)
	}
}

// A cancelled task's question is withdrawn: declined with the reason, its
// directory row settled; a decided question is left as it is.
func TestWithdrawDeclinesAnOpenQuestionOnly(t *testing.T) {
	gc, _ := grainCalls(t)
	var ran atomic.Int32
	_, err := taskRound(t, gc, "", nil, &ran)
	var ir *app.InputRequiredError
	if !errors.As(err, &ir) {
		t.Fatalf("first round: %v", err)
	}
	_, execID, _ := mcpruntime.CallState(ir.State)
	if err := gc.Withdraw(context.Background(), execID, "task_cancelled"); err != nil {
		t.Fatal(err)
	}
	if err := gc.Withdraw(context.Background(), execID, "again"); err != nil {
		t.Fatal(err)
	}
	d, err := taskRound(t, gc, ir.State, nil, &ran)
	if err != nil || d.Accepted || d.Reason != "task_cancelled" {
		t.Fatalf("after Withdraw: %+v %v, want the decline task_cancelled", d, err)
	}
}
