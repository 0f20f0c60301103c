package residency_test

import (
	"fmt"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/residency"
)

// A node with a soft cap of 2: the third cold build asks the
// least-recently-active idle runtime to evict itself, skips a streaming one,
// and proceeds without waiting.
func Example() {
	reg := residency.New(residency.Config{SoftCap: 2})
	t0 := time.Unix(0, 0)

	streaming := true
	reg.Register(residency.Entry{ID: "old-streaming", CanEvict: func() bool { return !streaming }}, t0)
	reg.Register(residency.Entry{ID: "idle", CanEvict: func() bool { return true }}, t0.Add(time.Second))

	adm := reg.Admit(t0.Add(2 * time.Second))
	fmt.Println("over cap:", adm.OverCap, "evict:", adm.Evict, "overflow:", adm.Overflow)
	// The caller sends "idle" a RequestCapEviction message; "idle" re-checks
	// itself, disposes its runtime and releases its residency.
	reg.Release("idle")
	// The build succeeds.
	reg.Register(residency.Entry{ID: "new", CanEvict: func() bool { return true }}, t0.Add(3*time.Second))
	adm.Slot.Release()

	c := reg.Counts(t0.Add(3 * time.Second))
	fmt.Printf("resident %d, peak %d, in flight %d, evictable %d, pinned %d\n",
		c.Resident, c.Peak, c.InFlightBuilds, c.Evictable, c.Pinned)
	// Output:
	// over cap: true evict: idle overflow: false
	// resident 2, peak 2, in flight 0, evictable 1, pinned 1
}
