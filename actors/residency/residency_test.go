package residency

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// at returns t0 plus ms milliseconds.
func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func always() bool { return true }
func never() bool  { return false }

// reg returns a registry with the given cap and the default grace, with
// the given ids registered (all evictable) at 0, 1, 2, … ms.
func reg(t *testing.T, softCap int, ids ...string) *Registry {
	t.Helper()
	r := New(Config{SoftCap: softCap})
	for i, id := range ids {
		r.Register(Entry{ID: id, CanEvict: always}, at(int64(i)))
	}
	return r
}

func checkCounts(t *testing.T, r *Registry, now time.Time, want Counts) {
	t.Helper()
	got := r.Counts(now)
	if want.SoftCap == 0 {
		want.SoftCap = r.Config().SoftCap // checked by the tests about the cap
	}
	if got != want {
		t.Fatalf("Counts = %+v, want %+v", got, want)
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
		want    Config
	}{
		{"zero means defaults", Config{}, "", Config{SoftCap: 32, EvictionGrace: 15 * time.Second}},
		{"explicit", Config{SoftCap: 1, EvictionGrace: time.Millisecond}, "", Config{SoftCap: 1, EvictionGrace: time.Millisecond}},
		{"negative cap", Config{SoftCap: -1}, "SoftCap", Config{}},
		{"negative grace", Config{EvictionGrace: -time.Second}, "EvictionGrace", Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate() = %v, want an error naming %s", err, tt.wantErr)
				}
				defer func() {
					if recover() == nil {
						t.Fatal("New did not panic on an invalid config")
					}
				}()
				New(tt.cfg)
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if got := New(tt.cfg).Config(); got != tt.want {
				t.Fatalf("Config() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Seed case 26: cap 2 with A (older) and B; C's admission evicts A, B
// survives, and the resident count ends at 2. The peak is the maximum
// actually reached, which depends on whether A's disposal lands before C's
// registration.
func TestAdmitEvictsLeastRecentlyActive(t *testing.T) {
	tests := []struct {
		name            string
		releaseFirst    bool
		wantPeak        int
		wantMidResident int
	}{
		{"A disposed before C lands", true, 2, 1},
		{"C lands before A is disposed", false, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reg(t, 2, "A", "B")
			adm := r.Admit(at(100))
			if !adm.OverCap || adm.Evict != "A" || adm.Overflow || adm.Slot == nil {
				t.Fatalf("Admit = %+v, want OverCap, Evict A", adm)
			}
			checkCounts(t, r, at(100), Counts{Resident: 2, Peak: 2, InFlightBuilds: 1, Evictable: 2, EvictionPending: 1})

			if tt.releaseFirst {
				if !r.Release("A") {
					t.Fatal("Release(A) = false")
				}
				r.Register(Entry{ID: "C", CanEvict: always}, at(101))
			} else {
				r.Register(Entry{ID: "C", CanEvict: always}, at(101))
				if got := r.Counts(at(101)).Resident; got != tt.wantMidResident {
					t.Fatalf("resident before A's disposal = %d, want %d", got, tt.wantMidResident)
				}
				if !r.Release("A") {
					t.Fatal("Release(A) = false")
				}
			}
			adm.Slot.Release()
			checkCounts(t, r, at(102), Counts{Resident: 2, Peak: tt.wantPeak, Evictable: 2})
			if id, ok := r.Pick(at(102)); !ok || id != "B" {
				t.Fatalf("Pick = %q, %v; want B (survived, now the oldest)", id, ok)
			}
		})
	}
}

// Seed case 27: cap 1 with a streaming (pinned) resident: the admission
// overflows, the slot is still reserved, and the build lands (count 2).
func TestAdmitOverflowsWhenNothingIsEvictable(t *testing.T) {
	r := New(Config{SoftCap: 1})
	r.Register(Entry{ID: "streaming", CanEvict: never}, at(0))
	adm := r.Admit(at(10))
	if !adm.OverCap || !adm.Overflow || adm.Evict != "" || adm.Slot == nil {
		t.Fatalf("Admit = %+v, want OverCap+Overflow, no candidate", adm)
	}
	checkCounts(t, r, at(10), Counts{Resident: 1, Peak: 1, InFlightBuilds: 1, Pinned: 1})
	if id, ok := r.Pick(at(10)); ok {
		t.Fatalf("Pick = %q, want none", id)
	}
	r.Register(Entry{ID: "new", CanEvict: always}, at(11))
	adm.Slot.Release()
	checkCounts(t, r, at(11), Counts{Resident: 2, Peak: 2, Evictable: 1, Pinned: 1})
}

// Seed cases 29, 36 and 40: repeated releases decrement once; unknown ids
// are no-ops.
func TestReleaseAndMarkAreIdempotent(t *testing.T) {
	r := reg(t, 2, "A", "B")
	adm := r.Admit(at(10))
	if adm.Evict != "A" {
		t.Fatalf("Evict = %q, want A", adm.Evict)
	}
	if !r.Release("A") {
		t.Fatal("first Release(A) = false")
	}
	for i := 0; i < 3; i++ {
		if r.Release("A") {
			t.Fatal("repeat Release(A) = true")
		}
	}
	r.MarkEvictionRequested("A", at(11)) // evicted candidate: no-op
	r.MarkEvictionRequested("never-registered", at(11))
	r.Touch("A", at(12))
	if r.Release("never-registered") {
		t.Fatal("Release of an unknown id = true")
	}
	adm.Slot.Release()
	checkCounts(t, r, at(12), Counts{Resident: 1, Peak: 2, Evictable: 1})
	if !r.Release("B") || r.Release("B") {
		t.Fatal("Release(B) twice: want true then false")
	}
	checkCounts(t, r, at(12), Counts{Resident: 0, Peak: 2})
}

// Seed case 30: while B's build holds its slot, C's admission counts that
// reservation and evicts A; the in-flight counter is back to 0 after B
// lands.
func TestInFlightReservationCountsTowardsTheCap(t *testing.T) {
	r := reg(t, 2, "A")
	b := r.Admit(at(10))
	if b.OverCap || b.Evict != "" || b.Overflow {
		t.Fatalf("B's Admit = %+v, want under cap (1 resident + 0 in flight < 2)", b)
	}
	c := r.Admit(at(11))
	if !c.OverCap || c.Evict != "A" {
		t.Fatalf("C's Admit = %+v, want OverCap (1 resident + 1 in flight >= 2), Evict A", c)
	}
	checkCounts(t, r, at(11), Counts{Resident: 1, Peak: 1, InFlightBuilds: 2, Evictable: 1, EvictionPending: 1})

	r.Register(Entry{ID: "B", CanEvict: always}, at(12))
	b.Slot.Release()
	r.Release("A")
	r.Register(Entry{ID: "C", CanEvict: always}, at(13))
	c.Slot.Release()
	checkCounts(t, r, at(13), Counts{Resident: 2, Peak: 2, Evictable: 2})
}

// Seed cases 31 and 32: a failed or interrupted build releases its
// reservation exactly once however many exit paths call Release, and a
// later admission under the cap does not evict.
func TestFailedBuildReleasesItsSlotOnce(t *testing.T) {
	r := reg(t, 2, "A")
	failed := r.Admit(at(10))
	other := r.Admit(at(10)) // a second build still in flight
	if other.Evict != "A" {
		t.Fatalf("second Admit Evict = %q, want A (1+1 >= 2)", other.Evict)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ { // error path, deferred release, cancellation…
		wg.Add(1)
		go func() { defer wg.Done(); failed.Slot.Release() }()
	}
	wg.Wait()
	failed.Slot.Release()
	if got := r.Counts(at(11)).InFlightBuilds; got != 1 {
		t.Fatalf("InFlightBuilds = %d, want 1 (only the other build)", got)
	}
	other.Slot.Release()
	other.Slot.Release()
	var nilSlot *Slot
	nilSlot.Release()

	later := r.Admit(at(20))
	if later.OverCap || later.Evict != "" || later.Overflow {
		t.Fatalf("later Admit = %+v, want under cap, no eviction", later)
	}
	later.Slot.Release()
	checkCounts(t, r, at(20), Counts{Resident: 1, Peak: 1, Evictable: 1, EvictionPending: 1})
}

// Seed cases 37, 38 and 39: an entry asked to evict (whether the request
// failed or the candidate declined) stays registered and is skipped for the
// next LRU entry until the grace window ends. Per executor, an entry is
// skipped while now - requestedAt < grace, so it is eligible again exactly
// at requestedAt + grace.
func TestEvictionGraceWindow(t *testing.T) {
	const grace = 15_000
	tests := []struct {
		name    string
		pickAt  int64 // ms after the request
		want    string
		pending int
	}{
		{"same instant", 0, "B", 1},
		{"just inside the window", grace - 1, "B", 1},
		{"exactly at the grace boundary", grace, "A", 0},
		{"grace + 1ms", grace + 1, "A", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reg(t, 2, "A", "B", "C")
			const requestedAt = 1_000
			adm := r.Admit(at(requestedAt))
			if adm.Evict != "A" {
				t.Fatalf("Evict = %q, want A", adm.Evict)
			}
			// The request fails or A declines: A stays registered.
			now := at(requestedAt + tt.pickAt)
			if id, ok := r.Pick(now); !ok || id != tt.want {
				t.Fatalf("Pick = %q, %v; want %s", id, ok, tt.want)
			}
			c := r.Counts(now)
			if c.Resident != 3 || c.EvictionPending != tt.pending {
				t.Fatalf("Counts = %+v, want Resident 3, EvictionPending %d", c, tt.pending)
			}
		})
	}
}

// Consecutive over-cap admissions ask different candidates, because Admit
// marks the one it returns.
func TestConsecutiveAdmissionsPickDifferentCandidates(t *testing.T) {
	r := reg(t, 2, "A", "B")
	var got []string
	for i := 0; i < 3; i++ {
		got = append(got, r.Admit(at(100)).Evict)
	}
	if want := []string{"A", "B", ""}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("candidates = %q, want %q", got, want)
	}
	// Asked through Pick + MarkEvictionRequested instead.
	r = reg(t, 2, "A", "B")
	id, _ := r.Pick(at(100))
	r.MarkEvictionRequested(id, at(100))
	if id2, _ := r.Pick(at(100)); id != "A" || id2 != "B" {
		t.Fatalf("Pick, mark, Pick = %q, %q; want A, B", id, id2)
	}
}

func TestPickOrder(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *Registry)
		want  string // "" means none
	}{
		{"empty registry", func(r *Registry) {}, ""},
		{"oldest activity wins", func(r *Registry) {
			r.Register(Entry{ID: "new", CanEvict: always}, at(50))
			r.Register(Entry{ID: "old", CanEvict: always}, at(10))
		}, "old"},
		{"touch makes an entry recent", func(r *Registry) {
			r.Register(Entry{ID: "A", CanEvict: always}, at(0))
			r.Register(Entry{ID: "B", CanEvict: always}, at(1))
			r.Touch("A", at(5))
		}, "B"},
		{"touch never moves activity backwards", func(r *Registry) {
			r.Register(Entry{ID: "A", CanEvict: always}, at(10))
			r.Register(Entry{ID: "B", CanEvict: always}, at(5))
			r.Touch("A", at(1))
		}, "B"},
		{"ties go to the earliest registered", func(r *Registry) {
			for _, id := range []string{"x", "y", "z", "w"} {
				r.Register(Entry{ID: id, CanEvict: always}, at(7))
			}
		}, "x"},
		{"pinned entries are skipped", func(r *Registry) {
			r.Register(Entry{ID: "streaming", CanEvict: never}, at(0))
			r.Register(Entry{ID: "paused", CanEvict: never}, at(1))
			r.Register(Entry{ID: "idle", CanEvict: always}, at(2))
		}, "idle"},
		{"all pinned", func(r *Registry) {
			r.Register(Entry{ID: "streaming", CanEvict: never}, at(0))
		}, ""},
		{"nil CanEvict means evictable", func(r *Registry) {
			r.Register(Entry{ID: "plain"}, at(0))
		}, "plain"},
		{"panicking CanEvict counts as pinned", func(r *Registry) {
			r.Register(Entry{ID: "boom", CanEvict: func() bool { panic("engine gone") }}, at(0))
			r.Register(Entry{ID: "ok", CanEvict: always}, at(1))
		}, "ok"},
		{"released entries are gone", func(r *Registry) {
			r.Register(Entry{ID: "A", CanEvict: always}, at(0))
			r.Register(Entry{ID: "B", CanEvict: always}, at(1))
			r.Release("A")
		}, "B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{})
			tt.setup(r)
			id, ok := r.Pick(at(100))
			if ok != (tt.want != "") || id != tt.want {
				t.Fatalf("Pick = %q, %v; want %q", id, ok, tt.want)
			}
		})
	}
}

// The prefilter reflects live state: a runtime that opens a stream becomes
// pinned without re-registering.
func TestCanEvictIsEvaluatedAtPickTime(t *testing.T) {
	var streams atomic.Int32
	r := New(Config{SoftCap: 1})
	r.Register(Entry{ID: "A", CanEvict: func() bool { return streams.Load() == 0 }}, at(0))
	streams.Add(1)
	if adm := r.Admit(at(1)); !adm.Overflow {
		t.Fatalf("Admit with A streaming = %+v, want Overflow", adm)
	}
	streams.Add(-1)
	if adm := r.Admit(at(2)); adm.Evict != "A" {
		t.Fatalf("Admit with A idle = %+v, want Evict A", adm)
	}
}

func TestCanEvictPanicsAreRecoveredAndCounted(t *testing.T) {
	r := New(Config{SoftCap: 1})
	r.Register(Entry{ID: "value", CanEvict: func() bool { panic("boom") }}, at(0))
	r.Register(Entry{ID: "nil", CanEvict: func() bool { panic(nil) }}, at(1))
	r.Register(Entry{ID: "error", CanEvict: func() bool { panic(errors.New("engine closed")) }}, at(2))
	adm := r.Admit(at(3))
	if !adm.Overflow || adm.Evict != "" {
		t.Fatalf("Admit = %+v, want Overflow (all panicking entries are pinned)", adm)
	}
	c := r.Counts(at(3))
	if c.Pinned != 3 || c.Evictable != 0 || c.CanEvictPanics != 6 {
		t.Fatalf("Counts = %+v, want Pinned 3, Evictable 0, CanEvictPanics 6 (3 in Admit + 3 in Counts)", c)
	}
	// The registry still works after the panics (the lock was released).
	r.Register(Entry{ID: "fine", CanEvict: always}, at(4))
	if id, ok := r.Pick(at(5)); !ok || id != "fine" {
		t.Fatalf("Pick = %q, %v; want fine", id, ok)
	}
}

func TestCounts(t *testing.T) {
	r := New(Config{SoftCap: 10, EvictionGrace: time.Second})
	r.Register(Entry{ID: "idle1", CanEvict: always}, at(0))
	r.Register(Entry{ID: "idle2"}, at(1))
	r.Register(Entry{ID: "stream", CanEvict: never}, at(2))
	r.Register(Entry{ID: "paused", CanEvict: never}, at(3))
	r.MarkEvictionRequested("idle1", at(100))   // pending and evictable
	r.MarkEvictionRequested("stream", at(100))  // pending and pinned (declined)
	r.MarkEvictionRequested("idle2", at(-5000)) // grace long over
	s1 := r.Admit(at(100))
	_ = r.Admit(at(100)) // still in flight
	s1.Slot.Release()

	want := Counts{Resident: 4, Peak: 4, InFlightBuilds: 1, Evictable: 2, Pinned: 2, EvictionPending: 2}
	checkCounts(t, r, at(100), want)
	if c := r.Counts(at(100)); c.Evictable+c.Pinned != c.Resident {
		t.Fatalf("Evictable + Pinned = %d, want Resident %d", c.Evictable+c.Pinned, c.Resident)
	}
	want.EvictionPending = 0
	checkCounts(t, r, at(1100), want)
}

// Registering an id twice replaces the entry: no double count, a fresh
// CanEvict and activity, and no pending eviction request.
func TestRegisterReplacesWithoutDoubleCounting(t *testing.T) {
	r := New(Config{SoftCap: 1})
	r.Register(Entry{ID: "A", CanEvict: always}, at(0))
	r.Register(Entry{ID: "B", CanEvict: always}, at(1))
	r.MarkEvictionRequested("A", at(2))
	r.Register(Entry{ID: "A", CanEvict: never}, at(3))
	checkCounts(t, r, at(3), Counts{Resident: 2, Peak: 2, Evictable: 1, Pinned: 1})
	r.Register(Entry{ID: "A", CanEvict: always}, at(4))
	if id, _ := r.Pick(at(4)); id != "B" {
		t.Fatalf("Pick = %q, want B (A's activity was refreshed)", id)
	}
	if !r.Release("A") || r.Release("A") {
		t.Fatal("Release(A) twice: want true then false")
	}
	checkCounts(t, r, at(4), Counts{Resident: 1, Peak: 2, Evictable: 1})
}

func TestRegisterEmptyIDPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Register with an empty ID did not panic")
		}
	}()
	New(Config{}).Register(Entry{}, at(0))
}

func TestPickDoesNotAllocate(t *testing.T) {
	r := New(Config{})
	for i := 0; i < 300; i++ {
		r.Register(Entry{ID: fmt.Sprint("s", i), CanEvict: func() bool { return i%3 != 0 }}, at(int64(i)))
	}
	if n := testing.AllocsPerRun(100, func() { r.Pick(at(1000)) }); n != 0 {
		t.Fatalf("Pick allocates %v times per call, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { r.Counts(at(1000)) }); n != 0 {
		t.Fatalf("Counts allocates %v times per call, want 0", n)
	}
}

// Many grains on one node admit, build, fail, register, touch, evict each
// other and dispose concurrently. Run with -race.
func TestConcurrentUse(t *testing.T) {
	const (
		grains = 16
		rounds = 200
	)
	r := New(Config{SoftCap: 8, EvictionGrace: 20 * time.Millisecond})
	var clock atomic.Int64
	now := func() time.Time { return at(clock.Add(1)) }

	var registers, releases, asked, overflows atomic.Int64
	evictions := make(chan string, grains*rounds)
	stop := make(chan struct{})
	var monitor sync.WaitGroup
	monitor.Add(1)
	go func() { // invariants hold at every observable point
		defer monitor.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
			c := r.Counts(now())
			if c.Resident < 0 || c.InFlightBuilds < 0 || c.InFlightBuilds > grains ||
				c.Evictable+c.Pinned != c.Resident || c.Peak < c.Resident ||
				c.EvictionPending > c.Resident {
				t.Errorf("invariant broken: %+v", c)
				return
			}
		}
	}()
	var evicter sync.WaitGroup
	evicter.Add(1)
	go func() { // the candidates "handle" their eviction requests
		defer evicter.Done()
		for id := range evictions {
			if r.Release(id) {
				releases.Add(1)
			}
		}
	}()

	var wg sync.WaitGroup
	for g := 0; g < grains; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			var mine []string
			for i := 0; i < rounds; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				adm := r.Admit(now())
				if adm.Evict != "" {
					asked.Add(1)
					evictions <- adm.Evict
				}
				if adm.Overflow {
					overflows.Add(1)
				}
				if rng.IntN(4) == 0 { // build failed
					adm.Slot.Release()
					adm.Slot.Release()
					continue
				}
				var streams atomic.Int32
				streams.Store(int32(min(rng.IntN(4), 1))) // 3/4 pinned
				r.Register(Entry{ID: id, CanEvict: func() bool { return streams.Load() == 0 }}, now())
				registers.Add(1)
				adm.Slot.Release()
				mine = append(mine, id)
				r.Touch(mine[rng.IntN(len(mine))], now())
				r.Pick(now())
				if rng.IntN(3) == 0 { // idle disposal, twice
					victim := mine[rng.IntN(len(mine))]
					for k := 0; k < 2; k++ {
						if r.Release(victim) {
							releases.Add(1)
						}
					}
				}
			}
			for _, id := range mine { // shutdown
				if r.Release(id) {
					releases.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(evictions)
	evicter.Wait()
	close(stop)
	monitor.Wait()

	c := r.Counts(now())
	if c.Resident != 0 || c.InFlightBuilds != 0 || c.Evictable != 0 || c.Pinned != 0 {
		t.Fatalf("after shutdown Counts = %+v, want empty", c)
	}
	if registers.Load() != releases.Load() {
		t.Fatalf("%d registers but %d successful releases: double or missed decrement", registers.Load(), releases.Load())
	}
	if asked.Load() == 0 {
		t.Fatal("no eviction requests: the test did not exercise the over-cap path")
	}
	t.Logf("%d registers, %d eviction requests, %d overflows, peak %d", registers.Load(), asked.Load(), overflows.Load(), c.Peak)
	if c.Peak < 1 || c.Peak > grains*rounds {
		t.Fatalf("Peak = %d out of range", c.Peak)
	}
}

func BenchmarkAdmitOverCap(b *testing.B) {
	r := New(Config{SoftCap: 1})
	for i := 0; i < 300; i++ {
		r.Register(Entry{ID: fmt.Sprint("s", i), CanEvict: always}, at(int64(i)))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Past the grace window every time, so a candidate is always found.
		r.Admit(at(int64(i) * 20_000)).Slot.Release()
	}
}

// A scrape walking the entries does not hold up the builds: while Counts is
// inside an entry's CanEvict (blocked on a channel here, a starved core at
// 250,000 runtimes in production), Admit, Register, Touch and Release
// complete, and the counts are those of the snapshot Counts took.
func TestCountsDoesNotBlockAdmissions(t *testing.T) {
	r := New(Config{SoftCap: 1000})
	entered, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slow := func() bool {
		once.Do(func() { close(entered); <-unblock })
		return true
	}
	r.Register(Entry{ID: "slow", CanEvict: slow}, at(0))
	for i := range 100 {
		r.Register(Entry{ID: fmt.Sprint("s", i), CanEvict: never}, at(int64(i+1)))
	}
	got := make(chan Counts)
	go func() { got <- r.Counts(at(200)) }()
	<-entered

	adm := r.Admit(at(201)) // would wait for the walk if the walk held the lock
	r.Register(Entry{ID: "new", CanEvict: always}, at(202))
	adm.Slot.Release()
	r.Touch("s5", at(203))
	if !r.Release("s7") {
		t.Fatal("Release(s7) = false during the walk")
	}
	close(unblock)
	want := Counts{Resident: 101, Peak: 101, Evictable: 1, Pinned: 100, SoftCap: 1000}
	if c := <-got; c != want {
		t.Fatalf("Counts during the changes = %+v, want the snapshot's %+v", c, want)
	}
	checkCounts(t, r, at(204), Counts{Resident: 101, Peak: 102, Evictable: 2, Pinned: 99})
}

// Registering, replacing and releasing in any order keeps the snapshot
// Counts walks equal to the registered entries (the removal moves the last
// entry into the hole).
func TestCountsFollowsRegisterAndRelease(t *testing.T) {
	r := New(Config{})
	live := map[string]bool{}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 2000 {
		id := fmt.Sprint("s", rng.IntN(50))
		if rng.IntN(3) == 0 {
			if r.Release(id) != live[id] {
				t.Fatalf("step %d: Release(%s) disagrees with the model", i, id)
			}
			delete(live, id)
		} else {
			r.Register(Entry{ID: id, CanEvict: never}, at(int64(i)))
			live[id] = true
		}
		if c := r.Counts(at(int64(i))); c.Resident != len(live) || c.Pinned != len(live) {
			t.Fatalf("step %d: Counts = %+v, want %d resident, all pinned", i, c, len(live))
		}
	}
}
