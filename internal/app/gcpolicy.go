package app

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// GCPolicy decides the collector's target percentage (GOGC) of a node
// from how fast it allocates: the raised target ([DefaultGCPercent]) while
// it is busy, a low one while it is quiet. The collector's CPU is
// proportional to the allocation rate divided by the target (each cycle
// marks the live heap, and a cycle comes every live × target bytes
// allocated), whatever the live heap, while the memory it holds past the
// live heap is the live heap times the target. A busy node (creating
// sessions, serving calls: mostly go-sdk's short-lived JSON buffers) buys
// CPU with memory; a quiet one — resident sessions waiting for their next
// request — gives the memory back (the runtime's scavenger returns what
// the lower heap goal leaves idle) at little CPU, since it allocates
// little. The runtime's scavenger returns idle memory at about 1 % of a
// CPU (tens of MB a minute: 20,000 sessions' worth took minutes), so the
// node returns it at once when it goes quiet ([GCDecision.Release]): one
// collection and the idle pages returned per quiet spell, which the next
// burst faults back in. The zero value is the default policy.
type GCPolicy struct {
	// Busy is the target while busy; 0 means [DefaultGCPercent].
	Busy int
	// Quiet is the lowest target while quiet; 0 means DefaultQuietGCPercent.
	Quiet int
	// BusyRate is the allocation rate (bytes a second) from which the node
	// counts as busy; 0 means DefaultGCBusyRate.
	BusyRate float64
	// Headroom is the least a quiet node's heap may grow past its live
	// heap before a collection (bytes; the target is raised for a small
	// heap to keep it); 0 means DefaultGCHeadroom.
	Headroom uint64
	// Settle is how long a node stays quiet before the target is lowered;
	// 0 means DefaultGCSettle.
	Settle time.Duration
}

const (
	// DefaultQuietGCPercent is a quiet node's target: its heap grows by a
	// quarter of the live heap before a collection.
	DefaultQuietGCPercent = 25
	// DefaultGCBusyRate is the allocation rate from which a node counts as
	// busy: 16 MiB/s. At about a nanosecond a live byte marked, a cycle
	// every quarter of the live heap costs ~4 ns an allocated byte, ~7 %
	// of a core at this rate, whatever the live heap; above it the raised
	// target pays for its memory.
	DefaultGCBusyRate = 16 << 20
	// DefaultGCHeadroom is the least headroom a quiet node keeps: a small
	// heap (a node with few sessions) keeps the raised target.
	DefaultGCHeadroom = 64 << 20
	// DefaultGCSettle is how long a node must stay quiet before its target
	// is lowered: a pause between bursts keeps the raised one.
	DefaultGCSettle = 5 * time.Second
)

func (p GCPolicy) withDefaults() GCPolicy {
	if p.Busy <= 0 {
		p.Busy = DefaultGCPercent
	}
	if p.Quiet <= 0 {
		p.Quiet = DefaultQuietGCPercent
	}
	if p.BusyRate <= 0 {
		p.BusyRate = DefaultGCBusyRate
	}
	if p.Headroom == 0 {
		p.Headroom = DefaultGCHeadroom
	}
	if p.Settle <= 0 {
		p.Settle = DefaultGCSettle
	}
	return p
}

// GCReading is what [GCPolicy.Next] reads of the runtime.
type GCReading struct {
	At        time.Time
	Allocated uint64 // bytes allocated since the process started (/gc/heap/allocs:bytes)
	Live      uint64 // the live heap the last collection marked (/gc/heap/live:bytes)
}

// GCState is what [GCPolicy.Next] remembers between readings; its zero
// value is a node that has not been read yet (and counts as busy).
type GCState struct {
	last      GCReading
	quietFrom time.Time // when the node became quiet; zero while busy
	lowered   bool      // the quiet target is set (the heap was returned)
}

// GCDecision is what [GCPolicy.Next] decides.
type GCDecision struct {
	// Percent is the collector's target.
	Percent int
	// Release says to collect and return the idle heap to the OS now
	// (debug.FreeOSMemory): the node has just gone quiet.
	Release bool
}

// Next decides the target after reading r: [GCPolicy.Busy] when the node
// allocated at [GCPolicy.BusyRate] or more since the last reading (or
// has not been quiet for [GCPolicy.Settle]), else the target that keeps
// [GCPolicy.Headroom] over the live heap, within [Quiet, Busy]; the first
// quiet decision after a busy one releases the idle heap.
func (p GCPolicy) Next(s GCState, r GCReading) (GCState, GCDecision) {
	p = p.withDefaults()
	first := s.last.At.IsZero()
	dt := r.At.Sub(s.last.At).Seconds()
	busy := first || dt <= 0 || r.Allocated < s.last.Allocated ||
		float64(r.Allocated-s.last.Allocated) >= p.BusyRate*dt
	if first || dt > 0 {
		s.last = r
	}
	switch {
	case busy:
		s.quietFrom, s.lowered = time.Time{}, false
		return s, GCDecision{Percent: p.Busy}
	case s.quietFrom.IsZero():
		s.quietFrom = r.At
	}
	if r.At.Sub(s.quietFrom) < p.Settle {
		return s, GCDecision{Percent: p.Busy}
	}
	percent := p.quietPercent(r.Live)
	release := !s.lowered && percent < p.Busy
	s.lowered = s.lowered || release
	return s, GCDecision{Percent: percent, Release: release}
}

// quietPercent is the target that keeps Headroom over live, within
// [Quiet, Busy].
func (p GCPolicy) quietPercent(live uint64) int {
	if live == 0 {
		return p.Busy
	}
	want := float64(p.Headroom) * 100 / float64(live)
	return int(min(float64(p.Busy), max(float64(p.Quiet), want)))
}

// GCInterval is how often [RunGCPolicy] reads the runtime.
const GCInterval = time.Second

// RunGCPolicy applies p until ctx ends: at every tick it reads the runtime
// (read), sets the target (set) when p's decision changes, and releases
// the idle heap (release) when p says. The node runs it with [ReadGC],
// debug.SetGCPercent, debug.FreeOSMemory and a [GCInterval] ticker.
func RunGCPolicy(ctx context.Context, p GCPolicy, tick <-chan time.Time, read func() GCReading, set func(int), release func()) {
	var s GCState
	current := 0
	for {
		var d GCDecision
		s, d = p.Next(s, read())
		if d.Percent != current {
			set(d.Percent)
			current = d.Percent
		}
		if d.Release {
			release()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// ReadGC reads the runtime for [GCPolicy.Next].
func ReadGC() GCReading {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	r := GCReading{At: time.Now()}
	if v := s[0].Value; v.Kind() == metrics.KindUint64 {
		r.Allocated = v.Uint64()
	}
	if v := s[1].Value; v.Kind() == metrics.KindUint64 {
		r.Live = v.Uint64()
	}
	return r
}

// StartGCPolicy runs the default [GCPolicy] in the background until ctx
// ends, reading the runtime every [GCInterval].
func StartGCPolicy(ctx context.Context) {
	t := time.NewTicker(GCInterval)
	go func() {
		defer t.Stop()
		RunGCPolicy(ctx, GCPolicy{}, t.C, ReadGC, func(p int) { debug.SetGCPercent(p) }, debug.FreeOSMemory)
	}()
}
