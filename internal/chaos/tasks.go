package chaos

import (
	"fmt"
	"time"
)

// The task worker's checker: the MCP tasks extension (actors/tasks) over
// faults. A task whose creation was acknowledged (a CreateTaskResult with
// its taskId) is durable: every later tasks/get, through any node, finds
// it until its TTL, and it reaches a terminal status exactly once.

// Task statuses of the tasks extension.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// TaskTerminal reports whether status is terminal: completed, failed or
// cancelled.
func TaskTerminal(status string) bool {
	return status == TaskCompleted || status == TaskFailed || status == TaskCancelled
}

// taskStatusKnown reports whether status is one the extension defines.
func taskStatusKnown(status string) bool {
	return TaskTerminal(status) || status == TaskWorking || status == TaskInputRequired
}

// Task methods a [TaskOp] records.
const (
	MethodTaskGet    = "tasks/get"
	MethodTaskCancel = "tasks/cancel"
)

// TaskOp is one answered request about a task: a tasks/get that showed
// the task (or did not find it), or an acknowledged tasks/cancel. Requests
// of unknown outcome (no answer, a retryable error) are not recorded: they
// showed nothing.
type TaskOp struct {
	// Method is MethodTaskGet or MethodTaskCancel.
	Method string
	// Call is when the request was sent, Return when its answer came.
	Call, Return time.Time
	// Status is the status a tasks/get showed.
	Status string
	// Outcome is what a tasks/get of a terminal task showed as its end:
	// its result or its error, as sent.
	Outcome string
	// NotFound is set when a tasks/get answered "task not found".
	NotFound bool
}

// TaskHistory is what a client saw of one task it created.
type TaskHistory struct {
	ID   string
	Tool string
	// Created is when the creating tools/call was sent: the server's
	// createdAt is not earlier, so Created + TTL is a lower bound of the
	// task's expiry.
	Created time.Time
	// TTL is the CreateTaskResult's ttlMs.
	TTL time.Duration
	// Ops are the task's answered requests, by the worker that created it
	// and by the harness's final polls.
	Ops []TaskOp
}

// TaskOnce checks one acknowledged task's history: every tasks/get before
// the TTL found the task and showed a known status; the task was seen
// terminal, first by the time by; once a tasks/get had shown it terminal,
// no later one (sent after that answer) showed it otherwise — the same
// status and the same result or error; and a tasks/get sent after an
// acknowledged tasks/cancel shows a terminal status (cancelled, or the
// end the task had already reached).
func TaskOnce(h TaskHistory, by time.Time) []string {
	var out []string
	name := fmt.Sprintf("task %s (%s)", h.ID, h.Tool)
	expires := h.Created.Add(h.TTL)
	for _, o := range h.Ops {
		switch {
		case o.Method != MethodTaskGet:
		case o.NotFound && o.Return.Before(expires):
			out = append(out, fmt.Sprintf("%s: tasks/get answered \"task not found\" at %s, before its TTL (%s after its creation)", name, clock(o.Return), h.TTL))
		case !o.NotFound && !taskStatusKnown(o.Status):
			out = append(out, fmt.Sprintf("%s: tasks/get showed the unknown status %q", name, o.Status))
		}
	}
	first := firstTerminal(h.Ops)
	if first == nil {
		return append(out, fmt.Sprintf("%s: never seen terminal (by %s; %d answered requests)", name, clock(by), len(h.Ops)))
	}
	if first.Return.After(by) {
		out = append(out, fmt.Sprintf("%s: first seen terminal at %s, after the bound %s", name, clock(first.Return), clock(by)))
	}
	for _, o := range h.Ops {
		if o.Method != MethodTaskGet || o.NotFound || o.Call.Before(first.Return) {
			continue
		}
		switch {
		case !TaskTerminal(o.Status):
			out = append(out, fmt.Sprintf("%s: %s at %s, then %s at %s: back from a terminal status", name, first.Status, clock(first.Return), o.Status, clock(o.Return)))
		case o.Status != first.Status:
			out = append(out, fmt.Sprintf("%s: %s at %s, then %s at %s: terminal twice", name, first.Status, clock(first.Return), o.Status, clock(o.Return)))
		case o.Outcome != first.Outcome:
			out = append(out, fmt.Sprintf("%s: %s with %.120s at %s, then with %.120s at %s: its end changed", name, first.Status, first.Outcome, clock(first.Return), o.Outcome, clock(o.Return)))
		}
	}
	return append(out, cancelHeld(name, h.Ops)...)
}

// cancelHeld checks that every tasks/get sent after an acknowledged
// tasks/cancel had been answered shows a terminal status.
func cancelHeld(name string, ops []TaskOp) []string {
	var out []string
	for _, c := range ops {
		if c.Method != MethodTaskCancel {
			continue
		}
		for _, o := range ops {
			if o.Method == MethodTaskGet && !o.NotFound && !o.Call.Before(c.Return) && !TaskTerminal(o.Status) {
				out = append(out, fmt.Sprintf("%s: cancel acknowledged at %s, then %s at %s", name, clock(c.Return), o.Status, clock(o.Return)))
			}
		}
	}
	return out
}

// clock formats t for a violation.
func clock(t time.Time) string { return t.Format("15:04:05.000") }

// TaskEnd is the terminal status a history showed first ("" when none).
func TaskEnd(h TaskHistory) string {
	if first := firstTerminal(h.Ops); first != nil {
		return first.Status
	}
	return ""
}

// firstTerminal is the tasks/get answered first that showed a terminal
// status (nil when none did).
func firstTerminal(ops []TaskOp) *TaskOp {
	var first *TaskOp
	for i := range ops {
		o := &ops[i]
		if o.Method == MethodTaskGet && TaskTerminal(o.Status) && (first == nil || o.Return.Before(first.Return)) {
			first = o
		}
	}
	return first
}
