package chaos

import (
	"fmt"
	"slices"
	"time"
)

// The schedule worker's checker: an SDK program's durable schedules
// (examples/watch: remind_me schedules a callback on the caller's session
// with mcpgrain.ScheduleAt, under a key) over faults. Each worker
// schedule has a key unique in the run, due a short time ahead; a call of
// unknown outcome is retried with the same key (the same key schedules
// nothing new). The callback records its key once however many times it
// runs (one file per key, WATCH_DIR). What a client saw is held to:
//
//   - every acknowledged schedule fired: its record is there once the
//     harness stopped waiting (a bound it logs with the latencies);
//   - none fired before it was due;
//   - nothing fired that the worker never scheduled.
//
// A schedule never acknowledged has an unknown outcome: it may fire.

// ScheduleOp is one schedule of the worker.
type ScheduleOp struct {
	// Key is the schedule's key, unique in the run.
	Key string
	// Acked is set when a remind_me call with the key was answered with
	// it.
	Acked bool
}

// Fire is what a schedule's callback recorded.
type Fire struct {
	// Due is when the schedule was due, At when the callback ran.
	Due, At time.Time
}

// SchedulesOnce checks the worker's schedules against the callbacks'
// records, by key, and returns the violations.
func SchedulesOnce(ops []ScheduleOp, fired map[string]Fire) []string {
	var out []string
	asked := map[string]bool{}
	for _, op := range ops {
		asked[op.Key] = true
		f, ok := fired[op.Key]
		switch {
		case op.Acked && !ok:
			out = append(out, fmt.Sprintf("schedule %s: acknowledged, never fired", op.Key))
		case ok && f.At.Before(f.Due):
			out = append(out, fmt.Sprintf("schedule %s: fired at %s, before it was due (%s)", op.Key, clock(f.At), clock(f.Due)))
		}
	}
	var unknown []string
	for key := range fired {
		if !asked[key] {
			unknown = append(unknown, key)
		}
	}
	slices.Sort(unknown)
	for _, key := range unknown {
		out = append(out, fmt.Sprintf("schedule %s: fired, never scheduled", key))
	}
	return out
}

// ScheduleLatency returns the largest delay of a recorded callback past
// its due time, and how many of ops fired.
func ScheduleLatency(ops []ScheduleOp, fired map[string]Fire) (worst time.Duration, n int) {
	for _, op := range ops {
		if f, ok := fired[op.Key]; ok {
			n++
			worst = max(worst, f.At.Sub(f.Due))
		}
	}
	return worst, n
}
