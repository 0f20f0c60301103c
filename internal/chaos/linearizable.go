package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability of the histories the harness records, checked with
// porcupine against sequential models: the fenced counters (every
// increment takes effect once, between its call and its answer, in an
// order consistent with real time) and approval decisions (one decision
// per execution, the first to arrive; every later answer shows it). An
// operation whose outcome the client could not learn (timed out, cut by a
// dying gateway) may take effect at any time after its call, or never.

// CounterOp is one operation on a fenced counter as its client saw it.
type CounterOp struct {
	// Identity is the counter (the probe grain's identity).
	Identity string
	// Call is when the request was sent; Return when its answer came
	// (ignored when !Known).
	Call, Return time.Time
	// Delta is the increment; 0 is a read.
	Delta int64
	// Count is the count the grain answered (Known only).
	Count int64
	// Known is false when the client could not learn whether the
	// operation took effect.
	Known bool
}

type counterIn struct{ delta int64 }

type counterOut struct {
	count int64
	known bool
}

// counterModel: the state is the count. An increment answered with its
// count is legal only if the count was one delta below; one of unknown
// outcome leaves the count as it was or adds its delta.
var counterModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{int64(0)} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(int64), input.(counterIn), output.(counterOut)
		switch {
		case !out.known && in.delta == 0:
			return []any{s}
		case !out.known:
			return []any{s, s + in.delta}
		case out.count == s+in.delta:
			return []any{s + in.delta}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(counterIn), output.(counterOut)
		res := "?"
		if out.known {
			res = fmt.Sprint(out.count)
		}
		if in.delta == 0 {
			return "read() → " + res
		}
		return fmt.Sprintf("add(%d) → %s", in.delta, res)
	},
}

// DecisionResult is what a decision request learned.
type DecisionResult int

// Decision results.
const (
	// DecisionUnknown: no answer (timed out, cut, a retryable 5xx): the
	// decision may or may not have been recorded.
	DecisionUnknown DecisionResult = iota
	// DecisionWon: this request recorded its decision (HTTP API 200).
	DecisionWon
	// DecisionAlready: a decision was recorded before (HTTP API 409).
	DecisionAlready
	// DecisionSaw: the answer shows which decision was recorded (Saw): a
	// sessionless retry answers with the settled execution's outcome.
	DecisionSaw
)

// DecisionOp is one decision request on a paused execution.
type DecisionOp struct {
	// Execution is the paused execution's id.
	Execution string
	// Call and Return bound the request (Return is ignored when the
	// result is DecisionUnknown).
	Call, Return time.Time
	// Action is the decision sent: accept, decline or cancel.
	Action string
	// Result is what the answer said, Saw the recorded decision it
	// showed (DecisionSaw).
	Result DecisionResult
	Saw    string
}

type decisionIn struct{ action string }

type decisionOut struct {
	result DecisionResult
	saw    string
}

// decisionModel: the state is the recorded decision ("" while there is
// none). The first decision to arrive is recorded; later ones are refused
// and every answer that shows a decision shows that one. A request of
// unknown outcome takes effect at its linearization point; that it never
// arrived is covered too, since it stays open to the end of the history
// and porcupine may place it after every other operation.
var decisionModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(string), input.(decisionIn), output.(decisionOut)
		next := s
		if s == "" {
			next = in.action
		}
		switch out.result {
		case DecisionUnknown:
			return []any{next} // if it arrived: recorded when none was, refused otherwise
		case DecisionWon:
			if s == "" {
				return []any{next}
			}
		case DecisionAlready:
			if s != "" {
				return []any{s}
			}
		case DecisionSaw:
			if out.saw == next {
				return []any{next}
			}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(decisionIn), output.(decisionOut)
		res := map[DecisionResult]string{DecisionUnknown: "?", DecisionWon: "won", DecisionAlready: "already decided", DecisionSaw: "saw " + out.saw}[out.result]
		return fmt.Sprintf("decide(%s) → %s", in.action, res)
	},
}

// LinearizableCounters checks the counter histories with porcupine, one
// identity at a time. Each identity gets at most timeout; one that
// porcupine cannot decide within it is reported (a check that gives up
// proves nothing).
func LinearizableCounters(ops []CounterOp, timeout time.Duration) []string {
	by := map[string][]porcupine.Operation{}
	base, end := span(len(ops), func(i int) (time.Time, time.Time, bool) { return ops[i].Call, ops[i].Return, ops[i].Known })
	for i, o := range ops {
		ret := end
		if o.Known {
			ret = o.Return.Sub(base).Nanoseconds()
		}
		by[o.Identity] = append(by[o.Identity], porcupine.Operation{
			ClientId: i, Call: o.Call.Sub(base).Nanoseconds(), Return: ret,
			Input: counterIn{o.Delta}, Output: counterOut{o.Count, o.Known},
		})
	}
	return checkEach(by, counterModel.ToModel(), timeout, "counter")
}

// LinearizableDecisions checks the decision histories with porcupine, one
// execution at a time (see [LinearizableCounters] for timeout).
func LinearizableDecisions(ops []DecisionOp, timeout time.Duration) []string {
	by := map[string][]porcupine.Operation{}
	base, end := span(len(ops), func(i int) (time.Time, time.Time, bool) {
		return ops[i].Call, ops[i].Return, ops[i].Result != DecisionUnknown
	})
	for i, o := range ops {
		ret := end
		if o.Result != DecisionUnknown {
			ret = o.Return.Sub(base).Nanoseconds()
		}
		by[o.Execution] = append(by[o.Execution], porcupine.Operation{
			ClientId: i, Call: o.Call.Sub(base).Nanoseconds(), Return: ret,
			Input: decisionIn{o.Action}, Output: decisionOut{o.Result, o.Saw},
		})
	}
	return checkEach(by, decisionModel.ToModel(), timeout, "decisions of execution")
}

// span returns the earliest call of n operations (the time origin) and a
// return time after every known return (where operations of unknown
// outcome return: they stay open to the end of the history).
func span(n int, at func(i int) (call, ret time.Time, known bool)) (time.Time, int64) {
	var base time.Time
	for i := range n {
		c, _, _ := at(i)
		if i == 0 || c.Before(base) {
			base = c
		}
	}
	var end int64
	for i := range n {
		c, r, known := at(i)
		end = max(end, c.Sub(base).Nanoseconds())
		if known {
			end = max(end, r.Sub(base).Nanoseconds())
		}
	}
	return base, end + 1
}

// checkEach checks each key's history on its own and reports those that
// are not linearizable, or that porcupine could not decide within timeout.
func checkEach(by map[string][]porcupine.Operation, m porcupine.Model, timeout time.Duration, what string) []string {
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		h := by[k]
		switch porcupine.CheckOperationsTimeout(m, h, timeout) {
		case porcupine.Illegal:
			out = append(out, fmt.Sprintf("%s %s: not linearizable: %s", what, k, describe(m, h)))
		case porcupine.Unknown:
			out = append(out, fmt.Sprintf("%s %s: porcupine could not decide linearizability of %d operations within %s", what, k, len(h), timeout))
		}
	}
	return out
}

// describe lists a history in call order, for a violation's report.
func describe(m porcupine.Model, h []porcupine.Operation) string {
	s := slices.Clone(h)
	slices.SortFunc(s, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var b strings.Builder
	for i, o := range s {
		if i == 12 {
			fmt.Fprintf(&b, "… (%d operations)", len(s))
			break
		}
		fmt.Fprintf(&b, "[%.3fs–%.3fs %s] ", float64(o.Call)/1e9, float64(o.Return)/1e9, m.DescribeOperation(o.Input, o.Output))
	}
	return strings.TrimSpace(b.String())
}
