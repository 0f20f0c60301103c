package session

import (
	"slices"
	"testing"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// The journal's report of stored deadlines disarms the cancelled ones at
// once and leaves a pause's deadline to its lease message, which takes
// it once and arms it then (unless a settling write cancelled it first);
// other reminders' names are not pauses and are armed at once.
func TestDeadlinesStoredAreArmedByTheirLeaseAndTakenOnce(t *testing.T) {
	var armed []string
	h := &hooks{arm: func(set []store.Reminder, cancelled []string) {
		for _, r := range set {
			armed = append(armed, "+"+r.Name)
		}
		for _, n := range cancelled {
			armed = append(armed, "-"+n)
		}
	}}
	h.DeadlinesStored([]store.Reminder{{Name: reminderApproval + "b"}, {Name: reminderApproval + "c"}, {Name: "expiry"}},
		[]string{reminderApproval + "a"})
	if want := []string{"+expiry", "-approval:a"}; !slices.Equal(armed, want) {
		t.Fatalf("armed by the report %v, want %v", armed, want)
	}
	h.DeadlinesStored(nil, []string{reminderApproval + "c"}) // c settled before its lease came
	armed = nil
	for _, c := range []struct {
		kind  LeaseKind
		id    string
		want  bool
		armed string
	}{
		{LeasePaused, "b", true, "+approval:b"}, {LeasePaused, "b", false, ""}, // taken once
		{LeasePaused, "c", true, ""}, // stored, but cancelled since: nothing to arm
		{LeaseSettled, "b", false, ""}, {LeaseSettled, "a", true, ""}, {LeaseSettled, "a", false, ""},
		{LeaseSettled, "c", true, ""},
		{LeasePaused, "expiry", false, ""}, {LeasePaused, "a", false, ""},
	} {
		armed = nil
		if got := h.takeDeadline(c.kind, c.id); got != c.want {
			t.Errorf("take %s %s: %v, want %v", c.kind, c.id, got, c.want)
		}
		if got := armed; (c.armed == "" && len(got) > 0) || (c.armed != "" && !slices.Equal(got, []string{c.armed})) {
			t.Errorf("take %s %s armed %v, want %q", c.kind, c.id, got, c.armed)
		}
	}
}
