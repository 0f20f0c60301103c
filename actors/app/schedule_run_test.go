package app_test

import (
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

func TestScheduleEnded(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		failed  bool
		attempt int
		outcome string
		retryAt time.Time
	}{
		{"completed", false, 1, app.ScheduleCompleted, time.Time{}},
		{"completed on the last attempt", false, app.ScheduleMaxAttempts, app.ScheduleCompleted, time.Time{}},
		{"first failure", true, 1, app.ScheduleFailed, now.Add(time.Second)},
		{"third failure", true, 3, app.ScheduleFailed, now.Add(4 * time.Second)},
		{"last attempt failed", true, app.ScheduleMaxAttempts, app.ScheduleDropped, time.Time{}},
		{"past the last attempt", true, app.ScheduleMaxAttempts + 3, app.ScheduleDropped, time.Time{}},
	} {
		outcome, at := app.ScheduleEnded(c.failed, c.attempt, now)
		if outcome != c.outcome || !at.Equal(c.retryAt) {
			t.Errorf("%s: ScheduleEnded = %s, %v; want %s, %v", c.name, outcome, at, c.outcome, c.retryAt)
		}
	}
}

func TestScheduleBackoff(t *testing.T) {
	for attempt, want := range map[int]time.Duration{
		-1: time.Second, 0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		8: 128 * time.Second, 9: 256 * time.Second, 10: app.ScheduleMaxBackoff, 12: app.ScheduleMaxBackoff, 100: app.ScheduleMaxBackoff,
	} {
		if got := app.ScheduleBackoff(attempt); got != want {
			t.Errorf("ScheduleBackoff(%d) = %s, want %s", attempt, got, want)
		}
	}
}
