package taskstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv/storetest"
)

func TestTasksArePutFencedReadAnywhereAndExpire(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := newFixture(st)
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		own, err := s.Acquire(ctx, "task/t1", "n1")
		if err != nil {
			t.Fatal(err)
		}
		task := taskstore.Task{
			ID: "t1", User: "u", Org: "o", Role: "viewer", Status: "working", Params: `{"name":"slow_compute"}`,
			InputRequests: "", InputResponses: "", Attempts: 1, TTL: time.Hour, PollInterval: 500 * time.Millisecond,
			Created: now, Updated: now, Expires: now.Add(time.Hour),
		}
		if err := s.PutTask(ctx, own.Grain, own.Epoch, task); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetTask(ctx, "t1", now)
		if err != nil || got != task {
			t.Fatalf("get = %+v, %v; want %+v", got, err, task)
		}
		task.Status, task.Result, task.Updated = "completed", `{"content":[]}`, now.Add(time.Second)
		task.InputResponses, task.ResponderRole = `{"approval":{"action":"accept"}}`, "admin"
		if err := s.PutTask(ctx, own.Grain, own.Epoch, task); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetTask(ctx, "t1", now); got != task {
			t.Fatalf("after update = %+v, want %+v", got, task)
		}
		// The creator is the task's for good: a later write does not
		// replace its user, organization or role.
		forged := task
		forged.User, forged.Org, forged.Role = "mallory", "evil", "admin"
		if err := s.PutTask(ctx, own.Grain, own.Epoch, forged); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetTask(ctx, "t1", now); got != task {
			t.Fatalf("a write replaced the creator: %+v, want %+v", got, task)
		}
		// A newer activation fences the old one: its write changes nothing.
		if _, err := s.Acquire(ctx, "task/t1", "n2"); err != nil {
			t.Fatal(err)
		}
		stale := task
		stale.Status = "failed"
		if err := s.PutTask(ctx, own.Grain, own.Epoch, stale); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale put: %v, want ErrFenced", err)
		}
		if got, _ := s.GetTask(ctx, "t1", now); got.Status != "completed" {
			t.Fatalf("a fenced write changed the task: %+v", got)
		}
		if _, err := s.GetTask(ctx, "t1", now.Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired task: %v, want ErrNotFound", err)
		}
		if _, err := s.GetTask(ctx, "none", now); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown task: %v, want ErrNotFound", err)
		}
		if n, err := s.PruneTasks(ctx, now.Add(time.Hour)); err != nil || n != 1 {
			t.Fatalf("prune = %d, %v; want 1", n, err)
		}
	})
}

func TestSwapTaskWritesOnlyFromTheStatusAndAttemptItWasMeantFor(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := newFixture(st)
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		own, err := s.Acquire(ctx, "task/t2", "n1")
		if err != nil {
			t.Fatal(err)
		}
		task := taskstore.Task{
			ID: "t2", User: "u", Org: "o", Role: "member", Status: "working", Params: `{"name":"slow_compute"}`, Attempts: 1,
			TTL: time.Hour, PollInterval: 500 * time.Millisecond, Created: now, Updated: now, Expires: now.Add(time.Hour),
			LeaseUntil: now.Add(5 * time.Second),
		}
		if err := s.PutTask(ctx, own.Grain, own.Epoch, task); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetTask(ctx, "t2", now); got != task {
			t.Fatalf("get = %+v, want %+v (with its lease)", got, task)
		}
		// Another activation took the grain over: the epoch does not fence
		// a swap, the task's status and attempt do.
		if _, err := s.Acquire(ctx, "task/t2", "n2"); err != nil {
			t.Fatal(err)
		}
		done := task
		done.Status, done.Result, done.Updated, done.LeaseUntil = "completed", `{"content":[]}`, now.Add(time.Second), time.Time{}
		done.InputResponses, done.ResponderRole = `{"approval":{"action":"accept"}}`, "admin"
		if err := s.SwapTask(ctx, "working", 1, done); err != nil {
			t.Fatalf("swap of attempt 1: %v", err)
		}
		if got, _ := s.GetTask(ctx, "t2", now); got != done {
			t.Fatalf("after the swap = %+v, want %+v", got, done)
		}
		// A second outcome of the same attempt, or a next attempt started
		// from it, finds the task changed.
		rerun := task
		rerun.Attempts = 2
		for _, w := range []taskstore.Task{done, rerun} {
			if err := s.SwapTask(ctx, "working", 1, w); !errors.Is(err, taskstore.ErrTaskChanged) {
				t.Fatalf("swap from a settled attempt: %v, want ErrTaskChanged", err)
			}
		}
		if got, _ := s.GetTask(ctx, "t2", now); got != done {
			t.Fatalf("a refused swap changed the task: %+v", got)
		}
		if err := s.SwapTask(ctx, "working", 1, taskstore.Task{ID: "none"}); !errors.Is(err, taskstore.ErrTaskChanged) {
			t.Fatalf("swap of an unknown task: %v, want ErrTaskChanged", err)
		}
	})
}
