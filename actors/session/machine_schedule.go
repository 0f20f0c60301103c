package session

import (
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// The machine's decisions about the SDK's durable schedules (docs/sdk.md
// §3): a schedule is a reminder "sdk/<key>" of the session grain, its
// callback's name and payload an entry of the session record. When the
// reminder fires, the runtime is built if the session hibernated, and the
// callback runs outside the grain's turn (it may use the session's other
// SDK calls, which are turns of their own); before it starts, the reminder
// is moved to a lease (scheduleLease later), so a node lost during the
// callback leaves a reminder that runs it again elsewhere. The callback's
// end decides: nil completes the schedule (entry and reminder go, one
// transaction); an error retries it after a backoff, until
// scheduleMaxAttempts, after which it is dropped (logged and counted).
// A callback running pins the runtime as a running execution does.

// The bounds and decisions are the ones every grain that runs schedules
// shares (actors/app: schedule_run.go).
const (
	scheduleLease       = app.ScheduleLease
	scheduleTimeout     = app.ScheduleTimeout
	scheduleMaxAttempts = app.ScheduleMaxAttempts
	scheduleCompleted   = app.ScheduleCompleted
	scheduleDropped     = app.ScheduleDropped
	scheduleFailed      = app.ScheduleFailed
)

// scheduleBackoff is app.ScheduleBackoff.
func scheduleBackoff(attempt int) time.Duration { return app.ScheduleBackoff(attempt) }

// scheduleFired decides about a schedule's reminder (evScheduleFired): a
// session gone or ended, or a key no longer in the record, does nothing
// (the reminder completes); a callback already running moves the lease on;
// otherwise the runtime is built if need be and the callback started.
func (m *machine) scheduleFired(e event) {
	switch {
	case e.gone || !e.known:
		return
	case m.running[e.exec]:
		m.emit(action{kind: actLeaseSchedule, exec: e.exec, at: e.now.Add(scheduleLease)})
		return
	}
	m.buildAsked(event{})
	if m.running == nil {
		m.running = map[string]bool{}
	}
	m.running[e.exec] = true
	m.emit(action{kind: actRunSchedule, exec: e.exec, at: e.now.Add(scheduleLease)})
}

// scheduleDone decides about a callback's end (evScheduleDone): completed,
// retried after a backoff, or dropped after its last attempt. A schedule
// cancelled meanwhile (not known) needs nothing.
func (m *machine) scheduleDone(e event) {
	delete(m.running, e.exec)
	if !e.known {
		return
	}
	switch outcome, at := app.ScheduleEnded(e.failed, e.attempt, e.now); outcome {
	case scheduleFailed:
		m.emit(action{kind: actRetrySchedule, exec: e.exec, at: at})
	default:
		m.emit(action{kind: actCompleteSchedule, exec: e.exec, label: outcome})
	}
}
