package tasks

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// stepper is a tool that is not safe to re-run by its annotations (none)
// but journals its work: step "a", then it waits for release, then step
// "b". It counts the runs of each step's function.
type stepper struct {
	a, b    atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (s *stepper) server(*mcp.ServerOptions, func(*mcp.Server)) (*mcp.Server, func(), error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "stepper-test", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "stepper"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		c, err := app.CallOf(ctx)
		if err != nil {
			return nil, nil, err
		}
		if _, err := c.Step(ctx, "a", func(context.Context) (json.RawMessage, error) { s.a.Add(1); return json.RawMessage(`1`), nil }); err != nil {
			return nil, nil, err
		}
		s.started <- struct{}{}
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if _, err := c.Step(ctx, "b", func(context.Context) (json.RawMessage, error) { s.b.Add(1); return json.RawMessage(`2`), nil }); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	return srv, func() {}, nil
}

// A task whose tool journaled a durable call is re-run after its node is
// lost, although its annotations do not say re-running is safe: the new
// owner's run replays step "a" and runs step "b"; the lost owner's run,
// still going in the test's process, is fenced before its step "b" runs
// and its outcome is dropped. Each step's function ran exactly once, and
// the task completed in its second attempt. Without the journal's say
// (recover asking the tool's annotations only) the task fails as lost.
func TestAJournaledTaskIsReRunAfterItsNodeIsLost(t *testing.T) {
	st, system := storeAndSystem(t)
	tool := &stepper{started: make(chan struct{}, 4), release: make(chan struct{})}
	clk := clock.NewFake(time.Now())
	h, err := NewHost(Config{NewServer: tool.server, Store: taskstore.New(st), Cluster: noCluster, Now: clk.Now, Calls: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)

	og := activate(t, st, system, "t5", "n1")
	old := &taskGrain{h: h, id: "t5"}
	if err := old.Activate(context.Background(), og, nil); err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(map[string]any{"name": "stepper", "arguments": map[string]any{}})
	if _, err := old.start(context.Background(), og, &pb.TaskStart{Params: params, Principal: &pb.Principal{User: "u", Org: "o", Role: "member"}}); err != nil {
		t.Fatal(err)
	}
	<-tool.started

	// The node is lost: another node takes the grain (a new epoch) and is
	// asked about the task; no lease holds it.
	ng := activate(t, st, system, "t5", "n2")
	next := &taskGrain{h: h, id: "t5"}
	if err := next.Activate(context.Background(), ng, nil); err != nil {
		t.Fatal(err)
	}
	next.recover(context.Background(), ng)
	if next.task.Status != string(Working) || next.task.Attempts != 2 || next.cancel == nil {
		t.Fatalf("after the loss: %+v (runs: %v), want working in attempt 2, re-run here", next.task, next.cancel != nil)
	}
	<-tool.started
	close(tool.release)

	old.HandleLocal(context.Background(), og, <-og.done) // fenced before step b: dropped
	next.HandleLocal(context.Background(), ng, <-ng.done)
	if next.task.Status != string(Completed) || next.task.Attempts != 2 {
		t.Fatalf("after the re-run: %+v, want completed in attempt 2", next.task)
	}
	got, err := taskstore.New(st).GetTask(context.Background(), "t5", clk.Now())
	if err != nil || got.Status != string(Completed) || got.Attempts != 2 {
		t.Fatalf("stored: %+v %v, want completed in attempt 2", got, err)
	}
	if a, b := tool.a.Load(), tool.b.Load(); a != 1 || b != 1 {
		t.Fatalf("step a ran %d times, step b %d; want each once", a, b)
	}
}

// laterAsker is a tool that asks without waiting and sends the question's
// id on asked.
type laterAsker struct{ asked chan string }

func (a *laterAsker) server(*mcp.ServerOptions, func(*mcp.Server)) (*mcp.Server, func(), error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker-test", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "asker"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		l, err := app.LaterOf(ctx)
		if err != nil {
			return nil, nil, err
		}
		p, err := l.AskLater(ctx, app.Question{Summary: "Deploy?"})
		if err != nil {
			return nil, nil, err
		}
		a.asked <- p.ID
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: p.ID}}}, nil, nil
	})
	return srv, func() {}, nil
}

// runAsker creates task t7 running the laterAsker tool and serves its
// grain's turn — its local messages and the run's outcome — until the run
// ended.
func runAsker(t *testing.T, h *Host, st store.Store, system *actor.ActorSystem) (*taskGrain, *fakeGrain) {
	t.Helper()
	g := activate(t, st, system, "t7", "n1")
	task := &taskGrain{h: h, id: "t7"}
	if err := task.Activate(context.Background(), g, nil); err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(map[string]any{"name": "asker", "arguments": map[string]any{}})
	if _, err := task.start(context.Background(), g, &pb.TaskStart{Params: params, Principal: &pb.Principal{User: "u", Org: "o", Role: "member"}}); err != nil {
		t.Fatal(err)
	}
	for task.task.Status == string(Working) {
		select {
		case m := <-g.local:
			task.HandleLocal(context.Background(), g, m)
		case d := <-g.done:
			task.HandleLocal(context.Background(), g, d)
		case <-time.After(30 * time.Second):
			t.Fatal("the task's run did not end within 30s")
		}
	}
	return task, g
}

// A task's run asks without waiting: the task grain arms the question's
// reminder, due at its deadline, on its turn (the run waits for it) and
// the task completes. The reminder fired early is made due again; fired
// past the deadline (the injected clock) it declines the question as the
// window does — its directory row settled with no decider — and a
// surface's late accept finds nothing to decide; fired again it does
// nothing.
func TestATasksPendingQuestionIsDeclinedByItsGrainsReminder(t *testing.T) {
	st, system := storeAndSystem(t)
	tool := &laterAsker{asked: make(chan string, 1)}
	clk := clock.NewFake(time.Now())
	h, err := NewHost(Config{NewServer: tool.server, Store: taskstore.New(st), Cluster: noCluster, Now: clk.Now, Calls: st,
		AskWindow: time.Minute, MayDecide: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	task, g := runAsker(t, h, st, system)
	id := <-tool.asked
	name := mcpruntime.LaterReminder(id)
	deadline := clk.Now().Add(time.Minute)
	if due, ok := g.dueAt(name); task.task.Status != string(Completed) || !ok || !due.Equal(deadline) {
		t.Fatalf("task %s, reminder %s due %v (%v), want completed and due at the deadline %v", task.task.Status, name, due, ok, deadline)
	}
	fire := func() {
		t.Helper()
		if err := task.OnReminder(context.Background(), g, &pb.ReminderFired{Name: name, FiredAtMs: clk.Now().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.CancelReminders(context.Background(), name); err != nil { // as the reminder service does once it fired
		t.Fatal(err)
	}
	fire()
	if due, ok := g.dueAt(name); !ok || due.UnixMilli() != deadline.UnixMilli() {
		t.Fatalf("fired early: due %v (%v), want again at the deadline", due, ok)
	}
	clk.Advance(time.Minute)
	fire()
	row, err := directory.New(st).GetExecution(context.Background(), id)
	if err != nil || row.Settled.IsZero() || row.Settled.Before(row.Deadline) || row.Decision != "" || row.DecidedBy != "" {
		t.Fatalf("directory row %+v %v, want settled at its deadline by nobody (timed out)", row, err)
	}
	reply, err := task.decide(context.Background(), g, &pb.ExecutionDecide{ExecutionId: id, Action: "accept", Principal: &pb.Principal{User: "bob", Org: "o", Role: "member"}})
	if err != nil || reply.GetStatus() == pb.ExecutionReply_STATUS_OK {
		t.Fatalf("a late accept: %v %v, want it to decide nothing", reply, err)
	}
	fire()
	if again, _ := directory.New(st).GetExecution(context.Background(), id); !again.Settled.Equal(row.Settled) {
		t.Fatalf("a second firing changed the row: %+v", again)
	}
}

// The bug of a task that expires (--task-ttl) before its pending
// question's deadline: its grain is deleted with the question's reminder,
// and decisions find no task, so the question stayed listed, undecidable,
// and never declined. The expiry now withdraws it first: its directory
// row settles (before its deadline, by nobody), its call is completed
// with a decline of reason task_expired, and then the grain is deleted.
func TestAnExpiringTaskWithdrawsItsPendingQuestions(t *testing.T) {
	st, system := storeAndSystem(t)
	tool := &laterAsker{asked: make(chan string, 1)}
	clk := clock.NewFake(time.Now())
	h, err := NewHost(Config{NewServer: tool.server, Store: taskstore.New(st), Cluster: noCluster, Now: clk.Now, Calls: st,
		TTL: time.Hour, AskWindow: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	task, g := runAsker(t, h, st, system)
	id := <-tool.asked
	clk.Advance(time.Hour)
	if err := task.OnReminder(context.Background(), g, &pb.ReminderFired{Name: reminderExpire, FiredAtMs: clk.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	row, err := directory.New(st).GetExecution(context.Background(), id)
	if err != nil || row.Settled.IsZero() || !row.Settled.Before(row.Deadline) || row.Decision != "" {
		t.Fatalf("directory row %+v %v, want settled (withdrawn) before its deadline", row, err)
	}
	call, err := callstore.New(st).ByPause(context.Background(), grain.Key(KindName, "t7"), id)
	if err == nil {
		t.Fatalf("the question still waits: %+v", call)
	}
	if !g.deleted {
		t.Fatal("the expired task's grain was not deleted")
	}
}

// storeAndSystem is a test's own SQLite store and actor system, both
// closed when the test ends.
func storeAndSystem(t *testing.T) (store.Store, *actor.ActorSystem) {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	return st, system
}
