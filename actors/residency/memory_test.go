package residency

import (
	"math"
	"testing"
)

func TestMemoryCap(t *testing.T) {
	const mib = 1 << 20
	budget := Memory{Budget: 1024 * mib}
	for _, tc := range []struct {
		name string
		m    Memory
		s    Sample
		per  uint64
		cap  int
	}{
		{"no budget: no derived cap", Memory{}, Sample{Resident: 100, LiveHeap: 200 * mib}, 4 * mib, 0},
		{"too few resident: the prior", budget, Sample{Resident: 15, LiveHeap: 900 * mib, Baseline: 10 * mib}, 256 << 10, 4096},
		{"measured: heap over baseline per runtime, doubled by GOGC 100", budget,
			Sample{Resident: 100, LiveHeap: 60 * mib, Baseline: 10 * mib}, 1 * mib, 1024},
		{"GOGC 50 grows the heap by half", budget,
			Sample{Resident: 100, LiveHeap: 60 * mib, Baseline: 10 * mib, GOGC: 50}, 768 << 10, 1365},
		{"GOGC 400 without a limit: five times", budget,
			Sample{Resident: 100, LiveHeap: 60 * mib, Baseline: 10 * mib, GOGC: 400}, 2560 << 10, 409},
		{"GOGC 400 under a limit of 1.8 budgets: the limit bounds the growth", budget,
			Sample{Resident: 100, LiveHeap: 60 * mib, Baseline: 10 * mib, GOGC: 400, MemLimit: 1843 * mib}, 943616, 1137},
		{"a limit above the target changes nothing", budget,
			Sample{Resident: 100, LiveHeap: 60 * mib, Baseline: 10 * mib, MemLimit: 8192 * mib}, 1 * mib, 1024},
		{"no limit reads as MaxInt64", budget,
			Sample{Resident: 100, LiveHeap: 60 * mib, Baseline: 10 * mib, GOGC: 400, MemLimit: math.MaxInt64}, 2560 << 10, 409},
		{"a limit below the budget: no growth below one", budget,
			Sample{Resident: 100, LiveHeap: 60 * mib, Baseline: 10 * mib, MemLimit: 100 * mib}, 512 << 10, 2048},
		{"a heap below its baseline is no room", budget,
			Sample{Resident: 100, LiveHeap: 5 * mib, Baseline: 10 * mib}, 32 << 10, 32768},
		{"floor", Memory{Budget: mib}, Sample{Resident: 100, LiveHeap: 1000 * mib}, 20 * mib, 16},
		{"ceiling", Memory{Budget: 1 << 40, Ceiling: 5000}, Sample{Resident: 100, LiveHeap: 10 * mib}, 10 * mib / 100 * 2, 5000},
		{"custom prior and sample", Memory{Budget: 100 * mib, Prior: mib, MinSample: 1000}, Sample{Resident: 999, LiveHeap: 1}, mib, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.PerRuntime(tc.s); got != tc.per {
				t.Errorf("PerRuntime = %d, want %d", got, tc.per)
			}
			if got := tc.m.Cap(tc.s); got != tc.cap {
				t.Errorf("Cap = %d, want %d", got, tc.cap)
			}
		})
	}
}

// A lowered cap makes the next admission ask for an eviction.
func TestSetSoftCapAppliesToLaterAdmissions(t *testing.T) {
	r := New(Config{SoftCap: 10})
	for i, id := range []string{"A", "B", "C"} {
		r.Register(Entry{ID: id, CanEvict: always}, at(int64(i)))
	}
	if a := r.Admit(at(5)); a.OverCap || a.Evict != "" {
		t.Fatalf("under cap 10: %+v", a)
	} else {
		a.Slot.Release()
	}
	r.SetSoftCap(2)
	a := r.Admit(at(6))
	defer a.Slot.Release()
	if !a.OverCap || a.Evict != "A" || r.Counts(at(6)).SoftCap != 2 {
		t.Fatalf("after SetSoftCap(2): %+v, soft cap %d", a, r.Counts(at(6)).SoftCap)
	}
	r.SetSoftCap(0)
	if got := r.Config().SoftCap; got != 1 {
		t.Fatalf("SetSoftCap(0) gave cap %d, want 1", got)
	}
}

// The least recently active entry is found without looking at the others,
// and activity reported out of order keeps the order by time.
func TestPickFollowsActivityOrder(t *testing.T) {
	r := New(Config{SoftCap: 1})
	for i, id := range []string{"A", "B", "C", "D"} {
		r.Register(Entry{ID: id, CanEvict: always}, at(int64(10*i)))
	}
	r.Touch("A", at(100)) // A is now the most recent
	r.Touch("B", at(50))  // out of order: B sits between D (30) and A (100)
	r.Touch("C", at(5))   // older than its own activity: ignored
	var order []string
	for {
		id, ok := r.Pick(at(200))
		if !ok {
			break
		}
		order = append(order, id)
		r.Release(id)
	}
	if got := len(order); got != 4 || order[0] != "C" || order[1] != "D" || order[2] != "B" || order[3] != "A" {
		t.Fatalf("pick order %v, want [C D B A]", order)
	}
}
