package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// stepLog records the durable-execution steps (transactions) a journal
// writes.
type stepLog struct {
	engine.RunStore
	mu    sync.Mutex
	steps []store.RunWrite
}

func (l *stepLog) WriteRun(ctx context.Context, grain string, epoch uint64, w store.RunWrite) error {
	l.mu.Lock()
	l.steps = append(l.steps, w)
	l.mu.Unlock()
	return l.RunStore.WriteRun(ctx, grain, epoch, w)
}

// An approval cycle is three journal steps: the pause (the journal so far,
// the run and the published directory row), the call about to be sent,
// and the settle (the call's outcome, the settled run and the directory
// row settled) — a call's outcome travels with the run's next write.
func TestAnApprovalCycleIsThreeJournalSteps(t *testing.T) {
	f := newDurableFixture(t)
	own, err := f.st.Acquire(context.Background(), "session/s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	log := &stepLog{RunStore: f.st}
	set, _ := policy.New(nil)
	e := engine.New(engine.Config{Tools: f.reg, Policy: set, Clock: f.clk, ApprovalWindow: time.Minute, Session: "s1",
		Limits:  sandbox.Limits{WallTime: 10 * time.Second},
		Journal: engine.StoreJournal{Store: log, Grain: own.Grain, Epoch: own.Epoch, Publish: true}})
	t.Cleanup(e.Shutdown)
	out := e.ExecuteWithPause(context.Background(), `const l = await tools.demo.listTodos({});
		return await tools.demo.createTodo({title: "x" + l.length})`, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	id := out.Pause.ID
	done, found := e.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusCompleted {
		t.Fatalf("resume: %v %+v", found, done)
	}
	log.mu.Lock()
	steps := append([]store.RunWrite(nil), log.steps...)
	log.mu.Unlock()
	if len(steps) != 3 {
		t.Fatalf("%d journal steps, want 3: %+v", len(steps), steps)
	}
	pause, send, settle := steps[0], steps[1], steps[2]
	if len(pause.Entries) != 2 || pause.Run == nil || pause.Run.PauseID != id || pause.Publish == nil || pause.Publish.ID != id || pause.Publish.Org != "acme" {
		t.Fatalf("the pause step: %+v", pause)
	}
	if len(send.Entries) != 1 || send.Entries[0].State != store.JournalInFlight || send.Run != nil {
		t.Fatalf("the send step: %+v", send)
	}
	if len(settle.Entries) != 1 || settle.Entries[0].State != store.JournalDone || settle.Run == nil || settle.Run.Settled.IsZero() ||
		len(settle.Settle) != 1 || settle.Settle[0] != id {
		t.Fatalf("the settle step (the last outcomes, the run, the directory row): %+v", settle)
	}
	if row, err := f.st.GetExecution(context.Background(), id); err != nil || row.Settled.IsZero() {
		t.Fatalf("directory row after the cycle: %+v %v", row, err)
	}
}
