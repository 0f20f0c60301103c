package session

import "time"

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

const (
	// scheduleLease is how far the reminder of a schedule whose callback
	// runs is moved: if its node is lost, it fires again then.
	scheduleLease = time.Minute
	// scheduleTimeout bounds one run of a callback (within the lease).
	scheduleTimeout = 50 * time.Second
	// scheduleMaxAttempts bounds the runs of one schedule's callback.
	scheduleMaxAttempts = 8
	// scheduleMaxBackoff caps the wait before a retry.
	scheduleMaxBackoff = 5 * time.Minute
)

// Outcomes of a schedule (label values of
// mcpgrain_sdk_schedules_total, with "failed" for a retried attempt).
const (
	scheduleCompleted = "completed"
	scheduleDropped   = "dropped"
	scheduleFailed    = "failed"
)

// scheduleBackoff is the wait before the next run after attempt failed
// (attempt counts from 1): 1s, 2s, 4s, ... up to scheduleMaxBackoff.
func scheduleBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 12 {
		return scheduleMaxBackoff
	}
	return min(time.Second<<(attempt-1), scheduleMaxBackoff)
}

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
	switch {
	case !e.known:
	case !e.failed:
		m.emit(action{kind: actCompleteSchedule, exec: e.exec, label: scheduleCompleted})
	case e.attempt >= scheduleMaxAttempts:
		m.emit(action{kind: actCompleteSchedule, exec: e.exec, label: scheduleDropped})
	default:
		m.emit(action{kind: actRetrySchedule, exec: e.exec, at: e.now.Add(scheduleBackoff(e.attempt))})
	}
}
