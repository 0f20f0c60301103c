// Package alarm decides what a session's idle alarm does when it fires:
// executor's decideSessionAlarm (executor session-alarm-policy.ts) as a pure
// function. The session grain feeds it the idle time and what is in flight;
// it answers keep, extend a lease, or passivate.
//
// Seed term mapping: the Durable Object "alarm" is our idle alarm, an
// in-memory timer of the session's activation (not a durable reminder: it
// only ever disposes a resident runtime, which does not outlive its node);
// "destroy_idle_session" does not delete anything — it passivates the grain
// (dispose the runtime, keep the record), exactly as executor's DO keeps its
// session meta so the next request cold-restores.
package alarm

import "time"

// Outcome is what the idle alarm should do.
type Outcome string

// Executor's four outcomes.
const (
	// IdleWithinTimeout: the session was active recently; re-arm for
	// lastActivity + SessionTimeout.
	IdleWithinTimeout Outcome = "idle_within_timeout"
	// ExtendPausedLease: idle past the timeout but an execution is paused
	// waiting for approval; keep the runtime for Decision.Lease more.
	ExtendPausedLease Outcome = "extend_paused_lease"
	// ExtendRunningLease: idle past the timeout but an execution is running
	// or a stream is open; keep the runtime for Decision.Lease more.
	ExtendRunningLease Outcome = "extend_running_lease"
	// DestroyIdleSession: passivate — dispose the runtime, keep the record.
	DestroyIdleSession Outcome = "destroy_idle_session"
)

// Seed constants (executor-behaviour.md §5). DefaultPausedLease is also
// the default approval window (engine.DefaultApprovalWindow): a paused
// execution waits for its decision as long as its lease lasts.
const (
	DefaultSessionTimeout = 5 * time.Minute                            // SESSION_TIMEOUT_MS
	DefaultPausedLease    = 4 * time.Minute                            // PAUSED_EXECUTION_LEASE_MS
	DefaultRunningLease   = 4 * time.Minute                            // RUNNING_EXECUTION_LEASE_MS
	DefaultMaxPausedIdle  = DefaultSessionTimeout + DefaultPausedLease // 9 min, MAX_PAUSED_SESSION_IDLE_MS
	DefaultSSEMaxAge      = 30 * time.Minute                           // SSE_MAX_AGE_MS
	DefaultMaxRunningIdle = DefaultSessionTimeout + DefaultSSEMaxAge   // 35 min, MAX_RUNNING_SESSION_IDLE_MS
	minLease              = time.Millisecond                           // executor's max(1, …) in ms
)

// Policy holds the thresholds. The zero value is not useful; start from
// [DefaultPolicy] and override fields (flags/env in the node config).
type Policy struct {
	// SessionTimeout: idle shorter than this keeps the session as is.
	SessionTimeout time.Duration
	// PausedLease is the longest single extension while executions are paused.
	PausedLease time.Duration
	// MaxPausedIdle: with paused executions, idle at or beyond this passivates.
	MaxPausedIdle time.Duration
	// RunningLease is the longest single extension while work is running.
	RunningLease time.Duration
	// MaxRunningIdle: with running work or open streams, idle at or beyond
	// this passivates.
	MaxRunningIdle time.Duration
}

// DefaultPolicy returns executor's production constants.
func DefaultPolicy() Policy {
	return Policy{
		SessionTimeout: DefaultSessionTimeout,
		PausedLease:    DefaultPausedLease,
		MaxPausedIdle:  DefaultMaxPausedIdle,
		RunningLease:   DefaultRunningLease,
		MaxRunningIdle: DefaultMaxRunningIdle,
	}
}

// Input is what the session knows when its idle alarm fires.
type Input struct {
	// Idle is now minus the last activity (0 if there was none).
	Idle time.Duration
	// Paused is the number of executions paused for approval that live
	// only in memory: they extend the session's residency.
	Paused int
	// DurablePaused is the number of durable paused executions (journaled;
	// a fresh runtime restores them by replay). They do not keep the
	// session resident: their approval reminders wake it.
	DurablePaused int
	// Running is the number of executions still running.
	Running int
	// Streams is the number of open response streams.
	Streams int
}

// Decision is the policy's answer.
type Decision struct {
	Outcome Outcome
	// Lease is the extension for the two extend outcomes, else zero.
	Lease time.Duration
}

// Decide applies executor's table:
//
//	idle < SessionTimeout                       → idle_within_timeout
//	paused > 0: idle < MaxPausedIdle            → extend_paused_lease(min(PausedLease, MaxPausedIdle-idle))
//	            else                            → destroy (paused wins over running/streams)
//	(durable pauses count for nothing: they survive passivation)
//	(running > 0 || streams > 0) && idle < MaxRunningIdle
//	                                            → extend_running_lease(min(RunningLease, MaxRunningIdle-idle))
//	else                                        → destroy
//
// Leases are at least 1 ms.
func (p Policy) Decide(in Input) Decision {
	if in.Idle < p.SessionTimeout {
		return Decision{Outcome: IdleWithinTimeout}
	}
	if in.Paused > 0 {
		if in.Idle < p.MaxPausedIdle {
			return Decision{Outcome: ExtendPausedLease, Lease: lease(p.PausedLease, p.MaxPausedIdle-in.Idle)}
		}
		return Decision{Outcome: DestroyIdleSession}
	}
	if (in.Running > 0 || in.Streams > 0) && in.Idle < p.MaxRunningIdle {
		return Decision{Outcome: ExtendRunningLease, Lease: lease(p.RunningLease, p.MaxRunningIdle-in.Idle)}
	}
	return Decision{Outcome: DestroyIdleSession}
}

func lease(max, remaining time.Duration) time.Duration {
	return maxDur(minLease, min(max, remaining))
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
