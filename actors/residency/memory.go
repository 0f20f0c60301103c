package residency

import "math"

// Memory derives the soft cap from a memory budget: how many session
// runtimes a node keeps warm follows from what one of them measurably
// costs, instead of a fixed count (executor's 32 was the memory of one
// isolate; a Go node has gigabytes). The zero value means no budget.
type Memory struct {
	// Budget is the memory, in bytes, the node's resident runtimes may
	// take (the process's heap beyond its baseline, including the garbage
	// the collector lets accumulate between collections).
	Budget uint64
	// Prior is the memory of one runtime assumed until MinSample runtimes
	// are resident to measure it. Default 256 KiB.
	Prior uint64
	// MinSample is how many runtimes must be resident before their
	// measured memory replaces Prior. Default 16.
	MinSample int
	// Floor and Ceiling bound the cap. Defaults 16 and 1,000,000.
	Floor, Ceiling int
}

// Sample is one reading of a node, as [Memory.Cap] takes it.
type Sample struct {
	// Resident is the number of resident runtimes.
	Resident int
	// LiveHeap is the heap the last garbage collection kept, in bytes.
	LiveHeap uint64
	// Baseline is the live heap of the node with no runtime resident
	// (measured at start, and whenever none is).
	Baseline uint64
	// GOGC is the collector's target percentage (the heap grows by this
	// much over the live heap before the next collection); 100 if unset.
	GOGC int
	// MemLimit is the runtime's soft memory limit in bytes (GOMEMLIMIT;
	// 0 or math.MaxInt64: none). Near it the collector runs whatever
	// GOGC says, so the heap never grows past it.
	MemLimit uint64
}

func (m Memory) withDefaults() Memory {
	if m.Prior == 0 {
		m.Prior = 256 << 10
	}
	if m.MinSample <= 0 {
		m.MinSample = 16
	}
	if m.Floor <= 0 {
		m.Floor = 16
	}
	if m.Ceiling <= 0 {
		m.Ceiling = 1_000_000
	}
	return m
}

// PerRuntime is the memory one resident runtime takes in s, in bytes:
// the live heap beyond the baseline divided among the resident runtimes,
// times the collector's growth, or Prior while fewer than MinSample
// runtimes are resident. It never goes below Prior/8, so a reading taken
// just after many runtimes went does not promise room that is not there.
func (m Memory) PerRuntime(s Sample) uint64 {
	m = m.withDefaults()
	if s.Resident < m.MinSample {
		return m.Prior
	}
	var over uint64
	if s.LiveHeap > s.Baseline {
		over = s.LiveHeap - s.Baseline
	}
	per := uint64(float64(over/uint64(s.Resident)) * m.growth(s))
	return max(per, m.Prior/8)
}

// growth is how much heap a live byte takes, garbage included: the
// collector's target (1 + GOGC/100) — but under a memory limit the heap
// never passes the limit, so a budget filled with live runtimes takes at
// most limit ÷ budget of it (a raised GOGC under a limit then does not
// shrink the cap; a node at its budget collects as often as the limit
// makes it).
func (m Memory) growth(s Sample) float64 {
	gogc := s.GOGC
	if gogc <= 0 {
		gogc = 100
	}
	g := float64(100+gogc) / 100
	if s.MemLimit > 0 && s.MemLimit < math.MaxInt64 && m.Budget > 0 {
		g = min(g, max(1, float64(s.MemLimit)/float64(m.Budget)))
	}
	return g
}

// Cap is the soft cap for s: Budget divided by [Memory.PerRuntime],
// within [Floor, Ceiling]. Without a budget it returns 0 (no derived
// cap).
func (m Memory) Cap(s Sample) int {
	if m.Budget == 0 {
		return 0
	}
	m = m.withDefaults()
	n := m.Budget / m.PerRuntime(s)
	if n > uint64(m.Ceiling) {
		return m.Ceiling
	}
	return max(int(n), m.Floor)
}
