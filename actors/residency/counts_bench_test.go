package residency

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pins is a runtime's state as the session host's CanEvict reads it: a few
// atomics behind a pointer per resident runtime.
type pins struct{ leases, decided, posts, paused, running atomic.Int32 }

func (p *pins) canEvict() bool {
	return p.leases.Load() == 0 && p.decided.Load() == 0 && p.posts.Load() == 0 &&
		p.paused.Load() == 0 && p.running.Load() == 0
}

// manyResident returns a registry with n resident runtimes, one in ten
// pinned and one in a hundred asked to evict.
func manyResident(n int) *Registry {
	r := New(Config{SoftCap: 2 * n})
	for i := range n {
		p := &pins{}
		if i%10 == 0 {
			p.posts.Store(1)
		}
		id := fmt.Sprint("s", i)
		r.Register(Entry{ID: id, CanEvict: p.canEvict}, at(int64(i)))
		if i%100 == 0 {
			r.MarkEvictionRequested(id, at(int64(n)))
		}
	}
	return r
}

// BenchmarkCounts250k is one metrics scrape's counts at 250,000 resident
// runtimes: the whole call.
func BenchmarkCounts250k(b *testing.B) {
	r := manyResident(250_000)
	b.ReportAllocs()
	for b.Loop() {
		r.Counts(at(1))
	}
}

// BenchmarkAdmitDuringCounts250k is a cold build's Admit while another
// goroutine takes the counts of 250,000 resident runtimes in a loop (a
// scrape after another): the slowest Admit and the 99th percentile are what
// a build waits for the registry's lock.
func BenchmarkAdmitDuringCounts250k(b *testing.B) {
	r := manyResident(250_000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				r.Counts(at(1))
			}
		}
	}()
	var lat []time.Duration
	for b.Loop() {
		t := time.Now()
		r.Admit(at(1)).Slot.Release()
		lat = append(lat, time.Since(t))
		time.Sleep(100 * time.Microsecond) // a build's pace, not a spin on the lock
	}
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkCountsLockHold250k is the part of Counts at 250,000 resident
// runtimes that holds the registry's lock (before the walk moved out of
// it, the whole call did: BenchmarkCounts250k).
func BenchmarkCountsLockHold250k(b *testing.B) {
	r := manyResident(250_000)
	r.Counts(at(1)) // the copy's buffer, as every scrape after the first finds it
	for b.Loop() {
		r.countsMu.Lock()
		r.snapshot()
		r.countsMu.Unlock()
	}
}
