package app

import (
	"context"
	"testing"
	"time"
)

func TestGCPolicyNext(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		at        float64 // seconds after t0
		allocated uint64  // MiB since start
		live      uint64  // MiB
		want      int
	}
	for _, tc := range []struct {
		name  string
		p     GCPolicy
		steps []step
	}{
		{"the first reading is busy", GCPolicy{}, []step{{0, 0, 500, 400}}},
		{"a burst keeps the raised target", GCPolicy{}, []step{
			{0, 0, 500, 400}, {1, 200, 500, 400}, {2, 400, 500, 400}, {3, 600, 500, 400}}},
		{"quiet, but not for Settle yet: still raised", GCPolicy{}, []step{
			{0, 0, 500, 400}, {1, 1, 500, 400}, {5, 2, 500, 400}}},
		{"quiet for Settle: lowered to keep the headroom, within Quiet", GCPolicy{}, []step{
			{0, 0, 500, 400}, {1, 1, 500, 400}, {6, 2, 500, 25}, {7, 2, 128, 50}}},
		{"a small heap keeps the raised target while quiet", GCPolicy{}, []step{
			{0, 0, 10, 400}, {1, 1, 10, 400}, {7, 1, 10, 400}}},
		{"a burst after quiet raises it at once, and restarts Settle", GCPolicy{}, []step{
			{0, 0, 500, 400}, {1, 0, 500, 400}, {7, 0, 500, 25}, {8, 100, 500, 400}, {9, 100, 500, 400}, {13, 100, 500, 400}, {14, 100, 500, 25}}},
		{"the rate, not the amount: 16 MiB over 2 s is quiet", GCPolicy{}, []step{
			{0, 0, 500, 400}, {2, 16, 500, 400}, {8, 32, 500, 25}}},
		{"16 MiB in 1 s is busy", GCPolicy{}, []step{
			{0, 0, 500, 400}, {1, 1, 500, 400}, {7, 2, 500, 25}, {8, 18, 500, 400}}},
		{"a reading at the same instant changes nothing but counts as busy", GCPolicy{}, []step{
			{0, 0, 500, 400}, {0, 0, 500, 400}}},
		{"a counter that went back (a bad reading) is busy", GCPolicy{}, []step{
			{0, 100, 500, 400}, {6, 50, 500, 400}}},
		{"no live heap read yet: raised", GCPolicy{}, []step{
			{0, 0, 0, 400}, {6, 0, 0, 400}}},
		{"a policy of its own", GCPolicy{Busy: 200, Quiet: 50, BusyRate: 1 << 20, Headroom: 1, Settle: time.Second}, []step{
			{0, 0, 100, 200}, {1, 2, 100, 200}, {2, 2, 100, 200}, {3, 2, 100, 50}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s GCState
			prev := 0
			for i, st := range tc.steps {
				var got GCDecision
				s, got = tc.p.Next(s, GCReading{At: at(st.at), Allocated: st.allocated * mib, Live: st.live * mib})
				busy := max(tc.p.Busy, 0)
				if busy == 0 {
					busy = DefaultGCPercent
				}
				// The heap is released once, when the target first drops
				// below the busy one after a busy spell.
				wantRelease := st.want < busy && (prev == 0 || prev == busy)
				if got.Percent != st.want || got.Release != wantRelease {
					t.Fatalf("step %d (%+v): %+v, want target %d, release %v", i, st, got, st.want, wantRelease)
				}
				prev = got.Percent
			}
		})
	}
}

// TestRunGCPolicySetsOnChange drives the loop with its own ticks and
// readings: it sets the target at the start and whenever the decision
// changes, and returns when its context ends.
func TestRunGCPolicySetsOnChange(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	readings := []GCReading{
		{At: t0, Live: 500 << 20},
		{At: t0.Add(time.Second), Live: 500 << 20},
		{At: t0.Add(6 * time.Second), Live: 500 << 20},
		{At: t0.Add(7 * time.Second), Live: 500 << 20},
		{At: t0.Add(8 * time.Second), Allocated: 1 << 30, Live: 500 << 20},
	}
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time)
	var set []int
	released := 0
	i := 0
	read := func() GCReading {
		r := readings[i]
		i++
		if i == len(readings) {
			cancel()
		}
		return r
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunGCPolicy(ctx, GCPolicy{}, tick, read, func(p int) { set = append(set, p) }, func() { released++ })
	}()
	for range len(readings) - 1 {
		tick <- time.Time{}
	}
	<-done
	if want := []int{400, 25, 400}; len(set) != len(want) || set[0] != want[0] || set[1] != want[1] || set[2] != want[2] {
		t.Fatalf("set %v, want %v", set, want)
	}
	if released != 1 {
		t.Fatalf("released %d times, want once (when it went quiet)", released)
	}
}
