package chaos

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Recovery and liveness with numbers: each round of the harness is held
// to a bound on how long the service may stop (derived from the
// membership TTL or the store's measured restart), to progress in every
// worker kind once the fault is over, and to an error budget and gap
// limit from a recorded baseline. These are pure decisions over what the
// clients saw; the harness measures and calls them.

// Worker kinds: an [Outcome]'s Kind, and what every round must show
// progress in.
const (
	// KindCall is a session caller's tools/call.
	KindCall = "tools/call"
	// KindProbe is a write to a fenced durable counter (the probe grain).
	KindProbe = "probe"
	// KindApproval is a decision on a paused execution through the HTTP
	// approval API (ok: decided, by this request or an earlier one).
	KindApproval = "approval"
	// KindSessionless is a 2026-07-28 (sessionless) retry carrying a
	// decision (ok: it answered with the execution's settled outcome).
	KindSessionless = "sessionless approval"
	// KindTask is a tasks/get or tasks/cancel of the task worker (ok:
	// answered with the task).
	KindTask = "task"
	// KindNotes is an add_note or list_notes of the notes worker (an SDK
	// program's durable per-session State; ok: answered with the
	// session's notes).
	KindNotes = "notes"
	// KindDeploy is a deploy call of the deploy worker (an SDK program's
	// Ask and Step; ok: answered with the deployment or the decline).
	KindDeploy = "deploy"
	// KindSchedule is a remind_me of the schedule worker (an SDK
	// program's durable schedules; ok: answered with its key).
	KindSchedule = "schedule"
	// KindTaskCreate is a tools/call that should create a task (not a
	// progress kind: a task is progress once it is followed to its end).
	KindTaskCreate = "task create"
	// KindExecute is an execute call that should pause (not a progress
	// kind: a pause is progress only once it is decided).
	KindExecute = "execute"
)

// Workers are the worker kinds in which every round must show progress.
var Workers = []string{KindCall, KindProbe, KindApproval, KindSessionless, KindTask, KindNotes, KindDeploy, KindSchedule}

// Faults are the faults the harness injects.
var Faults = []string{"kill", "stop", "freeze", "consul", "postgres"}

// Round is one fault round as the harness ran it.
type Round struct {
	// N numbers the rounds from 1.
	N int
	// Fault is kill, stop, freeze, consul or postgres.
	Fault string
	// Node is the node faulted (kill, stop, freeze), for reports.
	Node string
	// Began is when the fault was injected.
	Began time.Time
	// Healed is when the fault was over and every node saw every member
	// again.
	Healed time.Time
	// Ended is when the round was over (the next fault, or the end of the
	// load).
	Ended time.Time
	// Outage is how long the faulted component was down as the harness
	// measured it (the kill-to-restart, the freeze, the Consul agent's or
	// the Postgres server's restart). The postgres bound is derived from
	// it.
	Outage time.Duration
	// Kinds are the worker kinds that ran, which must show progress after
	// the fault (nil: Workers).
	Kinds []string
}

// Timing holds what the recovery bounds are derived from: the cluster's
// and the harness's settings, and a slack for the machine.
type Timing struct {
	// TTL is the membership TTL (--consul-ttl; 2s in test clusters): a
	// node that stopped heartbeating has left every view within it.
	TTL time.Duration
	// Silence is how long a gateway keeps waiting on an exchange whose
	// node left the view before it abandons it with the retryable restart
	// envelope (3s, exchange's departedSilence): a frozen process keeps
	// its sockets open.
	Silence time.Duration
	// HealthCheck is how long the balancer may still send to a gateway
	// that died: its /readyz check period plus the check's timeout.
	HealthCheck time.Duration
	// StoreCheck is the period of /readyz's background store check (1s):
	// after the store is back, every node has seen it within one period.
	StoreCheck time.Duration
	// Slack is what the machine adds to the mechanism: scheduling on a
	// shared 2-core machine, restoring sessions on their new owner, the
	// callers' retry backoff.
	Slack time.Duration
}

// GapBound is the longest a round of r's fault may go without a
// successful tools/call, and how that bound is derived.
func (tm Timing) GapBound(r Round) (time.Duration, string) {
	switch r.Fault {
	case "kill":
		// A dead owner's sessions are served again once it left the view
		// (TTL) or is back, whichever is first; a request sent to the dead
		// gateway fails over within a health check.
		return tm.TTL + tm.HealthCheck + tm.Slack, "TTL + health check + slack"
	case "stop":
		// Graceful: the node leaves the view before it stops and drains
		// what it serves; no lease has to lapse.
		return tm.HealthCheck + tm.Slack, "health check + slack"
	case "freeze":
		// The frozen node leaves the view within the TTL; exchanges that
		// wait on it are abandoned after the silence, then retried.
		return tm.TTL + tm.Silence + tm.HealthCheck + tm.Slack, "TTL + silence + health check + slack"
	case "consul":
		// The agent restarts and the nodes register again; no node may
		// stop serving for longer than its lease lets it.
		return tm.TTL + tm.Slack, "TTL + slack"
	case "postgres":
		// Nothing is served that needs the store while it restarts; once
		// it is back, the nodes reconnect and /readyz sees it within one
		// store check.
		return r.Outage + tm.StoreCheck + tm.Slack, fmt.Sprintf("store restart (%s) + store check + slack", r.Outage.Round(time.Millisecond))
	}
	return 0, "unknown fault"
}

// LongestGap is the longest stretch within [from, to] without a
// successful outcome of kind (answered within it).
func LongestGap(outs []Outcome, kind string, from, to time.Time) time.Duration {
	var oks []time.Time
	for _, o := range outs {
		if o.OK && o.Kind == kind && !o.At.Before(from) && !o.At.After(to) {
			oks = append(oks, o.At)
		}
	}
	slices.SortFunc(oks, func(a, b time.Time) int { return a.Compare(b) })
	prev, gap := from, time.Duration(0)
	for _, at := range oks {
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return max(gap, to.Sub(prev))
}

// within reports whether o was answered in [from, to).
func within(o Outcome, from, to time.Time) bool {
	return !o.At.Before(from) && o.At.Before(to)
}

// Progress checks that every worker kind in kinds had a successful
// outcome after the round's fault was over (in [Healed, Ended)): the
// cluster recovered for every kind of work, not only for some.
func Progress(r Round, outs []Outcome, kinds []string) []string {
	n := map[string]int{}
	for _, o := range outs {
		if o.OK && within(o, r.Healed, r.Ended) {
			n[o.Kind]++
		}
	}
	var out []string
	for _, k := range kinds {
		if n[k] == 0 {
			out = append(out, fmt.Sprintf("round %d (%s %s): no successful %s in the %s after the fault was over",
				r.N, r.Fault, r.Node, k, r.Ended.Sub(r.Healed).Round(time.Millisecond)))
		}
	}
	return out
}

// Figures are what a round of one fault showed, or the baseline of a
// fault: the longest stretch without a successful tools/call and the
// number of failed requests.
type Figures struct {
	Gap    time.Duration
	Errors int
}

// Baseline holds the recorded figures per fault (the worst round of the
// recorded runs) and the tolerance beyond which a round is a regression:
// its gap may be at most GapFactor × the baseline's + GapSlack, its
// errors (the round's error budget) at most ErrorFactor × the baseline's
// + ErrorSlack.
type Baseline struct {
	Faults      map[string]Figures
	GapFactor   float64
	GapSlack    time.Duration
	ErrorFactor float64
	ErrorSlack  int
}

// ParseBaseline reads a baseline file: '#' comments, one line per fault
// ("kill 3.1s 40": fault, longest gap, errors in the round) and the two
// tolerance lines ("tolerance gap 1.5 1s", "tolerance errors 2 20").
func ParseBaseline(text string) (Baseline, error) {
	b := Baseline{Faults: map[string]Figures{}}
	var gapTol, errTol bool
	for i, line := range strings.Split(text, "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(err error) (Baseline, error) {
			return Baseline{}, fmt.Errorf("baseline line %d %q: %w", i+1, strings.TrimSpace(line), err)
		}
		if len(f) != 3 && !(len(f) == 4 && f[0] == "tolerance") {
			return bad(fmt.Errorf("want 'FAULT GAP ERRORS' or 'tolerance gap|errors FACTOR SLACK'"))
		}
		if f[0] == "tolerance" {
			factor, err := strconv.ParseFloat(f[2], 64)
			if err != nil || factor < 1 {
				return bad(fmt.Errorf("factor %q: want a number ≥ 1", f[2]))
			}
			switch f[1] {
			case "gap":
				d, err := time.ParseDuration(f[3])
				if err != nil {
					return bad(err)
				}
				b.GapFactor, b.GapSlack, gapTol = factor, d, true
			case "errors":
				n, err := strconv.Atoi(f[3])
				if err != nil {
					return bad(err)
				}
				b.ErrorFactor, b.ErrorSlack, errTol = factor, n, true
			default:
				return bad(fmt.Errorf("tolerance of %q: want gap or errors", f[1]))
			}
			continue
		}
		gap, err := time.ParseDuration(f[1])
		if err != nil {
			return bad(err)
		}
		errs, err := strconv.Atoi(f[2])
		if err != nil {
			return bad(err)
		}
		if _, dup := b.Faults[f[0]]; dup {
			return bad(fmt.Errorf("fault %s twice", f[0]))
		}
		b.Faults[f[0]] = Figures{Gap: gap, Errors: errs}
	}
	if !gapTol || !errTol {
		return Baseline{}, fmt.Errorf("baseline: both tolerance lines (gap and errors) are required")
	}
	return b, nil
}

// Limits are the regression limits of fault: the longest gap and the
// error budget a round of it may have, and whether the baseline has the
// fault.
func (b Baseline) Limits(fault string) (gap time.Duration, budget int, ok bool) {
	f, ok := b.Faults[fault]
	if !ok {
		return 0, 0, false
	}
	gap = time.Duration(float64(f.Gap)*b.GapFactor) + b.GapSlack
	budget = int(math.Ceil(float64(f.Errors)*b.ErrorFactor)) + b.ErrorSlack
	return gap, budget, true
}

// RoundReport is what one round showed and the bounds it was held to.
type RoundReport struct {
	Round
	// Gap is the longest stretch without a successful tools/call;
	// GapBound the bound derived from the mechanism (Derivation says
	// how), GapLimit the baseline's regression limit.
	Gap, GapBound, GapLimit time.Duration
	Derivation              string
	// Errors is the number of failed requests answered in the round,
	// Budget its error budget, Requests every request answered in it.
	Errors, Budget, Requests int
	// Progress counts the successful outcomes per worker kind after the
	// fault was over.
	Progress map[string]int
}

// CheckRound holds one round to its bounds: the longest stretch without a
// successful tools/call within the derived bound and the baseline's
// limit, the round's failed requests within its error budget, and
// progress in every worker kind after the fault.
func CheckRound(r Round, outs []Outcome, tm Timing, base Baseline) (RoundReport, []string) {
	rep := RoundReport{Round: r, Progress: map[string]int{}}
	rep.Gap = LongestGap(outs, KindCall, r.Began, r.Ended)
	rep.GapBound, rep.Derivation = tm.GapBound(r)
	for _, o := range outs {
		if !within(o, r.Began, r.Ended) {
			continue
		}
		rep.Requests++
		if !o.OK {
			rep.Errors++
		}
		if o.OK && !o.At.Before(r.Healed) {
			rep.Progress[o.Kind]++
		}
	}
	name := fmt.Sprintf("round %d (%s %s)", r.N, r.Fault, r.Node)
	var out []string
	if rep.GapBound <= 0 {
		out = append(out, fmt.Sprintf("%s: no recovery bound for fault %q", name, r.Fault))
	} else if rep.Gap > rep.GapBound {
		out = append(out, fmt.Sprintf("%s: %s without a successful tools/call > bound %s (%s)",
			name, rep.Gap.Round(time.Millisecond), rep.GapBound.Round(time.Millisecond), rep.Derivation))
	}
	gapLimit, budget, ok := base.Limits(r.Fault)
	if !ok {
		out = append(out, fmt.Sprintf("%s: the baseline has no figures for fault %q: record them", name, r.Fault))
	} else {
		rep.GapLimit, rep.Budget = gapLimit, budget
		if rep.Gap > gapLimit {
			out = append(out, fmt.Sprintf("%s: regression: %s without a successful tools/call > %s (baseline %s × %.1f + %s)",
				name, rep.Gap.Round(time.Millisecond), gapLimit.Round(time.Millisecond), base.Faults[r.Fault].Gap, base.GapFactor, base.GapSlack))
		}
		if rep.Errors > budget {
			out = append(out, fmt.Sprintf("%s: %d failed requests (of %d) > error budget %d (baseline %d × %.1f + %d)",
				name, rep.Errors, rep.Requests, budget, base.Faults[r.Fault].Errors, base.ErrorFactor, base.ErrorSlack))
		}
	}
	kinds := r.Kinds
	if kinds == nil {
		kinds = Workers
	}
	out = append(out, Progress(r, outs, kinds)...)
	return rep, out
}
