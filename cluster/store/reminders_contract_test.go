package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

func TestRemindersRegisterListAndReplace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		o, _ := s.Acquire(ctx, "session/a", "n1")
		due := time.UnixMilli(1_700_000_000_000)
		_, err := s.RegisterReminders(ctx, "session/a", o.Epoch, []store.Reminder{
			{Name: "idle", DueAt: due},
			{Name: "expiry", DueAt: due.Add(time.Hour), Period: time.Minute},
		})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.Reminders(ctx, "session/a")
		if err != nil || len(rs) != 2 {
			t.Fatalf("reminders = %+v, %v", rs, err)
		}
		if rs[0].Name != "expiry" || rs[0].Period != time.Minute || !rs[0].DueAt.Equal(due.Add(time.Hour)) || rs[1].Name != "idle" || rs[1].Period != 0 {
			t.Fatalf("unexpected reminders %+v", rs)
		}
		v1 := rs[1].Version
		if _, err := s.RegisterReminders(ctx, "session/a", o.Epoch, []store.Reminder{{Name: "idle", DueAt: due.Add(time.Second)}}); err != nil {
			t.Fatal(err)
		}
		rs, _ = s.Reminders(ctx, "session/a")
		if rs[1].Version <= v1 || !rs[1].DueAt.Equal(due.Add(time.Second)) {
			t.Fatalf("replace: %+v, want a larger version than %d and the new due time", rs[1], v1)
		}
	})
}

func TestReminderWritesAreFencedByEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		old, _ := s.Acquire(ctx, "session/f", "n1")
		cur, _ := s.Acquire(ctx, "session/f", "n2")
		r := []store.Reminder{{Name: "idle", DueAt: time.Now()}}
		if _, err := s.RegisterReminders(ctx, "session/f", old.Epoch, r); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale register: %v, want ErrFenced", err)
		}
		if rs, _ := s.Reminders(ctx, "session/f"); len(rs) != 0 {
			t.Fatalf("stale register wrote %+v", rs)
		}
		if _, err := s.RegisterReminders(ctx, "session/f", cur.Epoch, r); err != nil {
			t.Fatal(err)
		}
		if err := s.CancelReminders(ctx, "session/f", old.Epoch, "idle"); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale cancel: %v, want ErrFenced", err)
		}
		if err := s.CancelReminders(ctx, "session/f", cur.Epoch, "idle", "missing"); err != nil {
			t.Fatal(err)
		}
		if rs, _ := s.Reminders(ctx, "session/f"); len(rs) != 0 {
			t.Fatalf("cancel left %+v", rs)
		}
		if _, err := s.RegisterReminders(ctx, "session/none", 1, r); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("register for a grain never activated: %v, want ErrFenced", err)
		}
	})
}

func TestDueRemindersAndCompletion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		base := time.UnixMilli(1_800_000_000_000)
		for i, g := range []string{"k/a", "k/b", "k/c"} {
			o, _ := s.Acquire(ctx, g, "n")
			if _, err := s.RegisterReminders(ctx, g, o.Epoch, []store.Reminder{{Name: "r", DueAt: base.Add(time.Duration(i) * time.Second)}}); err != nil {
				t.Fatal(err)
			}
		}
		o, _ := s.Acquire(ctx, "k/p", "n")
		_, _ = s.RegisterReminders(ctx, "k/p", o.Epoch, []store.Reminder{{Name: "tick", DueAt: base, Period: time.Minute}})

		due, err := s.DueReminders(ctx, base.Add(time.Second), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 3 || due[len(due)-1].Grain != "k/b" {
			t.Fatalf("due = %+v, want k/a, k/p (at base) then k/b", due)
		}
		if lim, _ := s.DueReminders(ctx, base.Add(time.Hour), 2); len(lim) != 2 {
			t.Fatalf("limit ignored: %d rows", len(lim))
		}
		var a, p store.Reminder
		for _, r := range due {
			switch r.Grain {
			case "k/a":
				a = r
			case "k/p":
				p = r
			}
		}
		// A stale version completes nothing.
		if ok, err := s.CompleteReminder(ctx, "k/a", "r", a.Version-1, time.Time{}); ok || err != nil {
			t.Fatalf("stale completion: %v %v", ok, err)
		}
		if ok, err := s.CompleteReminder(ctx, "k/a", "r", a.Version, time.Time{}); !ok || err != nil {
			t.Fatalf("one-shot completion: %v %v", ok, err)
		}
		if rs, _ := s.Reminders(ctx, "k/a"); len(rs) != 0 {
			t.Fatalf("one-shot reminder still there: %+v", rs)
		}
		next := base.Add(time.Minute)
		if ok, err := s.CompleteReminder(ctx, "k/p", "tick", p.Version, next); !ok || err != nil {
			t.Fatalf("periodic completion: %v %v", ok, err)
		}
		rs, _ := s.Reminders(ctx, "k/p")
		if len(rs) != 1 || !rs[0].DueAt.Equal(next) || rs[0].Version == p.Version {
			t.Fatalf("periodic after completion: %+v", rs)
		}
		// Completing the old version again (a duplicate fire) is a no-op.
		if ok, _ := s.CompleteReminder(ctx, "k/p", "tick", p.Version, next.Add(time.Minute)); ok {
			t.Fatal("duplicate completion advanced the reminder again")
		}
	})
}

// A reminder cancelled and registered again gets a version no in-flight
// completion of the old one can match.
func TestReRegisteredReminderSurvivesStaleCompletion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		o, _ := s.Acquire(ctx, "k/x", "n")
		_, _ = s.RegisterReminders(ctx, "k/x", o.Epoch, []store.Reminder{{Name: "r", DueAt: time.Now()}})
		old, _ := s.Reminders(ctx, "k/x")
		_ = s.CancelReminders(ctx, "k/x", o.Epoch, "r")
		_, _ = s.RegisterReminders(ctx, "k/x", o.Epoch, []store.Reminder{{Name: "r", DueAt: time.Now().Add(time.Hour)}})
		if ok, _ := s.CompleteReminder(ctx, "k/x", "r", old[0].Version, time.Time{}); ok {
			t.Fatal("completion of the cancelled reminder deleted its replacement")
		}
		if rs, _ := s.Reminders(ctx, "k/x"); len(rs) != 1 {
			t.Fatalf("replacement lost: %+v", rs)
		}
	})
}

// A domain's transaction carries a grain's reminders (RemindersIn): set
// and cancelled with its own statements, fenced by the grain's epoch; a
// stale epoch changes nothing and fails the transaction.
func TestRemindersInADomainTransactionAreFencedByEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		old, _ := s.Acquire(ctx, "session/a", "n1")
		due := time.UnixMilli(1_700_000_000_000)
		var stored []store.Reminder
		err := s.DB().Write(ctx, func(ctx context.Context, tx store.Querier) error {
			var err error
			stored, err = store.RemindersIn(ctx, tx, "session/a", old.Epoch, []store.Reminder{{Name: "approval:x", DueAt: due, Link: "00-link"}}, nil, s.DB().Now())
			return err
		})
		if err != nil || len(stored) != 1 || stored[0].Version == 0 || stored[0].Grain != "session/a" || stored[0].Link != "00-link" {
			t.Fatalf("set in a domain write: %+v, %v", stored, err)
		}
		rs, _ := s.Reminders(ctx, "session/a")
		if len(rs) != 1 || rs[0].Version != stored[0].Version || !rs[0].DueAt.Equal(due) || rs[0].Link != "00-link" {
			t.Fatalf("stored %+v, returned %+v", rs, stored)
		}
		cur, _ := s.Acquire(ctx, "session/a", "n2")
		err = s.DB().Write(ctx, func(ctx context.Context, tx store.Querier) error {
			_, err := store.RemindersIn(ctx, tx, "session/a", old.Epoch, []store.Reminder{{Name: "approval:y", DueAt: due}}, []string{"approval:x"}, s.DB().Now())
			return err
		})
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale set and cancel: %v, want ErrFenced", err)
		}
		if rs, _ := s.Reminders(ctx, "session/a"); len(rs) != 1 || rs[0].Name != "approval:x" {
			t.Fatalf("a stale step changed reminders: %+v", rs)
		}
		// A stale cancel alone deletes nothing.
		_ = s.DB().Write(ctx, func(ctx context.Context, tx store.Querier) error {
			_, err := store.RemindersIn(ctx, tx, "session/a", old.Epoch, nil, []string{"approval:x"}, s.DB().Now())
			return err
		})
		if rs, _ := s.Reminders(ctx, "session/a"); len(rs) != 1 {
			t.Fatalf("a stale cancel deleted: %+v", rs)
		}
		err = s.DB().Write(ctx, func(ctx context.Context, tx store.Querier) error {
			_, err := store.RemindersIn(ctx, tx, "session/a", cur.Epoch, nil, []string{"approval:x", "missing"}, s.DB().Now())
			return err
		})
		if rs, _ := s.Reminders(ctx, "session/a"); err != nil || len(rs) != 0 {
			t.Fatalf("cancel at the current epoch: %+v, %v", rs, err)
		}
	})
}
