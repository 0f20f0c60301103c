// Package chaos holds the checkers of the chaos harness (chaos_test.go):
// pure functions that turn what clients saw during fault injection into
// violations. The harness itself runs a real cluster (Consul, Postgres,
// three node processes), drives load through it, injects faults and calls
// these checkers during and after the rounds.
//
// Three families: safety ([SingleOwner], [Counter], [Decisions], [Winner],
// [Liveness], [Growth]: this file), recovery with numbers ([CheckRound]:
// per-round gap bounds derived from the membership TTL or the store's
// restart, progress of every worker kind, error budgets and the baseline
// in testdata/baseline.txt; recovery.go), and linearizability of the
// recorded histories against porcupine models ([LinearizableCounters],
// [LinearizableDecisions]; linearizable.go). None of them does I/O or
// reads a clock: the harness measures, they decide.
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
	What string
	// Kind is the worker kind that made the request ([KindCall],
	// [KindProbe], ...): what [Progress] counts.
	Kind      string
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
// grow beyond factor times its baseline plus slack. The baseline is the
// larger of the first two samples: the first follows round 1's fault, and
// a node that fault restarted has not grown to its working size yet (on a
// loaded machine that alone came within a MiB of the bound), so growth is
// measured from the first round after which every node has run a round.
func Growth(what string, samples []float64, factor, slack float64) []string {
	if len(samples) < 2 {
		return nil
	}
	base, from := samples[0], 1
	if len(samples) > 2 {
		base, from = max(samples[0], samples[1]), 2
	}
	limit := base*factor + slack
	for i, v := range samples[from:] {
		if v > limit {
			return []string{fmt.Sprintf("%s grew to %.0f after round %d (baseline %.0f, bound %.0f)", what, v, i+from+1, base, limit)}
		}
	}
	return nil
}

// Decisions checks the decision requests on one paused execution without
// a model (porcupine checks the same histories against one:
// [LinearizableDecisions]): at most one request recorded its decision; no
// request was told "already decided" before any request that could have
// recorded one had been sent (an earlier attempt of unknown outcome, a
// winner, or a sessionless retry, by any approver); no request recorded
// its decision after another had been told one existed; and every answer
// that shows the recorded decision shows the same one, sent by some
// request before that answer came.
func Decisions(execution string, ops []DecisionOp) []string {
	var out []string
	mayDecide := func(o DecisionOp) bool { return o.Result != DecisionAlready }
	var won []DecisionOp
	saw := ""
	for _, o := range ops {
		switch o.Result {
		case DecisionWon:
			won = append(won, o)
		case DecisionSaw:
			if saw != "" && o.Saw != saw {
				out = append(out, fmt.Sprintf("%s: answers show two decisions: %s and %s", execution, saw, o.Saw))
			}
			saw = o.Saw
		}
	}
	if len(won) > 1 {
		out = append(out, fmt.Sprintf("%s: decided %d times (%s and %s both recorded)", execution, len(won), won[0].Action, won[1].Action))
	}
	for _, w := range won {
		if saw != "" && w.Action != saw {
			out = append(out, fmt.Sprintf("%s: %s recorded, but an answer shows %s", execution, w.Action, saw))
		}
	}
	for i, a := range ops {
		switch a.Result {
		case DecisionAlready:
			before := false
			for j, o := range ops {
				before = before || (j != i && mayDecide(o) && !o.Call.After(a.Return))
			}
			if !before {
				out = append(out, fmt.Sprintf("%s: %s told \"already decided\" though no request that could have decided it had been sent", execution, a.Action))
			}
			for _, w := range won {
				if a.Return.Before(w.Call) {
					out = append(out, fmt.Sprintf("%s: %s recorded after another request had been told a decision existed", execution, w.Action))
				}
			}
		case DecisionSaw:
			sent := false
			for _, o := range ops {
				sent = sent || (mayDecide(o) && o.Action == a.Saw && !o.Call.After(a.Return))
			}
			if !sent {
				out = append(out, fmt.Sprintf("%s: an answer shows %s, which no request had sent", execution, a.Saw))
			}
		}
	}
	return out
}

// Winner is the decision recorded on an execution, as far as the answers
// to its decision requests tell: the action of a request that won or the
// one an answer showed; after an "already decided", the action of the
// requests that could have decided it, if they all sent the same one.
func Winner(ops []DecisionOp) (string, bool) {
	candidates := map[string]bool{}
	decided := false
	for _, o := range ops {
		switch o.Result {
		case DecisionWon:
			return o.Action, true
		case DecisionSaw:
			return o.Saw, true
		case DecisionAlready:
			decided = true
		case DecisionUnknown:
			candidates[o.Action] = true
		}
	}
	if decided && len(candidates) == 1 {
		for a := range candidates {
			return a, true
		}
	}
	return "", false
}
