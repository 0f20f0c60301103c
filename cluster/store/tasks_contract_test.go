package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

func TestTasksArePutFencedReadAnywhereAndExpire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		own, err := s.Acquire(ctx, "task/t1", "n1")
		if err != nil {
			t.Fatal(err)
		}
		task := store.Task{
			ID: "t1", User: "u", Org: "o", Status: "working", Params: `{"name":"slow_compute"}`,
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
		if err := s.PutTask(ctx, own.Grain, own.Epoch, task); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetTask(ctx, "t1", now); got != task {
			t.Fatalf("after update = %+v, want %+v", got, task)
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
