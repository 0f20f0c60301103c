package app

import "time"

// How a grain runs the schedules it carries (sessions, handles): the
// bounds and the pure decisions they share. Before its callback starts, a
// due schedule's reminder is moved to a lease (ScheduleLease later), so a
// node lost during the callback leaves a reminder that runs it again
// elsewhere; the callback's end decides ([ScheduleEnded]).
const (
	// ScheduleLease is how far the reminder of a schedule whose callback
	// runs is moved: if its node is lost, it fires again then.
	ScheduleLease = time.Minute
	// ScheduleTimeout bounds one run of a callback (within the lease).
	ScheduleTimeout = 50 * time.Second
	// ScheduleMaxAttempts bounds the runs of one schedule's callback.
	ScheduleMaxAttempts = 8
	// ScheduleMaxBackoff caps the wait before a retry.
	ScheduleMaxBackoff = 5 * time.Minute
)

// Outcomes of a callback's run (label values of the schedule metrics).
const (
	ScheduleCompleted = "completed" // returned nil: the schedule is done
	ScheduleDropped   = "dropped"   // failed its last attempt: the schedule is dropped
	ScheduleFailed    = "failed"    // failed: retried after a backoff
)

// ScheduleBackoff is the wait before the next run after attempt failed
// (attempt counts from 1): 1s, 2s, 4s, ... up to ScheduleMaxBackoff.
func ScheduleBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 12 {
		return ScheduleMaxBackoff
	}
	return min(time.Second<<(attempt-1), ScheduleMaxBackoff)
}

// ScheduleEnded decides about the end of attempt (from 1) of a callback,
// at now: [ScheduleCompleted] if it did not fail, [ScheduleDropped] if it
// failed its last attempt, otherwise [ScheduleFailed] with the time of
// the retry.
func ScheduleEnded(failed bool, attempt int, now time.Time) (outcome string, retryAt time.Time) {
	switch {
	case !failed:
		return ScheduleCompleted, time.Time{}
	case attempt >= ScheduleMaxAttempts:
		return ScheduleDropped, time.Time{}
	}
	return ScheduleFailed, now.Add(ScheduleBackoff(attempt))
}
