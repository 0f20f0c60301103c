package app

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"strings"
)

// DefaultGCPercent is the garbage collector's target a node runs with when
// the operator set no GOGC: the heap may grow to five times what is live
// before a collection, instead of Go's default of twice. A node's live
// heap is mostly resident sessions, and each request allocates short-lived
// buffers (JSON decoding, the exchange, the store); collecting a fifth as
// often cuts the collector's CPU per request by about that much. The
// memory limit ([DefaultMemoryLimitShare]) bounds what this costs: near
// it the collector runs as often as it must, whatever the target.
const DefaultGCPercent = 400

// DefaultMemoryLimitShare is the share of the node's memory ([NodeMemory])
// a node sets as the Go runtime's soft memory limit when the operator set
// no GOMEMLIMIT.
const DefaultMemoryLimitShare = 0.9

// GCSettings is how a node sets up the garbage collector. A zero field
// leaves that setting as the runtime has it (from GOGC and GOMEMLIMIT, or
// Go's defaults).
type GCSettings struct {
	// Percent is the GC target (debug.SetGCPercent), 0 to leave it.
	Percent int
	// Limit is the soft memory limit in bytes (debug.SetMemoryLimit), 0 to
	// leave it.
	Limit int64
	// Adaptive says the target follows the node's allocation rate
	// ([GCPolicy], from Percent while busy) instead of staying at Percent.
	Adaptive bool
}

// GCFor decides the collector settings of a node from the GOGC and
// GOMEMLIMIT values in its environment and the memory available to it
// (bytes, 0 if unknown): what the operator set wins; otherwise
// [DefaultGCPercent], and a limit of [DefaultMemoryLimitShare] of the
// node's memory, the target adapting to how busy the node is ([GCPolicy]:
// [DefaultGCPercent] while busy, lower while quiet). Without a known
// memory size the target stays Go's: a raised target without a limit
// could grow the heap past what the node has.
func GCFor(gogc, gomemlimit string, nodeMemory uint64) GCSettings {
	var s GCSettings
	ownLimit := strings.TrimSpace(gomemlimit) != ""
	if !ownLimit && nodeMemory > 0 {
		s.Limit = int64(math.Min(float64(nodeMemory)*DefaultMemoryLimitShare, math.MaxInt64))
	}
	if strings.TrimSpace(gogc) == "" && (ownLimit || s.Limit > 0) {
		s.Percent = DefaultGCPercent
		s.Adaptive = true
	}
	return s
}

// Apply sets the runtime's collector as s says, and runs the adaptive
// target ([StartGCPolicy]) until ctx ends if s is adaptive.
func (s GCSettings) Apply(ctx context.Context) {
	if s.Limit > 0 {
		debug.SetMemoryLimit(s.Limit)
	}
	if s.Percent > 0 {
		debug.SetGCPercent(s.Percent)
	}
	if s.Adaptive {
		StartGCPolicy(ctx)
	}
}

// CurrentGC reads the collector's target percentage (-1: off) and soft
// memory limit (math.MaxInt64: none) as the runtime has them.
func CurrentGC() (percent int, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	percent = -1
	if v := s[0].Value; v.Kind() == metrics.KindUint64 && v.Uint64() > 0 {
		percent = int(v.Uint64())
	}
	if v := s[1].Value; v.Kind() == metrics.KindUint64 {
		limit = v.Uint64()
	}
	return percent, limit
}
