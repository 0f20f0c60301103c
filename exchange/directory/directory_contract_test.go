package directory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"github.com/mcpgrain/mcpgrain/internal/testenv/storetest"
)

func TestExecutionDirectory(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := newFixture(st)
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		mk := func(id, org string, in time.Duration) directory.Execution {
			return directory.Execution{ID: id, Session: "s-" + id, User: "alice", Org: org, Address: "demo.createTodo",
				Message: "Approve demo.createTodo?", ApprovalText: "POST /todos", ArgsJSON: `{"title":"x"}`, Deadline: now.Add(in)}
		}
		for _, e := range []directory.Execution{mk("e1", "acme", 2*time.Minute), mk("e2", "acme", time.Minute), mk("e3", "other", time.Minute), mk("old", "acme", -time.Second)} {
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

// TestDecisionHistory: a recorded decision names its decider and action,
// settles the row, and sticks; the history lists one organization's
// settled rows, most recent first, bounded.
func TestDecisionHistory(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := newFixture(st)
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		put := func(id, org string) {
			t.Helper()
			e := directory.Execution{ID: id, Session: "s", User: "alice", Org: org, Address: "demo.createTodo", ArgsJSON: `{}`, Deadline: now.Add(time.Hour)}
			if err := s.PutExecution(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"d1", "d2", "d3", "pending"} {
			put(id, "acme")
		}
		put("x1", "globex")
		if err := s.RecordDecision(ctx, "d1", "bob", "accept", "", now); err != nil {
			t.Fatal(err)
		}
		// Settled first (timed out), then a late decision: the settle time stays.
		_ = s.SettleExecutions(ctx, now.Add(time.Second), "d2")
		_ = s.RecordDecision(ctx, "d2", "bob", "decline", "not now", now.Add(time.Minute))
		_ = s.SettleExecutions(ctx, now.Add(2*time.Second), "d3")
		_ = s.RecordDecision(ctx, "x1", "carol", "accept", "", now.Add(3*time.Second))
		// The first decision sticks; a missing row is no error.
		if err := s.RecordDecision(ctx, "d1", "alice", "decline", "too late", now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordDecision(ctx, "missing", "bob", "accept", "", now); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetExecution(ctx, "d1")
		if err != nil || got.DecidedBy != "bob" || got.Decision != "accept" || got.Reason != "" || !got.Settled.Equal(now) {
			t.Fatalf("d1: %+v %v (want bob's accept, settled at its time)", got, err)
		}
		if got, err := s.GetExecution(ctx, "d2"); err != nil || got.Reason != "not now" {
			t.Fatalf("d2: %+v %v (want the decline's reason kept)", got, err)
		}
		list, err := s.ListDecided(ctx, "acme", 10)
		if err != nil || len(list) != 3 {
			t.Fatalf("history: %+v %v", list, err)
		}
		want := []struct{ id, by, action string }{{"d3", "", ""}, {"d2", "bob", "decline"}, {"d1", "bob", "accept"}}
		for i, w := range want {
			if list[i].ID != w.id || list[i].DecidedBy != w.by || list[i].Decision != w.action {
				t.Fatalf("history[%d] = %+v, want %v (most recent first, acme only)", i, list[i], w)
			}
		}
		if !list[1].Settled.Equal(now.Add(time.Second)) {
			t.Fatalf("d2 settled at %v: a late decision moved the settle time", list[1].Settled)
		}
		if l, _ := s.ListDecided(ctx, "acme", 2); len(l) != 2 || l[0].ID != "d3" {
			t.Fatalf("limit 2: %+v", l)
		}
		if l, _ := s.ListDecided(ctx, "acme", 1<<20); len(l) != 3 {
			t.Fatalf("huge limit: %d rows", len(l))
		}
		if l, _ := s.ListExecutions(ctx, "acme", now, 10); len(l) != 1 || l[0].ID != "pending" {
			t.Fatalf("pending after decisions: %+v", l)
		}
		// Re-publishing a row keeps its decision.
		put("d1", "acme")
		if got, _ := s.GetExecution(ctx, "d1"); got.DecidedBy != "bob" {
			t.Fatalf("put cleared the decision: %+v", got)
		}
	})
}

// A session's decision writes its entry in the grain's step
// (DecisionIn): the entry is kept as RecordDecision keeps it (the first
// decision sticks), and a step at a stale epoch writes none.
func TestDecisionInTheGrainsStep(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := newFixture(st)
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		for _, id := range []string{"d1", "d2"} {
			if err := s.PutExecution(ctx, directory.Execution{ID: id, Session: "s", User: "alice", Org: "acme", ArgsJSON: `{}`, Deadline: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		o, err := st.Acquire(ctx, "session/s", "n1")
		if err != nil {
			t.Fatal(err)
		}
		decide := func(epoch uint64, id, user string) error {
			_, err := st.Apply(ctx, "session/s", epoch, store.Writes{Record: []byte("decided " + id),
				Also: []store.Stmt{directory.DecisionIn(id, user, "decline", "not now", now)}})
			return err
		}
		if err := decide(o.Epoch, "d1", "bob"); err != nil {
			t.Fatal(err)
		}
		if err := decide(o.Epoch, "d1", "carol"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetExecution(ctx, "d1"); err != nil || got.DecidedBy != "bob" || got.Decision != "decline" || got.Reason != "not now" || !got.Settled.Equal(now) {
			t.Fatalf("entry: %+v %v, want bob's decline", got, err)
		}
		if _, err := st.Acquire(ctx, "session/s", "n2"); err != nil {
			t.Fatal(err)
		}
		if err := decide(o.Epoch, "d2", "bob"); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale step: %v, want ErrFenced", err)
		}
		if got, _ := s.GetExecution(ctx, "d2"); got.DecidedBy != "" || !got.Settled.IsZero() {
			t.Fatalf("a stale step wrote the entry: %+v", got)
		}
	})
}
