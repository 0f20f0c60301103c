package session

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// A soft cap lowered under the resident runtimes is trimmed down to on the
// clock's ticks: perTick a tick, least recently active first, the pinned
// one never asked, one that declines not replaced while its request is in
// its grace window; then the trimmer stops ticking. The evict function
// stands for the eviction request: the candidate disposes itself
// (releases its entry), or declines.
func TestTrimmerEvictsDownToALoweredCap(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewFake(start)
	reg := residency.New(residency.Config{SoftCap: 100})
	for i := range 10 {
		can := func() bool { return true }
		if i == 0 {
			can = func() bool { return false } // s0: an open stream
		}
		reg.Register(residency.Entry{ID: fmt.Sprint("s", i), CanEvict: can}, start.Add(time.Duration(i)*time.Millisecond))
	}
	var asked []string
	tr := &trimmer{reg: reg, clock: clk, interval: time.Second, perTick: 2, evict: func(id string) {
		asked = append(asked, id)
		if id != "s2" { // s2 declines: a request just arrived
			reg.Release(id)
		}
	}}
	if !reg.SetSoftCap(4) {
		t.Fatal("SetSoftCap(4) under 10 resident: not over")
	}
	tr.kick()
	tr.kick() // one tick armed, not two
	if n := clk.Pending(); n != 1 {
		t.Fatalf("%d timers armed after two kicks, want 1", n)
	}
	clk.Advance(time.Second)
	if want := []string{"s1", "s2"}; !slices.Equal(asked, want) {
		t.Fatalf("first tick asked %v, want %v (the least recently active evictable)", asked, want)
	}
	clk.Advance(time.Second)
	clk.Advance(time.Second)
	// Excess 6: s1, s3, s4, s5, s6 went; s2 declined and is still asked.
	if want := []string{"s1", "s2", "s3", "s4", "s5", "s6"}; !slices.Equal(asked, want) {
		t.Fatalf("three ticks asked %v, want %v", asked, want)
	}
	if c := reg.Counts(clk.Now()); c.Resident != 5 {
		t.Fatalf("resident %d after three ticks, want 5 (s2 declined)", c.Resident)
	}
	// Past s2's grace window the excess of one is asked again: s2 first
	// (least recently active), which declines again; while its request is
	// in its window, nobody else is asked.
	clk.Advance(residency.DefaultEvictionGrace)
	if got := asked[6:]; !slices.Equal(got, []string{"s2"}) {
		t.Fatalf("after the grace window asked %v, want [s2]", got)
	}
	// s2 serves the request that made it decline: now the most recently
	// active, it is no longer counted as going, and the next tick asks
	// the least recently active evictable one.
	reg.Touch("s2", clk.Now())
	clk.Advance(time.Second)
	if got := asked[7:]; !slices.Equal(got, []string{"s7"}) {
		t.Fatalf("after s2 got busy asked %v, want [s7]", got)
	}
	if c := reg.Counts(clk.Now()); c.Resident != 4 {
		t.Fatalf("resident %d, want the cap 4", c.Resident)
	}
	clk.Advance(time.Second) // the tick that asked s7 armed one more: it finds the cap met
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers armed at the cap, want 0 (the trimmer idles)", n)
	}
	t.Logf("asked in order: %v", asked)
}
