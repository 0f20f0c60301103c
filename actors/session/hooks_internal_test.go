package session

import (
	"testing"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// The journal's report of stored deadlines arms them (the node's
// reminder service) and is taken, once, by the lease message that
// follows; other reminders' names are not pauses.
func TestDeadlinesStoredAreArmedAndTakenOnce(t *testing.T) {
	var armed []string
	h := &hooks{arm: func(set []store.Reminder, cancelled []string) {
		for _, r := range set {
			armed = append(armed, "+"+r.Name)
		}
		for _, n := range cancelled {
			armed = append(armed, "-"+n)
		}
	}}
	h.DeadlinesStored([]store.Reminder{{Name: reminderApproval + "b"}, {Name: "expiry"}}, []string{reminderApproval + "a"})
	if len(armed) != 3 {
		t.Fatalf("armed %v", armed)
	}
	for _, c := range []struct {
		kind LeaseKind
		id   string
		want bool
	}{
		{LeasePaused, "b", true}, {LeasePaused, "b", false}, // taken once
		{LeaseSettled, "b", false}, {LeaseSettled, "a", true}, {LeaseSettled, "a", false},
		{LeasePaused, "expiry", false}, {LeasePaused, "a", false},
	} {
		if got := h.takeDeadline(c.kind, c.id); got != c.want {
			t.Errorf("take %s %s: %v, want %v", c.kind, c.id, got, c.want)
		}
	}
}
