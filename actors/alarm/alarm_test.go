package alarm

import (
	"testing"
	"time"
)

const ms = time.Millisecond

// Executor's 12 cases (session-alarm-policy.test.ts), plus edges.
func TestDecide(t *testing.T) {
	def := DefaultPolicy()
	small := func(timeout, maxPaused, maxRunning time.Duration) Policy {
		p := DefaultPolicy()
		p.SessionTimeout, p.MaxPausedIdle, p.MaxRunningIdle = timeout, maxPaused, maxRunning
		return p
	}
	cases := []struct {
		name string
		p    Policy
		in   Input
		want Decision
	}{
		{"1 idle below timeout, nothing paused", def, Input{Idle: def.SessionTimeout - ms}, Decision{Outcome: IdleWithinTimeout}},
		{"2 idle below timeout with 3 paused", def, Input{Idle: def.SessionTimeout - ms, Paused: 3}, Decision{Outcome: IdleWithinTimeout}},
		{"3 idle == timeout, nothing paused", def, Input{Idle: def.SessionTimeout}, Decision{Outcome: DestroyIdleSession}},
		{"4 idle == timeout, 1 paused", def, Input{Idle: def.SessionTimeout, Paused: 1}, Decision{ExtendPausedLease, 240000 * ms}},
		{"5 lease capped by remaining paused time", small(3000*ms, 6000*ms, DefaultMaxRunningIdle), Input{Idle: 3000 * ms, Paused: 1}, Decision{ExtendPausedLease, 3000 * ms}},
		{"6 idle == max paused with paused work", def, Input{Idle: 540000 * ms, Paused: 1}, Decision{Outcome: DestroyIdleSession}},
		{"7 paused clock wins over running and streams", def, Input{Idle: 540000 * ms, Paused: 1, Running: 1, Streams: 1}, Decision{Outcome: DestroyIdleSession}},
		{"8 idle == timeout, 1 running", def, Input{Idle: def.SessionTimeout, Running: 1}, Decision{ExtendRunningLease, 240000 * ms}},
		{"9 idle == timeout, 1 stream", def, Input{Idle: def.SessionTimeout, Streams: 1}, Decision{ExtendRunningLease, 240000 * ms}},
		{"10 running lease capped by remaining", small(3000*ms, DefaultMaxPausedIdle, 8000*ms), Input{Idle: 5000 * ms, Running: 1}, Decision{ExtendRunningLease, 3000 * ms}},
		{"11 idle == max running with running work", def, Input{Idle: 35 * time.Minute, Running: 1}, Decision{Outcome: DestroyIdleSession}},
		{"12 idle == max running with an open stream", def, Input{Idle: 35 * time.Minute, Streams: 1}, Decision{Outcome: DestroyIdleSession}},
		{"lease is at least 1ms", small(10*ms, 10*ms+ms/2, DefaultMaxRunningIdle), Input{Idle: 10 * ms, Paused: 1}, Decision{ExtendPausedLease, ms}},
		{"zero idle is within timeout", def, Input{}, Decision{Outcome: IdleWithinTimeout}},
		{"durable pauses alone passivate at the timeout", def, Input{Idle: def.SessionTimeout, DurablePaused: 2}, Decision{Outcome: DestroyIdleSession}},
		{"durable pauses within timeout stay", def, Input{Idle: def.SessionTimeout - ms, DurablePaused: 1}, Decision{Outcome: IdleWithinTimeout}},
		{"in-memory pause beside durable ones still extends", def, Input{Idle: def.SessionTimeout, Paused: 1, DurablePaused: 1}, Decision{ExtendPausedLease, 240000 * ms}},
		{"durable pause with running work extends the running lease", def, Input{Idle: def.SessionTimeout, DurablePaused: 1, Running: 1}, Decision{ExtendRunningLease, 240000 * ms}},
		{"constants", def, Input{Idle: 9*time.Minute - ms, Paused: 1}, Decision{ExtendPausedLease, ms}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Decide(tc.in); got != tc.want {
				t.Fatalf("Decide(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
	if DefaultMaxPausedIdle != 540*time.Second || DefaultMaxRunningIdle != 2100*time.Second {
		t.Fatal("seed constants changed")
	}
}
