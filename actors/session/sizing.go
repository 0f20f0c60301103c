package session

import (
	rtmetrics "runtime/metrics"
	"sync"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/residency"
)

// sizingInterval is how often the memory measurement behind the soft cap
// is refreshed (at the next cold build after it).
const sizingInterval = 2 * time.Second

// sizing keeps the node's soft cap at what its memory budget allows: it
// measures the live heap and the resident runtimes (residency.Memory
// turns that into a cap) when a cold build is admitted, at most every
// sizingInterval.
type sizing struct {
	model residency.Memory

	mu       sync.Mutex
	last     time.Time
	baseline uint64 // live heap with no runtime resident
	per      uint64 // the last estimate of one runtime's memory
	gogc     int    // the highest collector target read
	samples  []rtmetrics.Sample
}

func newSizing(m residency.Memory) *sizing {
	z := &sizing{model: m, samples: []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}}
	z.baseline, _, _ = z.read()
	return z
}

// read returns the live heap, the highest GOGC read so far and the memory
// limit. The node's target follows its allocation rate (app.GCPolicy:
// raised while busy, lowered while quiet); the cap assumes the raised one,
// so a quiet spell does not raise a cap the next burst would shrink.
func (z *sizing) read() (live uint64, gogc int, limit uint64) {
	rtmetrics.Read(z.samples)
	if v := z.samples[0].Value; v.Kind() == rtmetrics.KindUint64 {
		live = v.Uint64()
	}
	gogc = 100
	if v := z.samples[1].Value; v.Kind() == rtmetrics.KindUint64 {
		gogc = int(v.Uint64())
	}
	z.gogc = max(z.gogc, gogc)
	gogc = z.gogc
	if v := z.samples[2].Value; v.Kind() == rtmetrics.KindUint64 {
		limit = v.Uint64()
	}
	return live, gogc, limit
}

// resize measures (if the last measurement is older than sizingInterval)
// and sets reg's soft cap. It reports whether it measured and reg is over
// the cap it set.
func (z *sizing) resize(reg *residency.Registry, now time.Time) (over bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if !z.last.IsZero() && now.Sub(z.last) < sizingInterval {
		return false
	}
	z.last = now
	live, gogc, limit := z.read()
	resident := reg.Resident()
	if resident == 0 {
		z.baseline = live
	}
	s := residency.Sample{Resident: resident, LiveHeap: live, Baseline: z.baseline, GOGC: gogc, MemLimit: limit}
	z.per = z.model.PerRuntime(s)
	return reg.SetSoftCap(z.model.Cap(s))
}

// perRuntime is the last estimate of one runtime's memory.
func (z *sizing) perRuntime() uint64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.per
}
