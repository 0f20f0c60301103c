package callstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"github.com/mcpgrain/mcpgrain/internal/testenv/storetest"
)

// A durable call is written fenced by its session grain's epoch, with the
// directory row its question publishes (and later settles) in the same
// transaction; the session's open call of an identity is found, paused
// calls are listed, a completed call is no longer open, and a write of a
// superseded owner changes nothing.
func TestDurableCallsAreFencedAndPublishTheirQuestions(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		ctx := context.Background()
		calls, dir := callstore.New(st), directory.New(st)
		now := time.UnixMilli(1_900_000_000_000)
		own, err := st.Acquire(ctx, "session/s1", "n1")
		if err != nil {
			t.Fatal(err)
		}
		c := callstore.Call{ID: "call_1", Session: "s1", Ident: "h1", Doc: `{"steps":[]}`, Created: now}
		if err := calls.Put(ctx, own.Grain, own.Epoch, callstore.Write{Call: c}); err != nil {
			t.Fatal(err)
		}
		if _, err := calls.Open(ctx, "s1", "h2"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another identity: %v", err)
		}
		c.Doc, c.PauseID = `{"asks":[{"id":"exec_q"}]}`, "exec_q"
		row := directory.Execution{ID: "exec_q", Session: "s1", User: "alice", Org: "acme", Address: "deploy", Message: "Deploy?", Deadline: now.Add(time.Minute)}
		if err := calls.Put(ctx, own.Grain, own.Epoch, callstore.Write{Call: c, Publish: &row}); err != nil {
			t.Fatal(err)
		}
		if got, err := calls.Open(ctx, "s1", "h1"); err != nil || got != c {
			t.Fatalf("open: %+v %v, want %+v", got, err, c)
		}
		if got, err := dir.GetExecution(ctx, "exec_q"); err != nil || got.Message != "Deploy?" || !got.Settled.IsZero() {
			t.Fatalf("published row: %+v %v", got, err)
		}
		if paused, err := calls.Paused(ctx, "s1"); err != nil || len(paused) != 1 || paused[0].ID != "call_1" {
			t.Fatalf("paused: %+v %v", paused, err)
		}
		if got, err := calls.ByPause(ctx, "s1", "exec_q"); err != nil || got != c {
			t.Fatalf("by pause: %+v %v, want %+v", got, err, c)
		}
		if got, err := calls.Get(ctx, "s1", "call_1"); err != nil || got != c {
			t.Fatalf("get: %+v %v, want %+v", got, err, c)
		}
		// Another owner's key finds nothing (a continuation grain's calls
		// are kept under its store key, never a session id).
		if _, err := calls.Get(ctx, "continuation/s1", "call_1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get as another owner: %v", err)
		}
		if _, err := calls.ByPause(ctx, "continuation/s1", "exec_q"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("by pause as another owner: %v", err)
		}

		// A new owner of the session fences the old one out.
		next, err := st.Acquire(ctx, "session/s1", "n2")
		if err != nil {
			t.Fatal(err)
		}
		stale := c
		stale.Doc = `{"stale":true}`
		if err := calls.Put(ctx, own.Grain, own.Epoch, callstore.Write{Call: stale, Settle: []string{"exec_q"}, SettledAt: now}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale owner's write: %v, want ErrFenced", err)
		}
		if got, _ := dir.GetExecution(ctx, "exec_q"); !got.Settled.IsZero() {
			t.Fatal("a fenced write settled the question")
		}

		// The decision: the pause ends and its row settles, together.
		c.PauseID, c.Doc = "", `{"asks":[{"id":"exec_q","decision":{"Accepted":true}}]}`
		if err := calls.Put(ctx, next.Grain, next.Epoch, callstore.Write{Call: c, Settle: []string{"exec_q"}, SettledAt: now}); err != nil {
			t.Fatal(err)
		}
		if got, _ := dir.GetExecution(ctx, "exec_q"); got.Settled.IsZero() {
			t.Fatal("the decided question's row is not settled")
		}
		if paused, _ := calls.Paused(ctx, "s1"); len(paused) != 0 {
			t.Fatalf("paused after the decision: %+v", paused)
		}
		c.Completed = now.Add(time.Second)
		if err := calls.Put(ctx, next.Grain, next.Epoch, callstore.Write{Call: c}); err != nil {
			t.Fatal(err)
		}
		if _, err := calls.Open(ctx, "s1", "h1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a completed call is still open: %v", err)
		}
		if _, err := calls.ByPause(ctx, "s1", "exec_q"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a completed call still waits: %v", err)
		}
		if got, err := calls.Get(ctx, "s1", "call_1"); err != nil || got.Completed.IsZero() {
			t.Fatalf("a completed call by id: %+v %v", got, err)
		}
		if n, err := calls.Count(ctx, "s1"); err != nil || n != 1 {
			t.Fatalf("count %d %v", n, err)
		}

		// Pruning: a completed call before the cut, an open one that never
		// paused; an open paused one whose row is in the directory stays.
		open := callstore.Call{ID: "call_2", Session: "s1", Ident: "h2", Doc: `{}`, Created: now}
		paused := callstore.Call{ID: "call_3", Session: "s1", Ident: "h3", Doc: `{}`, PauseID: "exec_r", Created: now}
		row.ID = "exec_r"
		for _, w := range []callstore.Write{{Call: open}, {Call: paused, Publish: &row}} {
			if err := calls.Put(ctx, next.Grain, next.Epoch, w); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := calls.Prune(ctx, now.Add(time.Hour)); err != nil || n != 2 {
			t.Fatalf("pruned %d %v, want 2", n, err)
		}
		if left, _ := calls.Paused(ctx, "s1"); len(left) != 1 || left[0].ID != "call_3" {
			t.Fatalf("left %+v, want the paused call", left)
		}
	})
}

// A write with a Cap publishes a principal's pending question only below
// the cap: the one past it is ErrCapReached and writes nothing; another
// principal (another user, the same user in another org) is not counted;
// a settled question, a completed call and a question past its deadline
// free their slot; 8 concurrent publishers of one principal (each its own
// session grain, as on different nodes) never exceed the cap.
func TestPendingQuestionsAreCappedPerPrincipal(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		ctx := context.Background()
		calls, dir := callstore.New(st), directory.New(st)
		now := time.UnixMilli(1_900_000_000_000)
		own, err := st.Acquire(ctx, "session/s1", "n1")
		if err != nil {
			t.Fatal(err)
		}
		capOf := func(n int) *callstore.Cap { return &callstore.Cap{Max: n, Prefix: "later_", Now: now} }
		publish := func(user, org, id string, deadline time.Time, c *callstore.Cap) error {
			row := directory.Execution{ID: id, Session: "s1", User: user, Org: org, Message: id, Deadline: deadline}
			call := callstore.Call{ID: "later_" + id, Session: "s1", Ident: "later/" + id, Doc: "{}", PauseID: id, Created: now}
			return calls.Put(ctx, own.Grain, own.Epoch, callstore.Write{Call: call, Publish: &row, Cap: c})
		}
		soon := now.Add(time.Minute)
		for _, id := range []string{"exec_a1", "exec_a2"} {
			if err := publish("alice", "acme", id, soon, capOf(2)); err != nil {
				t.Fatal(err)
			}
		}
		if err := publish("alice", "acme", "exec_a3", soon, capOf(2)); !errors.Is(err, callstore.ErrCapReached) {
			t.Fatalf("alice's third: %v, want ErrCapReached", err)
		}
		if _, err := dir.GetExecution(ctx, "exec_a3"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused question's row: %v", err)
		}
		if _, err := calls.Get(ctx, "s1", "later_exec_a3"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused question's call: %v", err)
		}
		// Re-publishing a counted question (a retry) is not refused.
		if err := publish("alice", "acme", "exec_a2", soon, capOf(2)); err != nil {
			t.Fatalf("alice's retry: %v", err)
		}
		for _, p := range [][2]string{{"bob", "acme"}, {"alice", "other"}} {
			if err := publish(p[0], p[1], "exec_"+p[0]+p[1], soon, capOf(2)); err != nil {
				t.Fatalf("%s@%s beside alice's full cap: %v", p[0], p[1], err)
			}
		}
		// A decision settles a1: a slot is free, taken by a3.
		settled := callstore.Call{ID: "later_exec_a1", Session: "s1", Ident: "later/exec_a1", Doc: "{}", Created: now, Completed: now}
		if err := calls.Put(ctx, own.Grain, own.Epoch, callstore.Write{Call: settled, Settle: []string{"exec_a1"}, SettledAt: now}); err != nil {
			t.Fatal(err)
		}
		if err := publish("alice", "acme", "exec_a3", soon, capOf(2)); err != nil {
			t.Fatalf("alice's third after a decision: %v", err)
		}
		if err := publish("alice", "acme", "exec_a4", soon, capOf(2)); !errors.Is(err, callstore.ErrCapReached) {
			t.Fatalf("alice's fourth: %v, want ErrCapReached", err)
		}
		// Past their deadlines (the reminder has not declined them yet),
		// a2 and a3 are not counted.
		later := &callstore.Cap{Max: 2, Prefix: "later_", Now: soon}
		if err := publish("alice", "acme", "exec_a4", soon.Add(time.Minute), later); err != nil {
			t.Fatalf("alice's fourth past the others' deadlines: %v", err)
		}

		// Concurrent publishers of one principal, each from its own session.
		var wg sync.WaitGroup
		var ok atomic.Int32
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := fmt.Sprintf("c%d", i)
				o, err := st.Acquire(ctx, "session/"+s, "n1")
				if err != nil {
					t.Error(err)
					return
				}
				id := "exec_" + s
				row := directory.Execution{ID: id, Session: s, User: "carol", Org: "acme", Message: id, Deadline: soon}
				call := callstore.Call{ID: "later_" + id, Session: s, Ident: "later/" + id, Doc: "{}", PauseID: id, Created: now}
				switch err := calls.Put(ctx, o.Grain, o.Epoch, callstore.Write{Call: call, Publish: &row, Cap: capOf(3)}); {
				case err == nil:
					ok.Add(1)
				case !errors.Is(err, callstore.ErrCapReached):
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 3 {
			t.Fatalf("%d of 8 concurrent publishers admitted under a cap of 3", ok.Load())
		}
	})
}
