package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

func TestExecutionDirectory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		mk := func(id, org string, in time.Duration) store.Execution {
			return store.Execution{ID: id, Session: "s-" + id, User: "alice", Org: org, Address: "demo.createTodo",
				Message: "Approve demo.createTodo?", ApprovalText: "POST /todos", ArgsJSON: `{"title":"x"}`, Deadline: now.Add(in)}
		}
		for _, e := range []store.Execution{mk("e1", "acme", 2*time.Minute), mk("e2", "acme", time.Minute), mk("e3", "other", time.Minute), mk("old", "acme", -time.Second)} {
			if err := s.PutExecution(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.GetExecution(ctx, "e1")
		if err != nil || got != mk("e1", "acme", 2*time.Minute) {
			t.Fatalf("get: %+v %v", got, err)
		}
		list, err := s.ListExecutions(ctx, "acme", now, 10)
		if err != nil || len(list) != 2 || list[0].ID != "e2" || list[1].ID != "e1" {
			t.Fatalf("list: %+v %v (want e2, e1: live, soonest first, org only)", list, err)
		}
		upd := mk("e1", "acme", 3*time.Minute)
		upd.Message = "changed"
		_ = s.PutExecution(ctx, upd)
		if got, _ := s.GetExecution(ctx, "e1"); got.Message != "changed" {
			t.Fatal("put did not replace")
		}
		// Settled rows stay readable but leave the listing; the first settle
		// time sticks.
		if err := s.SettleExecutions(ctx, now, "e2", "missing"); err != nil {
			t.Fatal(err)
		}
		_ = s.SettleExecutions(ctx, now.Add(time.Minute), "e2")
		if got, err := s.GetExecution(ctx, "e2"); err != nil || !got.Settled.Equal(now) {
			t.Fatalf("settled row: %+v %v", got, err)
		}
		if list, _ := s.ListExecutions(ctx, "acme", now, 10); len(list) != 1 || list[0].ID != "e1" {
			t.Fatalf("list after settle: %+v", list)
		}
		// Pruning drops rows whose deadline passed, settled or not.
		if n, err := s.PruneExecutions(ctx, now); err != nil || n != 1 {
			t.Fatalf("prune: %d %v (want the one past its deadline)", n, err)
		}
		if _, err := s.GetExecution(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("pruned row: %v", err)
		}
		if err := s.DeleteExecutions(ctx, "e1", "missing"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetExecution(ctx, "e1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
	})
}
