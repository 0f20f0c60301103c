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
	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/store"
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
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
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
