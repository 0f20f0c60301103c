package runstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"github.com/mcpgrain/mcpgrain/internal/testenv/storetest"
)

func TestDurableRunsAndJournal(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := newFixture(st)
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		own, err := s.Acquire(ctx, "session/s1", "n1")
		if err != nil {
			t.Fatal(err)
		}
		g, ep := own.Grain, own.Epoch
		run := runstore.Run{ID: "run_1", Session: "s1", Code: "return 1", Spec: `{"seed":7}`, Created: now}
		if err := s.PutRun(ctx, g, ep, run); err != nil {
			t.Fatal(err)
		}
		entries := []runstore.JournalEntry{
			{Seq: 0, State: runstore.JournalDone, Data: `{"r":1}`},
			{Seq: 1, State: runstore.JournalInFlight, Data: `{"h":"x"}`},
		}
		for _, e := range entries {
			if err := s.PutJournalEntry(ctx, g, ep, run.ID, e); err != nil {
				t.Fatal(err)
			}
		}
		// A call moves on: its entry is replaced in place.
		entries[1] = runstore.JournalEntry{Seq: 1, State: runstore.JournalDone, Data: `{"r":2}`}
		_ = s.PutJournalEntry(ctx, g, ep, run.ID, entries[1])
		entries = append(entries, runstore.JournalEntry{Seq: 2, State: runstore.JournalAwaiting, PauseID: "exec_p", Data: `{}`})
		_ = s.PutJournalEntry(ctx, g, ep, run.ID, entries[2])
		run.PauseID = "exec_p"
		if err := s.PutRun(ctx, g, ep, run); err != nil {
			t.Fatal(err)
		}
		got, journal, err := s.GetRun(ctx, run.ID)
		if err != nil || got != run || len(journal) != 3 {
			t.Fatalf("get: %+v %v %v", got, journal, err)
		}
		for i := range entries {
			if journal[i] != entries[i] {
				t.Fatalf("entry %d: %+v, want %+v", i, journal[i], entries[i])
			}
		}
		if id, err := s.RunByPause(ctx, "exec_p"); err != nil || id != run.ID {
			t.Fatalf("by pause: %q %v", id, err)
		}
		if _, err := s.RunByPause(ctx, "exec_none"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown pause: %v", err)
		}
		if _, _, err := s.GetRun(ctx, "run_none"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown run: %v", err)
		}
		// A run that never paused is not listed.
		_ = s.PutRun(ctx, g, ep, runstore.Run{ID: "run_0", Session: "s1", Code: "x", Spec: "{}", Created: now.Add(-2 * time.Hour)})
		// An old unsettled pause: kept while the directory has it, pruned
		// once it is gone from there.
		_ = s.PutRun(ctx, g, ep, runstore.Run{ID: "run_orphan", Session: "s9", Code: "x", Spec: "{}", PauseID: "exec_orphan", Created: now.Add(-2 * time.Hour)})
		_ = s.PutRun(ctx, g, ep, runstore.Run{ID: "run_listed", Session: "s9", Code: "x", Spec: "{}", PauseID: "exec_listed", Created: now.Add(-2 * time.Hour)})
		_ = s.PutExecution(ctx, directory.Execution{ID: "exec_listed", Session: "s9", Deadline: now.Add(time.Hour)})
		if rs, err := s.PausedRuns(ctx, "s1"); err != nil || len(rs) != 1 || rs[0].ID != run.ID {
			t.Fatalf("paused runs: %+v %v", rs, err)
		}

		// A newer activation fences the old one's writes.
		if _, err := s.Acquire(ctx, g, "n2"); err != nil {
			t.Fatal(err)
		}
		if err := s.PutJournalEntry(ctx, g, ep, run.ID, runstore.JournalEntry{Seq: 3, State: runstore.JournalDone, Data: "{}"}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale journal write: %v", err)
		}
		if err := s.PutRun(ctx, g, ep, run); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale run write: %v", err)
		}
		if _, journal, _ := s.GetRun(ctx, run.ID); len(journal) != 3 {
			t.Fatalf("fenced write landed: %d entries", len(journal))
		}

		// Settled runs leave the listing and are pruned with their journal,
		// as are old runs that never paused.
		own2, _ := s.Load(ctx, g)
		run.Settled, run.Outcome = now, `{"status":"completed"}`
		if err := s.PutRun(ctx, g, own2.Epoch, run); err != nil {
			t.Fatal(err)
		}
		if rs, _ := s.PausedRuns(ctx, "s1"); len(rs) != 0 {
			t.Fatalf("settled run listed: %+v", rs)
		}
		if _, err := s.PruneExecutions(ctx, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"run_1", "run_0", "run_orphan"} {
			if _, _, err := s.GetRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%s after prune: %v", id, err)
			}
		}
		if _, _, err := s.GetRun(ctx, "run_listed"); err != nil {
			t.Fatalf("a pause still in the directory was pruned: %v", err)
		}
		if _, err := s.RunByPause(ctx, "exec_p"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("journal after prune: %v", err)
		}
	})
}

// A durable-execution step is one transaction: entries, run and directory
// rows together, or nothing when the epoch moved on.
func TestWriteRunIsOneFencedStep(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := newFixture(st)
		ctx := context.Background()
		now := time.UnixMilli(1_900_000_000_000)
		own, err := s.Acquire(ctx, "session/w1", "n1")
		if err != nil {
			t.Fatal(err)
		}
		run := runstore.Run{ID: "run_w", Session: "w1", Code: "x", Spec: `{}`, Created: now, PauseID: "exec_a"}
		pub := directory.Execution{ID: "exec_a", Session: "w1", User: "alice", Org: "acme", Address: "demo.createTodo", Deadline: now.Add(time.Minute)}
		// The pause's deadline reminder rides the step; Stored hears of
		// it, as stored, once committed.
		var told []store.Reminder
		var toldCancel []string
		stored := func(set []store.Reminder, cancelled []string) { told, toldCancel = set, cancelled }
		step := runstore.RunWrite{RunID: run.ID, Run: &run, Publish: &pub, Entries: []runstore.JournalEntry{
			{Seq: 0, State: runstore.JournalDone, Data: `{"r":1}`},
			{Seq: 1, State: runstore.JournalAwaiting, PauseID: "exec_a", Data: `{}`},
		}, SetReminders: []store.Reminder{{Name: "approval:exec_a", DueAt: pub.Deadline}}, Stored: stored}
		if err := s.WriteRun(ctx, own.Grain, own.Epoch, step); err != nil {
			t.Fatal(err)
		}
		rs, _ := s.Reminders(ctx, "session/w1")
		if len(rs) != 1 || rs[0].Name != "approval:exec_a" || !rs[0].DueAt.Equal(pub.Deadline) || len(told) != 1 || told[0].Version != rs[0].Version {
			t.Fatalf("the pause's reminder: stored %+v, told %+v", rs, told)
		}
		got, journal, err := s.GetRun(ctx, run.ID)
		if err != nil || got.PauseID != "exec_a" || len(journal) != 2 {
			t.Fatalf("after the pause step: %+v %+v %v", got, journal, err)
		}
		if e, err := s.GetExecution(ctx, "exec_a"); err != nil || e.Org != "acme" || !e.Settled.IsZero() {
			t.Fatalf("published row: %+v %v", e, err)
		}
		// The settle step: the last outcome, the settled run and the
		// directory row together.
		run.Outcome, run.Settled = `{"status":"completed"}`, now.Add(time.Second)
		told = nil
		settle := runstore.RunWrite{RunID: run.ID, Run: &run, Settle: []string{"exec_a"}, SettledAt: now.Add(time.Second),
			Entries:         []runstore.JournalEntry{{Seq: 1, State: runstore.JournalDone, PauseID: "exec_a", Data: `{"r":2}`}},
			CancelReminders: []string{"approval:exec_a"}, Stored: stored}
		// A stale epoch writes none of it.
		if _, err := s.Acquire(ctx, "session/w1", "n2"); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteRun(ctx, own.Grain, own.Epoch, settle); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale step: %v, want ErrFenced", err)
		}
		got, journal, _ = s.GetRun(ctx, run.ID)
		if e, _ := s.GetExecution(ctx, "exec_a"); !got.Settled.IsZero() || journal[1].State != runstore.JournalAwaiting || !e.Settled.IsZero() {
			t.Fatalf("a fenced step changed something: run %+v entry %+v row %+v", got, journal[1], e)
		}
		if rs, _ := s.Reminders(ctx, "session/w1"); len(rs) != 1 || told != nil {
			t.Fatalf("a fenced step cancelled the reminder (%+v) or told of it (%v)", rs, toldCancel)
		}
		cur, _ := s.Load(ctx, "session/w1")
		if err := s.WriteRun(ctx, own.Grain, cur.Epoch, settle); err != nil {
			t.Fatal(err)
		}
		got, journal, _ = s.GetRun(ctx, run.ID)
		if e, _ := s.GetExecution(ctx, "exec_a"); got.Settled.IsZero() || journal[1].State != runstore.JournalDone || e.Settled.IsZero() {
			t.Fatalf("the settle step: run %+v entry %+v row %+v", got, journal[1], e)
		}
		if rs, _ := s.Reminders(ctx, "session/w1"); len(rs) != 0 || len(toldCancel) != 1 || toldCancel[0] != "approval:exec_a" {
			t.Fatalf("the settle's cancel: left %+v, told %v", rs, toldCancel)
		}
	})
}
