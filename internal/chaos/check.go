// Package chaos holds the checkers of the chaos harness (chaos_test.go):
// pure functions that turn what clients saw during fault injection into
// violations. The harness itself runs a real cluster (Consul, Postgres,
// three node processes), drives load through it, injects faults and calls
// these checkers during and after the rounds.
//
//	MCPGRAIN_CHAOS=1 MCPGRAIN_CHAOS_ROUNDS=5 go test ./internal/chaos -run TestChaos -v -timeout 30m
package chaos

import (
	"fmt"
	"slices"
	"time"
)

// Ack is one acknowledged write to a fenced durable counter (the probe
// grain): the count it produced and the activation that wrote it.
type Ack struct {
	Count int64
	Epoch uint64
	Node  string
}

// SingleOwner checks the acknowledged writes of one identity: ordered by
// the count they produced, their epochs never go down (a write accepted by
// an older activation after a newer one had written would show as a lower
// epoch on a higher count) and no count was acknowledged twice (two
// activations accepting the same write position).
func SingleOwner(identity string, acks []Ack) []string {
	s := slices.Clone(acks)
	slices.SortFunc(s, func(a, b Ack) int {
		if a.Count != b.Count {
			return int(a.Count - b.Count)
		}
		return int(a.Epoch) - int(b.Epoch)
	})
	var out []string
	for i := 1; i < len(s); i++ {
		p, c := s[i-1], s[i]
		if c.Count == p.Count {
			out = append(out, fmt.Sprintf("%s: count %d acknowledged twice (epoch %d on %s, epoch %d on %s)", identity, c.Count, p.Epoch, p.Node, c.Epoch, c.Node))
		}
		if c.Epoch < p.Epoch {
			out = append(out, fmt.Sprintf("%s: count %d written by epoch %d (%s) after count %d by epoch %d (%s): overlapping owners", identity, c.Count, c.Epoch, c.Node, p.Count, p.Epoch, p.Node))
		}
	}
	return out
}

// Counter checks a counter's final value against what clients saw: every
// acknowledged increment landed, and no more landed than were attempted
// with an unknown outcome (timed out after the grain may have run them).
func Counter(identity string, final int64, acked, unknown int) []string {
	switch {
	case final < int64(acked):
		return []string{fmt.Sprintf("%s: final count %d < %d acknowledged increments: acknowledged writes lost", identity, final, acked)}
	case final > int64(acked+unknown):
		return []string{fmt.Sprintf("%s: final count %d > %d acknowledged + %d unknown-outcome increments: a write applied twice", identity, final, acked, unknown)}
	}
	return nil
}

// Outcome is what one client request got.
type Outcome struct {
	What      string
	Took      time.Duration
	OK        bool
	Retryable bool // 503 restart envelope, 429, or a grain's retryable error
	Err       string
	At        time.Time // when the answer came (set by the recorder)
}

// Liveness checks that every request was answered, successfully or with a
// retryable error, within bound.
func Liveness(outs []Outcome, bound time.Duration) []string {
	var out []string
	for _, o := range outs {
		switch {
		case o.Took > bound:
			out = append(out, fmt.Sprintf("%s took %s (> %s): %s", o.What, o.Took.Round(time.Millisecond), bound, o.Err))
		case !o.OK && !o.Retryable:
			out = append(out, fmt.Sprintf("%s failed with a non-retryable error after %s: %s", o.What, o.Took.Round(time.Millisecond), o.Err))
		}
	}
	return out
}

// Growth checks that a resource sampled at the end of each round did not
// grow beyond factor times its first sample plus slack.
func Growth(what string, samples []float64, factor, slack float64) []string {
	if len(samples) < 2 {
		return nil
	}
	limit := samples[0]*factor + slack
	for i, v := range samples[1:] {
		if v > limit {
			return []string{fmt.Sprintf("%s grew to %.0f after round %d (first %.0f, bound %.0f)", what, v, i+2, samples[0], limit)}
		}
	}
	return nil
}
