package session

import (
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/app"
)

func fired(key string) event {
	return event{kind: evScheduleFired, exec: key, now: mt0, known: true}
}

func scheduleEnded(key string, attempt int, failed bool) event {
	return event{kind: evScheduleDone, exec: key, now: mt0, known: true, attempt: attempt, failed: failed}
}

func TestMachineSchedules(t *testing.T) {
	built1 := mstep{built(), "unpark mark arm-idle#1+5m0s"}
	for _, tc := range []struct {
		name     string
		steps    []mstep
		resident bool
		pinD     int // running callbacks pin as handed-over executions do
	}{
		{name: "a schedule due on a hibernated session builds the runtime, leases the reminder and runs the callback, which pins",
			steps:    []mstep{{fired("k"), "build run-schedule:k+1m0s"}, built1},
			resident: true, pinD: 1},
		{name: "a schedule due on a resident session runs at once",
			steps:    []mstep{built1, {fired("k"), "run-schedule:k+1m0s"}},
			resident: true, pinD: 1},
		{name: "a callback that returned nil completes the schedule and unpins",
			steps:    []mstep{built1, {fired("k"), "run-schedule:k+1m0s"}, {scheduleEnded("k", 1, false), "complete-schedule:k:completed"}},
			resident: true},
		{name: "a failed callback retries after a backoff that doubles",
			steps: []mstep{built1, {fired("k"), "run-schedule:k+1m0s"}, {scheduleEnded("k", 1, true), "retry-schedule:k+1s"},
				{fired("k"), "run-schedule:k+1m0s"}, {scheduleEnded("k", 2, true), "retry-schedule:k+2s"},
				{fired("k"), "run-schedule:k+1m0s"}, {scheduleEnded("k", 3, true), "retry-schedule:k+4s"}},
			resident: true},
		{name: "the last attempt's failure drops the schedule",
			steps:    []mstep{built1, {fired("k"), "run-schedule:k+1m0s"}, {scheduleEnded("k", scheduleMaxAttempts, true), "complete-schedule:k:dropped"}},
			resident: true},
		{name: "the reminder firing again while the callback runs moves the lease on and starts nothing",
			steps:    []mstep{built1, {fired("k"), "run-schedule:k+1m0s"}, {fired("k"), "lease-schedule:k+1m0s"}},
			resident: true, pinD: 1},
		{name: "a schedule cancelled while its callback ran needs nothing when it ends",
			steps:    []mstep{built1, {fired("k"), "run-schedule:k+1m0s"}, {event{kind: evScheduleDone, exec: "k", now: mt0}, ""}},
			resident: true},
		{name: "a reminder of an ended or unknown session, or of a schedule no longer pending, does nothing",
			steps: []mstep{{event{kind: evScheduleFired, exec: "k", gone: true}, ""}, {event{kind: evScheduleFired, exec: "k"}, ""},
				{turnDone(0), "passivate:idle"}}},
		{name: "a failed build leaves nothing running (the reminder fires again)",
			steps: []mstep{{fired("k"), "build run-schedule:k+1m0s"}, {buildFailed(), ""}, {fired("k"), "build run-schedule:k+1m0s"}, {buildFailed(), ""}}},
		{name: "a running callback keeps the idle alarm from disposing the runtime",
			steps: []mstep{built1, {fired("k"), "run-schedule:k+1m0s"},
				{idleAt(1, 10*time.Minute, alarm.Input{}), "extend:extend_running_lease+4m0s persist arm-idle#2+14m0s count-idle"}},
			resident: true, pinD: 1},
		{name: "deleting the session disposes the runtime under a running callback, whose end then needs nothing",
			steps: []mstep{built1, {fired("k"), "run-schedule:k+1m0s"}, {dispose(DisposeDelete), "dispose:delete[]"},
				{event{kind: evScheduleDone, exec: "k", now: mt0, failed: true, attempt: 1}, ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(&Config{Policy: alarm.DefaultPolicy(), SessionTTL: 24 * time.Hour, TombstoneRetention: time.Hour})
			for i, s := range tc.steps {
				got := show(m.step(s.e))
				m.done()
				if got != s.want {
					t.Fatalf("step %d (event %d %s): actions %q, want %q", i, s.e.kind, s.e.exec, got, s.want)
				}
			}
			if m.resident != tc.resident {
				t.Errorf("resident %v, want %v", m.resident, tc.resident)
			}
			if _, d := m.pins(); d != tc.pinD {
				t.Errorf("pins (decided) = %d, want %d", d, tc.pinD)
			}
		})
	}
}

func TestScheduleBackoff(t *testing.T) {
	for attempt, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 9: 256 * time.Second, 10: app.ScheduleMaxBackoff, 40: app.ScheduleMaxBackoff} {
		if got := scheduleBackoff(attempt); got != want {
			t.Errorf("scheduleBackoff(%d) = %s, want %s", attempt, got, want)
		}
	}
}
