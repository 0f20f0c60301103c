package engine_test

import (
	"context"
	"fmt"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/policy"
)

var (
	bob     = engine.Principal{User: "bob", Org: "acme", Role: "member"}
	mallory = engine.Principal{User: "mallory", Org: "evil", Role: "admin"}
)

func TestAccessAllows(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    engine.Access
		want bool
	}{
		{"the owner", engine.AsOwner(alice), true},
		{"the owner with another role", engine.AsOwner(engine.Principal{User: "alice", Org: "acme", Role: "viewer"}), true},
		{"another user of the organization as owner", engine.AsOwner(bob), false},
		{"another organization as owner", engine.AsOwner(mallory), false},
		{"the same user name in another organization", engine.AsOwner(engine.Principal{User: "alice", Org: "evil"}), false},
		{"an approver of the organization", engine.AsApprover(bob), true},
		{"an approver of another organization", engine.AsApprover(mallory), false},
		{"the grain itself", engine.System, true},
		{"the zero Access", engine.Access{}, false},
	} {
		if got := tc.a.Allows(alice); got != tc.want {
			t.Errorf("%s: Allows(alice) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An engine shared by many principals (a continuation grain's) lets no
// caller but the owner resume, wait on, see or replay an execution: each
// is told exactly what an unknown id gets, and nothing is decided.
func TestOnlyTheOwnerResumesOrReplaysAnExecution(t *testing.T) {
	f := newFixture(t, nil)
	out := f.run(t, `const t = await tools.demo.createTodo({title: "alice's"}); return t.title`)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want paused", out)
	}
	id := out.Pause.ID
	ctx := context.Background()
	intruders := []engine.Access{engine.AsOwner(mallory), engine.AsOwner(bob), engine.AsApprover(mallory), engine.Access{}}
	for _, a := range intruders {
		if _, found := f.e.Resume(ctx, id, a, engine.Response{Action: engine.Accept}); found {
			t.Fatalf("%+v resumed alice's pause", a)
		}
		if _, live := f.e.Paused(id, a); live {
			t.Fatalf("%+v sees alice's pause", a)
		}
		if f.e.IsSettled(id, a) {
			t.Fatalf("%+v: alice's pause reported settled", a)
		}
	}
	if n := len(f.api.Todos()); n != 0 || f.e.PausedCount() != 1 {
		t.Fatalf("after the intruders: %d todos, %d paused; want 0 and 1", n, f.e.PausedCount())
	}
	if _, live := f.e.Paused(id, engine.AsApprover(bob)); !live {
		t.Fatal("an approver of alice's organization does not see the pause")
	}
	done, found := f.e.Resume(ctx, id, engine.AsOwner(alice), engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusCompleted || done.Result.Value != "alice's" {
		t.Fatalf("alice's resume: %v %+v", found, done)
	}
	// Settled: the outcome is replayed to alice only.
	for _, a := range intruders {
		if replay, found := f.e.Resume(ctx, id, a, engine.Response{}); found {
			t.Fatalf("%+v got alice's settled outcome %+v", a, replay)
		}
		if f.e.IsSettled(id, a) {
			t.Fatalf("%+v learns that alice's execution settled", a)
		}
	}
	if replay, found := f.e.Resume(ctx, id, engine.AsOwner(alice), engine.Response{}); !found || replay.Result.Value != "alice's" {
		t.Fatalf("alice's replay: %v %+v", found, replay)
	}
	if !f.e.IsSettled(id, engine.AsOwner(alice)) || len(f.api.Todos()) != 1 {
		t.Fatalf("settled %v, %d todos", f.e.IsSettled(id, engine.AsOwner(alice)), len(f.api.Todos()))
	}
}

// A durable run is checked the same way when it is not in memory: another
// principal's retry neither restores (replays) it nor gets its settled
// outcome from the journal.
func TestOnlyTheOwnerRestoresOrReplaysADurableRun(t *testing.T) {
	f := newDurableFixture(t)
	id := f.pausedThenShutDown()

	second := f.activate(&hookLog{})
	ctx := context.Background()
	if second.RestorePaused(ctx, id, engine.AsOwner(mallory)) || second.PausedCount() != 0 {
		t.Fatalf("another principal's retry restored alice's run: %d paused", second.PausedCount())
	}
	if !second.RestorePaused(ctx, id, engine.AsOwner(alice)) {
		t.Fatal("alice's retry did not restore her run")
	}
	if _, found := second.Resume(ctx, id, engine.AsOwner(alice), engine.Response{Action: engine.Accept}); !found {
		t.Fatal("alice's resume after the restore")
	}
	third := f.activate(&hookLog{})
	if _, found := third.Resume(ctx, id, engine.AsOwner(mallory), engine.Response{}); found || third.IsSettled(id, engine.AsOwner(mallory)) {
		t.Fatal("another principal got alice's settled outcome from the journal")
	}
	if _, found := third.Resume(ctx, id, engine.AsOwner(alice), engine.Response{}); !found || !third.IsSettled(id, engine.AsOwner(alice)) {
		t.Fatal("alice does not get her settled outcome from the journal")
	}
}

// A settled durable run's outcome is final: its owner reads it back from
// any grain's engine on the same store (a resume from a new session of a
// one-shot client, or a sessionless request), without running anything
// again. No one else does — not another user of the organization, another
// organization, an approver, nor the other grain's own System access — and
// an unsettled run is neither decided nor restored there (it is decided
// where it lives).
func TestASettledRunIsReadBackInAnotherGrainByItsOwnerOnly(t *testing.T) {
	f := newDurableFixture(t)
	ctx := context.Background()
	owner := f.activate(&hookLog{})
	out := owner.ExecuteWithPause(ctx, nonDeterministicCode, alice)
	if out.Status != engine.StatusPaused {
		t.Fatalf("outcome %+v, want a pause", out)
	}
	id := out.Pause.ID
	set, _ := policy.New(nil)
	other := engine.New(engine.Config{Tools: f.reg, Policy: set, Clock: f.clk, Session: "s2",
		Journal: engine.StoreJournal{Store: runstore.New(f.st), Grain: "session/s2", Epoch: 1}})
	t.Cleanup(other.Shutdown)

	// Paused in s1: s2 neither decides nor restores it, even for alice.
	if _, found := other.Resume(ctx, id, engine.AsOwner(alice), engine.Response{Action: engine.Accept}); found || other.PausedCount() != 0 {
		t.Fatalf("another grain decided or restored a live pause: %d paused", other.PausedCount())
	}
	if _, live := owner.Paused(id, engine.AsOwner(alice)); !live || f.posts.Load() != 0 {
		t.Fatalf("the pause in its own grain: live %v, %d POSTs", live, f.posts.Load())
	}

	done, found := owner.Resume(ctx, id, engine.AsOwner(alice), engine.Response{Action: engine.Accept})
	if !found || done.Status != engine.StatusCompleted {
		t.Fatalf("resume in the owning grain: %v %+v", found, done)
	}
	for _, tc := range []struct {
		name string
		a    engine.Access
		want bool
	}{
		{"the owner", engine.AsOwner(alice), true},
		{"the owner with another role", engine.AsOwner(engine.Principal{User: "alice", Org: "acme", Role: "viewer"}), true},
		{"another user of the organization", engine.AsOwner(bob), false},
		{"another organization", engine.AsOwner(mallory), false},
		{"an approver of the organization", engine.AsApprover(bob), false},
		{"the other grain's System access", engine.System, false},
		{"the zero Access", engine.Access{}, false},
	} {
		got, found := other.Resume(ctx, id, tc.a, engine.Response{Action: engine.Accept})
		look, seen := other.Outcome(ctx, id, tc.a)
		if found != tc.want || seen != tc.want || other.IsSettled(id, tc.a) != tc.want {
			t.Errorf("%s: resume found %v, outcome found %v, settled %v; want %v", tc.name, found, seen, other.IsSettled(id, tc.a), tc.want)
			continue
		}
		if !tc.want {
			if got.Status != "" || look.Status != "" {
				t.Errorf("%s: got an outcome (%+v, %+v) with found false", tc.name, got, look)
			}
			continue
		}
		if got.Status != engine.StatusCompleted || fmt.Sprint(got.Result.Value) != fmt.Sprint(done.Result.Value) ||
			fmt.Sprint(look.Result.Value) != fmt.Sprint(done.Result.Value) {
			t.Errorf("%s: read back %+v / %+v, want %+v", tc.name, got, look, done)
		}
	}
	if f.posts.Load() != 1 || len(f.api.Todos()) != 1 {
		t.Fatalf("%d POSTs, %d to-dos: reading the outcome back ran the write again", f.posts.Load(), len(f.api.Todos()))
	}
}
