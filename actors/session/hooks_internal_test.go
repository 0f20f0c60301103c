package session

import (
	"slices"
	"testing"
	"time"
	"unsafe"

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

// A runtime's hooks keep no channel while nobody waits on the grain (a
// resident session paid 96 B for one): the channel that ends the waits
// at disposal is made by the first wait and dropped by the last. A wait
// in progress when the runtime is disposed ends; a wait after it (a
// report, a schedule call) fails at once, and lease hooks go quiet; the
// hooks stay in the 64-byte size class (issue 29).
func TestHooksKeepNoChannelWhileIdle(t *testing.T) {
	if n := unsafe.Sizeof(hooks{}); n > 64 {
		t.Errorf("hooks is %d B, want at most 64", n)
	}
	h := &hooks{}
	c1, ok1 := h.wait()
	c2, ok2 := h.wait()
	if !ok1 || !ok2 || c1 == nil || c1 != c2 {
		t.Fatal("two waits do not share one channel")
	}
	h.done()
	if h.closed == nil {
		t.Fatal("the channel went while a wait holds it")
	}
	h.done()
	if h.closed != nil || h.waiters != 0 {
		t.Fatal("the channel is kept after the last wait")
	}
	if h.isShut() {
		t.Fatal("shut before close")
	}
	c, _ := h.wait()
	h.close()
	select {
	case <-c:
	default:
		t.Fatal("close did not end the wait in progress")
	}
	h.done()
	if _, ok := h.wait(); ok || !h.isShut() {
		t.Fatal("a wait after close did not fail")
	}
	if err := h.report(&stateMsg{}); err != errRuntimeClosed {
		t.Fatalf("report after close: %v", err)
	}
	if r := h.ask(t.Context(), &scheduleMsg{}); r.err != errRuntimeClosed {
		t.Fatalf("schedule call after close: %v", r.err)
	}
	h.Paused("e1", time.Time{}) // quiet: no actor system to send to
}
