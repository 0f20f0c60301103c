package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// captureRuns keeps the last RunWrite a StoreJournal sends.
type captureRuns struct{ last runstore.RunWrite }

func (c *captureRuns) WriteRun(_ context.Context, _ string, _ uint64, w runstore.RunWrite) error {
	c.last = w
	return nil
}
func (c *captureRuns) GetRun(context.Context, string) (runstore.Run, []runstore.JournalEntry, error) {
	return runstore.Run{}, nil, store.ErrNotFound
}
func (c *captureRuns) RunByPause(context.Context, string) (string, error) {
	return "", store.ErrNotFound
}

// A journal with Deadlines carries the pause's deadline reminder in the
// write that publishes it and cancels the reminders of the pauses a write
// settles; without Deadlines, or without Publish, it carries none.
func TestStoreJournalCarriesDeadlineReminders(t *testing.T) {
	deadline := time.UnixMilli(1_900_000_000_000)
	run := &runstore.Run{ID: "run_1", Session: "s1", PauseID: "exec_b"}
	pause := &engine.Pause{ID: "exec_b", Address: "demo.createTodo", Deadline: deadline}
	stored := func([]store.Reminder, []string) {}
	for _, c := range []struct {
		name       string
		j          engine.StoreJournal
		w          engine.JournalWrite
		set        string
		cancel     string
		wantStored bool
	}{
		{"a pause sets its deadline, linked to the call that paused; the pause it resumed past is cancelled",
			engine.StoreJournal{Publish: true, Deadlines: "approval:", Stored: stored},
			engine.JournalWrite{RunID: "run_1", Run: run, Paused: pause, Settled: []string{"exec_a"}, Link: "00-trace"},
			"approval:exec_b@00-trace", "[approval:exec_a]", true},
		{"a settle cancels",
			engine.StoreJournal{Publish: true, Deadlines: "approval:", Stored: stored},
			engine.JournalWrite{RunID: "run_1", Run: run, Settled: []string{"exec_b"}},
			"", "[approval:exec_b]", true},
		{"a write that neither pauses nor settles carries nothing",
			engine.StoreJournal{Publish: true, Deadlines: "approval:", Stored: stored},
			engine.JournalWrite{RunID: "run_1", Entries: []runstore.JournalEntry{{Seq: 2}}},
			"", "[]", true},
		{"without Deadlines the session writes them (as an older node's journal)",
			engine.StoreJournal{Publish: true, Stored: stored},
			engine.JournalWrite{RunID: "run_1", Run: run, Paused: pause, Settled: []string{"exec_a"}},
			"", "[]", false},
		{"without Publish (sessionless: answered in-band) there is no deadline to carry",
			engine.StoreJournal{Deadlines: "approval:", Stored: stored},
			engine.JournalWrite{RunID: "run_1", Run: run, Paused: pause},
			"", "[]", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := &captureRuns{}
			c.j.Store, c.j.Grain, c.j.Epoch = runs, "session/s1", 3
			if err := c.j.Write(context.Background(), c.w); err != nil {
				t.Fatal(err)
			}
			var set string
			if rs := runs.last.SetReminders; len(rs) == 1 && rs[0].DueAt.Equal(deadline) {
				set = rs[0].Name + "@" + rs[0].Link
			} else if len(rs) != 0 {
				t.Fatalf("set %+v", rs)
			}
			if cancel := fmt.Sprint(runs.last.CancelReminders); set != c.set || cancel != c.cancel || (runs.last.Stored != nil) != c.wantStored {
				t.Fatalf("set %q, cancel %s, told %v; want %q, %s, %v", set, cancel, runs.last.Stored != nil, c.set, c.cancel, c.wantStored)
			}
		})
	}
}
