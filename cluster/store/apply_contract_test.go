package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// A lifecycle step is one Writes: the record and the reminders change
// together, or not at all when the epoch moved on.
func TestApplyWritesRecordAndRemindersTogetherFencedByEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		o, err := s.Acquire(ctx, "session/a", "n1")
		if err != nil {
			t.Fatal(err)
		}
		due := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
		if _, err := s.Apply(ctx, "session/a", o.Epoch, store.Writes{Record: []byte("v1"),
			SetReminders: []store.Reminder{{Name: "expiry", DueAt: due}, {Name: "idle", DueAt: due}}}); err != nil {
			t.Fatal(err)
		}
		stored, err := s.Apply(ctx, "session/a", o.Epoch, store.Writes{Record: []byte("v2"),
			SetReminders: []store.Reminder{{Name: "expiry", DueAt: due.Add(time.Minute)}}, CancelReminders: []string{"idle", "expiry", "missing"}})
		if err != nil || len(stored) != 1 || stored[0].Name != "expiry" || stored[0].Version == 0 {
			t.Fatalf("apply: %+v %v", stored, err)
		}
		rs, _ := s.Reminders(ctx, "session/a")
		if len(rs) != 1 || rs[0].Name != "expiry" || !rs[0].DueAt.Equal(due.Add(time.Minute)) {
			t.Fatalf("reminders after apply: %+v (a name both set and cancelled is set)", rs)
		}
		// A newer activation: the old epoch's Writes change nothing.
		if _, err := s.Acquire(ctx, "session/a", "n2"); err != nil {
			t.Fatal(err)
		}
		_, err = s.Apply(ctx, "session/a", o.Epoch, store.Writes{Record: []byte("stale"), CancelReminders: []string{"expiry"},
			SetReminders: []store.Reminder{{Name: "x", DueAt: due}}})
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale apply: %v, want ErrFenced", err)
		}
		// A record alone (one statement: Postgres runs it without a
		// transaction) is fenced as well, and so is a bare fence check.
		if _, err := s.Apply(ctx, "session/a", o.Epoch, store.Writes{Record: []byte("stale alone")}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale apply of a record alone: %v, want ErrFenced", err)
		}
		if _, err := s.Apply(ctx, "session/a", o.Epoch, store.Writes{}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale empty apply: %v, want ErrFenced", err)
		}
		// Fenced without a record too.
		if _, err := s.Apply(ctx, "session/a", o.Epoch, store.Writes{CancelReminders: []string{"expiry"}}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale apply without record: %v, want ErrFenced", err)
		}
		got, _ := s.Load(ctx, "session/a")
		rs, _ = s.Reminders(ctx, "session/a")
		if string(got.Record) != "v2" || len(rs) != 1 || rs[0].Name != "expiry" {
			t.Fatalf("after stale applies: record %q reminders %+v", got.Record, rs)
		}
		if _, err := s.Apply(ctx, "session/a", got.Epoch, store.Writes{SetReminders: []store.Reminder{{Name: ""}}}); err == nil {
			t.Fatal("a reminder without a name was accepted")
		}
		// The last step of an activation releases the ownership with it.
		if _, err := s.Apply(ctx, "session/a", got.Epoch, store.Writes{Record: []byte("v3"), Release: true}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Load(ctx, "session/a"); got.Owner != "" || string(got.Record) != "v3" {
			t.Fatalf("after a releasing apply: %+v", got)
		}
	})
}

// Create writes a grain into existence with its first state in one
// transaction; a grain another activation created is fenced, unchanged.
func TestCreateOwnsAndWritesInOneStepOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		due := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
		o, rs, err := s.Create(ctx, "session/new", "n1", store.Writes{Record: []byte("born"), SetReminders: []store.Reminder{{Name: "expiry", DueAt: due}}})
		if err != nil || o.Epoch != 1 || o.Owner != "n1" || string(o.Record) != "born" || len(rs) != 1 {
			t.Fatalf("create: %+v %+v %v", o, rs, err)
		}
		_, _, err = s.Create(ctx, "session/new", "n2", store.Writes{Record: []byte("twin"), SetReminders: []store.Reminder{{Name: "other", DueAt: due}}})
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("second create: %v, want ErrFenced", err)
		}
		got, _ := s.Load(ctx, "session/new")
		all, _ := s.Reminders(ctx, "session/new")
		if got.Epoch != 1 || got.Owner != "n1" || string(got.Record) != "born" || len(all) != 1 {
			t.Fatalf("after the refused create: %+v %+v (nothing may change, not even the epoch)", got, all)
		}
		if all[0].Version != rs[0].Version || !all[0].DueAt.Equal(rs[0].DueAt) || rs[0].Grain != "session/new" {
			t.Fatalf("the created reminder: returned %+v, stored %+v", rs[0], all[0])
		}
		// A row without a record (ownership taken, never written) is
		// created over, at a new epoch.
		if _, err := s.Acquire(ctx, "session/owned", "n1"); err != nil {
			t.Fatal(err)
		}
		o, _, err = s.Create(ctx, "session/owned", "n2", store.Writes{Record: []byte("r")})
		if err != nil || o.Epoch != 2 || o.Owner != "n2" {
			t.Fatalf("create over an unwritten row: %+v %v", o, err)
		}
	})
}

// SQLite commits concurrent writes together: one fenced write among many
// is rolled back alone; every other write is durable.
func TestConcurrentWritesCommitTogetherAndFailAlone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, dsn string) {
		ctx := context.Background()
		const n = 64
		epochs := make([]uint64, n)
		for i := range n {
			o, err := s.Acquire(ctx, fmt.Sprintf("probe/g%d", i), "n1")
			if err != nil {
				t.Fatal(err)
			}
			epochs[i] = o.Epoch
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				epoch := epochs[i]
				if i%8 == 0 {
					epoch++ // stale: fenced
				}
				_, errs[i] = s.Apply(ctx, fmt.Sprintf("probe/g%d", i), epoch, store.Writes{Record: []byte(fmt.Sprint(i)),
					SetReminders: []store.Reminder{{Name: "r", DueAt: time.Now().Add(time.Hour)}}})
			}()
		}
		wg.Wait()
		reopened := s
		if filepath.Ext(dsn) == ".db" {
			reopened = open(t, dsn) // what is durable, through another handle
		}
		for i := range n {
			got, err := reopened.Load(ctx, fmt.Sprintf("probe/g%d", i))
			rs, _ := reopened.Reminders(ctx, fmt.Sprintf("probe/g%d", i))
			switch {
			case i%8 == 0 && (!errors.Is(errs[i], store.ErrFenced) || got.Record != nil || len(rs) != 0):
				t.Fatalf("stale write %d: %v, record %q, %d reminders", i, errs[i], got.Record, len(rs))
			case i%8 != 0 && (errs[i] != nil || err != nil || string(got.Record) != fmt.Sprint(i) || len(rs) != 1):
				t.Fatalf("write %d: %v / %v, record %q, %d reminders", i, errs[i], err, got.Record, len(rs))
			}
		}
	})
}

// Each shape of a row-only Writes (record, release, both, neither) is one
// fenced statement: a stale epoch changes nothing, the current one
// applies.
func TestApplyRowOnlyWritesAreFenced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		old, err := s.Acquire(ctx, "session/row", "n1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, "session/row", old.Epoch, store.Writes{Record: []byte("v1")}); err != nil {
			t.Fatal(err)
		}
		cur, err := s.Acquire(ctx, "session/row", "n2")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []store.Writes{{Record: []byte("stale")}, {Release: true}, {Record: []byte("stale"), Release: true}, {}} {
			if _, err := s.Apply(ctx, "session/row", old.Epoch, w); !errors.Is(err, store.ErrFenced) {
				t.Fatalf("stale %+v: %v, want ErrFenced", w, err)
			}
		}
		if got, _ := s.Load(ctx, "session/row"); got.Owner != "n2" || string(got.Record) != "v1" || got.Epoch != cur.Epoch {
			t.Fatalf("after stale row writes: %+v", got)
		}
		if _, err := s.Apply(ctx, "session/row", cur.Epoch, store.Writes{}); err != nil {
			t.Fatalf("empty writes at the current epoch: %v", err)
		}
		if _, err := s.Apply(ctx, "session/row", cur.Epoch, store.Writes{Release: true}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Load(ctx, "session/row"); got.Owner != "" || string(got.Record) != "v1" {
			t.Fatalf("after a release: %+v", got)
		}
	})
}

// A session's end — its tombstone record, one reminder kept (the purge),
// every other cancelled, the release — is one step (one statement on
// Postgres): all of it at the current epoch, none of it at a stale one.
func TestApplyEndKeepsOneReminderFencedByEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		old, _ := s.Acquire(ctx, "session/end", "n1")
		due := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
		if _, err := s.Apply(ctx, "session/end", old.Epoch, store.Writes{SetReminders: []store.Reminder{{Name: "a", DueAt: due}, {Name: "expiry", DueAt: due}}}); err != nil {
			t.Fatal(err)
		}
		cur, _ := s.Acquire(ctx, "session/end", "n2")
		end := func(epoch uint64, release bool) ([]store.Reminder, error) {
			return s.Apply(ctx, "session/end", epoch, store.Writes{Record: []byte("tomb"), SetReminders: []store.Reminder{{Name: "expiry", DueAt: due.Add(time.Hour)}},
				CancelOtherReminders: true, Release: release})
		}
		if _, err := end(old.Epoch, true); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale end: %v, want ErrFenced", err)
		}
		if got, _ := s.Load(ctx, "session/end"); got.Record != nil || got.Owner != "n2" {
			t.Fatalf("a stale end changed the row: %+v", got)
		}
		if rs, _ := s.Reminders(ctx, "session/end"); len(rs) != 2 {
			t.Fatalf("a stale end changed the reminders: %+v", rs)
		}
		stored, err := end(cur.Epoch, false)
		got, _ := s.Load(ctx, "session/end")
		rs, _ := s.Reminders(ctx, "session/end")
		if err != nil || string(got.Record) != "tomb" || got.Owner != "n2" || len(rs) != 1 || rs[0].Name != "expiry" ||
			!rs[0].DueAt.Equal(due.Add(time.Hour)) || len(stored) != 1 || stored[0].Version != rs[0].Version {
			t.Fatalf("end without release: %v, row %+v, reminders %+v, returned %+v", err, got, rs, stored)
		}
		if _, err := end(cur.Epoch, true); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Load(ctx, "session/end"); got.Owner != "" || got.Epoch != cur.Epoch {
			t.Fatalf("end with release: %+v", got)
		}
	})
}

// CancelOtherReminders keeps exactly the reminders the Writes set, however
// many.
func TestApplyCancelOtherRemindersKeepsTheSetOnes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		o, err := s.Acquire(ctx, "session/end", "n1")
		if err != nil {
			t.Fatal(err)
		}
		due := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
		var set []store.Reminder
		for _, n := range []string{"a", "b", "c", "d"} {
			set = append(set, store.Reminder{Name: n, DueAt: due})
		}
		if _, err := s.Apply(ctx, "session/end", o.Epoch, store.Writes{SetReminders: set}); err != nil {
			t.Fatal(err)
		}
		keep := []store.Reminder{{Name: "b", DueAt: due}, {Name: "e", DueAt: due}}
		if _, err := s.Apply(ctx, "session/end", o.Epoch, store.Writes{SetReminders: keep, CancelOtherReminders: true}); err != nil {
			t.Fatal(err)
		}
		rs, _ := s.Reminders(ctx, "session/end")
		if len(rs) != 2 || rs[0].Name != "b" || rs[1].Name != "e" {
			t.Fatalf("reminders: %+v, want b and e", rs)
		}
		if _, err := s.Apply(ctx, "session/end", o.Epoch, store.Writes{CancelOtherReminders: true}); err != nil {
			t.Fatal(err)
		}
		if rs, _ := s.Reminders(ctx, "session/end"); len(rs) != 0 {
			t.Fatalf("reminders after cancelling all: %+v", rs)
		}
	})
}

// Create without a record takes the ownership and leaves the record
// unset; with Release it owns nothing after, at the new epoch.
func TestCreateWithoutRecordAndReleasing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		o, _, err := s.Create(ctx, "probe/bare", "n1", store.Writes{})
		if err != nil || o.Epoch != 1 || o.Record != nil {
			t.Fatalf("create without record: %+v %v", o, err)
		}
		if got, _ := s.Load(ctx, "probe/bare"); got.Record != nil || got.Owner != "n1" {
			t.Fatalf("after: %+v", got)
		}
		o, _, err = s.Create(ctx, "probe/released", "n1", store.Writes{Record: []byte("r"), Release: true})
		if err != nil || o.Epoch != 1 {
			t.Fatalf("releasing create: %+v %v", o, err)
		}
		if got, _ := s.Load(ctx, "probe/released"); got.Owner != "" || string(got.Record) != "r" {
			t.Fatalf("after a releasing create: %+v", got)
		}
	})
}

// Concurrent creates of one grain: exactly one wins, at epoch 1, with its
// record and reminders; every other is fenced and changed nothing.
func TestConcurrentCreatesOneWins(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		const n = 16
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, _, errs[i] = s.Create(ctx, "session/race", fmt.Sprintf("n%d", i), store.Writes{Record: []byte(fmt.Sprint(i)),
					SetReminders: []store.Reminder{{Name: fmt.Sprintf("r%d", i), DueAt: time.Now().Add(time.Hour)}}})
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("creates %d and %d both succeeded", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, store.ErrFenced):
				t.Fatalf("create %d: %v, want nil or ErrFenced", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no create succeeded")
		}
		got, _ := s.Load(ctx, "session/race")
		rs, _ := s.Reminders(ctx, "session/race")
		if got.Epoch != 1 || got.Owner != fmt.Sprintf("n%d", winner) || string(got.Record) != fmt.Sprint(winner) ||
			len(rs) != 1 || rs[0].Name != fmt.Sprintf("r%d", winner) {
			t.Fatalf("after the race (winner %d): %+v, reminders %+v", winner, got, rs)
		}
	})
}

// The reminder-only Writes (one reminder set; reminders cancelled by name),
// one statement each on Postgres: fenced by the epoch like every write,
// versions growing, a missing name no error.
func TestApplyReminderOnlyWritesAreFenced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		old, err := s.Acquire(ctx, "session/rem", "n1")
		if err != nil {
			t.Fatal(err)
		}
		due := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
		set := func(epoch uint64, name string) ([]store.Reminder, error) {
			return s.Apply(ctx, "session/rem", epoch, store.Writes{SetReminders: []store.Reminder{{Name: name, DueAt: due, Period: time.Minute}}})
		}
		first, err := set(old.Epoch, "deadline")
		if err != nil || len(first) != 1 || first[0].Version == 0 || first[0].Name != "deadline" || !first[0].DueAt.Equal(due) || first[0].Period != time.Minute {
			t.Fatalf("set: %+v %v", first, err)
		}
		again, err := set(old.Epoch, "deadline")
		if err != nil || len(again) != 1 || again[0].Version <= first[0].Version {
			t.Fatalf("set again: %+v %v (the version must grow past %d)", again, err, first[0].Version)
		}
		if _, err := s.Apply(ctx, "session/rem", old.Epoch, store.Writes{CancelReminders: []string{"missing"}}); err != nil {
			t.Fatalf("cancelling a missing name: %v", err)
		}
		cur, err := s.Acquire(ctx, "session/rem", "n2")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := set(old.Epoch, "stale"); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale set: %v, want ErrFenced", err)
		}
		if _, err := s.Apply(ctx, "session/rem", old.Epoch, store.Writes{CancelReminders: []string{"deadline"}}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale cancel: %v, want ErrFenced", err)
		}
		if rs, _ := s.Reminders(ctx, "session/rem"); len(rs) != 1 || rs[0].Name != "deadline" || rs[0].Version != again[0].Version {
			t.Fatalf("after stale writes: %+v", rs)
		}
		if _, err := s.Apply(ctx, "session/rem", cur.Epoch, store.Writes{CancelReminders: []string{"deadline", "missing"}}); err != nil {
			t.Fatal(err)
		}
		if rs, _ := s.Reminders(ctx, "session/rem"); len(rs) != 0 {
			t.Fatalf("after cancelling: %+v", rs)
		}
		if _, err := s.Apply(ctx, "session/none", 1, store.Writes{SetReminders: []store.Reminder{{Name: "x", DueAt: due}}}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("set on a grain without a row: %v, want ErrFenced", err)
		}
	})
}

// A step's domain statements (Writes.Also) commit with the grain's own
// writes, fenced by the same epoch, or not at all: whatever shape the rest
// of the step has (a record alone and one reminder set are single
// statements on Postgres otherwise; a record and one statement are one
// statement there).
func TestApplyAlsoCommitsDomainStatementsWithTheStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		if _, err := s.Acquire(ctx, "side/b", "n1"); err != nil {
			t.Fatal(err)
		}
		mark := func(v string) store.Stmt {
			return store.Stmt{SQL: `UPDATE grains SET record = $3 WHERE grain = 'side/b' AND EXISTS (SELECT 1 FROM f)`, Args: []any{[]byte(v)}}
		}
		side := func() string { o, _ := s.Load(ctx, "side/b"); return string(o.Record) }
		o, _, err := s.Create(ctx, "session/a", "n1", store.Writes{Record: []byte("v0"), Also: []store.Stmt{mark("created")}})
		if err != nil || side() != "created" {
			t.Fatalf("create with Also: %v, side row %q", err, side())
		}
		due := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
		for i, w := range []store.Writes{
			{Record: []byte("v1")},
			{SetReminders: []store.Reminder{{Name: "deadline", DueAt: due}}},
			{CancelReminders: []string{"deadline"}},
			{},
			{Record: []byte("v2"), CancelReminders: []string{"x"}},
		} {
			want := fmt.Sprintf("step %d", i)
			w.Also = []store.Stmt{mark(want)}
			if _, err := s.Apply(ctx, "session/a", o.Epoch, w); err != nil || side() != want {
				t.Fatalf("apply %d with Also: %v, side row %q", i, err, side())
			}
		}
		if got, _ := s.Load(ctx, "session/a"); string(got.Record) != "v2" {
			t.Fatalf("record after the steps: %q", got.Record)
		}
		// Also fails (the side row exists): neither the record nor the
		// statements before it are kept.
		failing := store.Stmt{SQL: `INSERT INTO grains (grain, owner_node, epoch, updated_at_ms) SELECT 'side/b', '', 1, 0 FROM f`}
		for _, also := range [][]store.Stmt{{failing}, {mark("half"), failing}} {
			if _, err := s.Apply(ctx, "session/a", o.Epoch, store.Writes{Record: []byte("v3"), Also: also}); err == nil {
				t.Fatal("a failing Also did not fail the step")
			}
			if got, _ := s.Load(ctx, "session/a"); string(got.Record) != "v2" || side() != "step 4" {
				t.Fatalf("after a failing Also: record %q, side row %q", got.Record, side())
			}
		}
		// A newer activation: the stale step's domain statements do not run.
		if _, err := s.Acquire(ctx, "session/a", "n2"); err != nil {
			t.Fatal(err)
		}
		for _, w := range []store.Writes{{Record: []byte("stale")}, {}, {Record: []byte("stale"), Release: true}} {
			w.Also = []store.Stmt{mark("stale")}
			if _, err := s.Apply(ctx, "session/a", o.Epoch, w); !errors.Is(err, store.ErrFenced) {
				t.Fatalf("stale apply with Also: %v, want ErrFenced", err)
			}
		}
		if got, _ := s.Load(ctx, "session/a"); side() != "step 4" || string(got.Record) != "v2" {
			t.Fatalf("a stale step's Also ran: side row %q, record %q", side(), got.Record)
		}
	})
}
