package session

import (
	"testing"
	"time"
	"unsafe"

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
