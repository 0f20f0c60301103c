package tasks

import (
	"fmt"
	"time"
)

// Status is a task's status (SEP-2663).
type Status string

// The statuses of a task. completed, failed and cancelled are terminal.
const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Failed        Status = "failed"
	Cancelled     Status = "cancelled"
)

// Terminal reports whether s is final: nothing changes a task after it.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Event is what happens to a task.
type Event string

// The events of a task's life.
const (
	// NeedInput: the tool asked for input (MRTR inputRequests).
	NeedInput Event = "need_input"
	// InputComplete: every pending input request was answered; the tool
	// runs again.
	InputComplete Event = "input_complete"
	// Finish: the tool returned a result (isError or not).
	Finish Event = "finish"
	// Fail: the tool failed with a protocol error, or its work was lost.
	Fail Event = "fail"
	// Cancel: tasks/cancel.
	Cancel Event = "cancel"
)

// Step is the task state machine: the status after e happens to a task
// in status from, and whether it changed. Cancelling a terminal task is
// accepted and changes nothing (tasks/cancel is idempotent); any other
// event that does not apply to from is an error, and the caller drops the
// event (e.g. a result that arrives after the task was cancelled).
func Step(from Status, e Event) (Status, bool, error) {
	switch {
	case e == Cancel && from.Terminal():
		return from, false, nil
	case e == Cancel:
		return Cancelled, true, nil
	case from == Working && e == NeedInput:
		return InputRequired, true, nil
	case from == InputRequired && e == InputComplete:
		return Working, true, nil
	case from == Working && e == Finish:
		return Completed, true, nil
	case (from == Working || from == InputRequired) && e == Fail:
		return Failed, true, nil
	}
	return from, false, fmt.Errorf("tasks: %s does not apply to a %s task", e, from)
}

// Loss is what becomes of a working task whose work was lost with the
// activation that ran it.
type Loss int

// The outcomes of a lost task.
const (
	// FailLost: the task ends failed ("the work was lost").
	FailLost Loss = iota
	// Rerun: the task's current round runs again.
	Rerun
)

// MaxRuns bounds how often a task's work is started (its first run and the
// re-runs after losses): a tool that keeps losing its node stops.
const MaxRuns = 5

// afterLoss decides a lost task's fate: re-run a tool that is safe to run
// again (restartable: read-only or idempotent) while it has runs left,
// else fail — re-running any other tool could repeat its side effects.
func afterLoss(runs int, restartable bool) Loss {
	if restartable && runs < MaxRuns {
		return Rerun
	}
	return FailLost
}

// Handover is what an activation of a task grain makes of its task when
// the task's work does not run in it.
type Handover int

// The handover decisions.
const (
	// Idle: the task is not working (or its work runs here); nothing is
	// owed to it.
	Idle Handover = iota
	// Draining: the activation that ran the work is stopping and may still
	// record its run's outcome until its lease ends. The task is answered
	// as its store row says; nothing is decided before the lease ends.
	Draining
	// Lost: nobody runs the work, nor may record its outcome: [afterLoss]
	// decides what becomes of it.
	Lost
)

// handover decides about a task in status with its work not running in
// this activation (runsHere false) and the lease a stopping activation
// holds on its run (zero: none, e.g. its node died): the work is lost
// only once no lease holds it.
func handover(status Status, runsHere bool, leaseUntil, now time.Time) Handover {
	switch {
	case status != Working || runsHere:
		return Idle
	case now.Before(leaseUntil):
		return Draining
	}
	return Lost
}
