package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// A reminder keeps the traceparent of the span that set it (Reminder.Link)
// on every write path: the transaction of a general Writes and, on
// Postgres, the one folded statement of a reminder set alone.
func TestReminderLinkIsStoredOnEveryWritePath(t *testing.T) {
	const link = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		o, err := s.Acquire(ctx, "session/l", "n1")
		if err != nil {
			t.Fatal(err)
		}
		due := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
		for _, w := range []store.Writes{
			{SetReminders: []store.Reminder{{Name: "alone", DueAt: due, Link: link}}},                            // folded on Postgres
			{Record: []byte("r"), SetReminders: []store.Reminder{{Name: "with-record", DueAt: due, Link: link}}}, // a transaction
		} {
			stored, err := s.Apply(ctx, "session/l", o.Epoch, w)
			if err != nil || len(stored) != 1 || stored[0].Link != link {
				t.Fatalf("apply %s: %+v %v", w.SetReminders[0].Name, stored, err)
			}
		}
		rs, err := s.Reminders(ctx, "session/l")
		if err != nil || len(rs) != 2 {
			t.Fatalf("reminders: %+v %v", rs, err)
		}
		for _, r := range rs {
			if r.Link != link {
				t.Errorf("reminder %s stored link %q, want %q", r.Name, r.Link, link)
			}
		}
	})
}
