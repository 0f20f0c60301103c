package gateway

import (
	"math"
	"runtime/metrics"
	"time"
)

// DefaultSchedLagTarget is the scheduling delay above which the node's
// admission lowers its in-flight bound ([MCPOptions.SchedLagTarget]).
const DefaultSchedLagTarget = 25 * time.Millisecond

// adaptEvery is how often the adaptive bound is revised.
const adaptEvery = 100 * time.Millisecond

// schedLagQuantile is the quantile of the goroutines' scheduling delay
// the adaptive bound watches.
const schedLagQuantile = 0.9

// nextLimit is one step of the adaptive in-flight bound. While requests
// wait for a slot or are shed (pressed) and goroutines wait longer than
// target to run (the process is short of CPU: served work would starve
// the refusals, and every answer would wait behind every other), the
// bound drops by a tenth (at least 1, never below 1). While goroutines run
// within target it climbs back by a 32nd of the ceiling (at least 1), up
// to the ceiling. A delay above target with nobody waiting holds it: the
// bound is not what takes the CPU then (other processes, other routes),
// and a node serving less than its bound must not start refusing.
func nextLimit(cur, ceiling int, lag, target time.Duration, pressed bool) int {
	switch {
	case lag > target && pressed:
		return max(1, cur-max(1, cur/10))
	case lag > target:
		return cur
	}
	return min(ceiling, cur+max(1, ceiling/32))
}

// lagQuantile returns the q-quantile of the samples recorded between two
// readings of a cumulative histogram (prev, then cur: counts per bucket;
// buckets: the boundaries), as the upper bound of the bucket it falls in
// (its lower bound for the last, unbounded one); 0 without samples.
func lagQuantile(prev, cur []uint64, buckets []float64, q float64) time.Duration {
	var total uint64
	for i := range cur {
		total += cur[i] - at(prev, i)
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i := range cur {
		seen += cur[i] - at(prev, i)
		if seen >= max(rank, 1) {
			b := buckets[i+1]
			if math.IsInf(b, 1) {
				b = buckets[i]
			}
			return time.Duration(b * float64(time.Second))
		}
	}
	return 0
}

// at is s[i], or 0 past its end.
func at(s []uint64, i int) uint64 {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// schedLag reads the runtime's scheduling delay: how long goroutines
// stayed runnable before they ran, since the previous reading.
type schedLag struct {
	sample []metrics.Sample
	prev   []uint64
}

func newSchedLag() *schedLag {
	return &schedLag{sample: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
}

// read returns the quantile of the delays since the last read.
func (s *schedLag) read() time.Duration {
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s.sample[0].Value.Float64Histogram()
	lag := lagQuantile(s.prev, h.Counts, h.Buckets, schedLagQuantile)
	s.prev = append(s.prev[:0], h.Counts...)
	return lag
}

// adapt revises the effective bound at most every adaptEvery, then hands
// the slots it freed to waiters. a.mu must be held.
func (a *admission) adapt(now time.Time) {
	if a.target < 0 || a.limit < 0 || now.Sub(a.adaptedAt) < adaptEvery {
		return
	}
	a.adaptedAt = now
	a.eff = nextLimit(a.eff, a.limit, a.lag.read(), a.target, a.pressed)
	a.pressed = false
	a.grant()
}

// grant hands free slots (under the effective bound) to the first
// waiters. a.mu must be held.
func (a *admission) grant() {
	for len(a.queue) > 0 && a.inFlight < a.eff {
		a.inFlight++
		close(a.queue[0])
		a.queue = a.queue[1:]
	}
}
