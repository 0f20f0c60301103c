package bench

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Scenario names a load pattern.
type Scenario string

// The scenarios, in the order "all" runs them.
const (
	// Call is tools/call round trips over sessions opened up front.
	Call Scenario = "call"
	// Churn is whole session lives: initialize, one call, DELETE.
	Churn Scenario = "churn"
	// Restore is calls round-robin over more sessions than the node keeps
	// resident, so they keep being passivated and restored cold.
	Restore Scenario = "restore"
	// Approve is code mode's pause → approve (HTTP route) → resume cycle.
	Approve Scenario = "approve"
	// Scale creates many sessions over raw Streamable HTTP, then revisits
	// random ones, telling warm answers from cold restores. It runs only
	// when named: "all" leaves it out (100,000 sessions by default).
	Scale Scenario = "scale"
)

// Scenarios lists the scenarios "all" runs, in that order ([Scale] is
// not among them).
func Scenarios() []Scenario { return []Scenario{Call, Churn, Restore, Approve} }

// ParseScenarios parses a comma-separated list of scenario names, or
// "all" (every scenario but scale). Duplicates are dropped; the order
// given is kept.
func ParseScenarios(s string) ([]Scenario, error) {
	var out []Scenario
	for _, part := range strings.Split(s, ",") {
		name := Scenario(strings.TrimSpace(part))
		switch {
		case name == "all":
			for _, sc := range Scenarios() {
				if !slices.Contains(out, sc) {
					out = append(out, sc)
				}
			}
		case slices.Contains(Scenarios(), name) || name == Scale || name == Overload:
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		case name == "":
			return nil, fmt.Errorf("empty scenario name in %q (want a comma-separated list of %s, or all)", s, scenarioList())
		default:
			return nil, fmt.Errorf("unknown scenario %q (known: %s, all)", name, scenarioList())
		}
	}
	return out, nil
}

func scenarioList() string {
	names := make([]string, 0, 5)
	for _, sc := range append(Scenarios(), Scale, Overload) {
		names = append(names, string(sc))
	}
	return strings.Join(names, ", ")
}

// Budget hands out permission to start requests until a deadline passes
// or a request limit is reached, whichever comes first. It is safe for
// concurrent use.
type Budget struct {
	deadline time.Time // zero: none
	limit    int64     // 0: none
	now      func() time.Time
	issued   atomic.Int64
	stopped  atomic.Bool
}

// NewBudget returns a budget that ends at deadline (zero: no deadline)
// and after limit requests (0: no limit), telling time with now. With
// neither it never ends until [Budget.Stop].
func NewBudget(deadline time.Time, limit int, now func() time.Time) *Budget {
	return &Budget{deadline: deadline, limit: int64(limit), now: now}
}

// Take reports whether one more request may start, and counts it if so.
func (b *Budget) Take() bool {
	if b.stopped.Load() {
		return false
	}
	if !b.deadline.IsZero() && !b.now().Before(b.deadline) {
		return false
	}
	if b.limit > 0 {
		if n := b.issued.Add(1); n > b.limit {
			b.issued.Add(-1)
			return false
		}
		return true
	}
	b.issued.Add(1)
	return true
}

// Stop ends the budget early (a cancelled run).
func (b *Budget) Stop() { b.stopped.Store(true) }

// Issued is how many requests Take allowed.
func (b *Budget) Issued() int { return int(b.issued.Load()) }

// Fraction is how far along the budget is, 0 to 1, by time or by count
// (whichever is further), measured from start.
func (b *Budget) Fraction(start time.Time) float64 {
	f := 0.0
	if !b.deadline.IsZero() {
		if total := b.deadline.Sub(start); total > 0 {
			f = float64(b.now().Sub(start)) / float64(total)
		}
	}
	if b.limit > 0 {
		f = max(f, float64(b.issued.Load())/float64(b.limit))
	}
	return min(max(f, 0), 1)
}

// RoundRobin picks indexes 0..n-1 in turn. It is safe for concurrent use.
type RoundRobin struct {
	n    uint64
	next atomic.Uint64
}

// NewRoundRobin returns a round robin over n ≥ 1 indexes.
func NewRoundRobin(n int) *RoundRobin { return &RoundRobin{n: uint64(max(n, 1))} }

// Next returns the next index.
func (r *RoundRobin) Next() int { return int((r.next.Add(1) - 1) % r.n) }
