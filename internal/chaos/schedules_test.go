package chaos

import (
	"slices"
	"testing"
	"time"
)

func TestSchedulesOnce(t *testing.T) {
	due := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	on := Fire{Due: due, At: due.Add(300 * time.Millisecond)}
	for _, tc := range []struct {
		name  string
		ops   []ScheduleOp
		fired map[string]Fire
		want  []string
	}{
		{"clean", []ScheduleOp{{Key: "a", Acked: true}, {Key: "b"}}, map[string]Fire{"a": on}, nil},
		{"an unknown outcome fired", []ScheduleOp{{Key: "b"}}, map[string]Fire{"b": on}, nil},
		{"acknowledged, never fired", []ScheduleOp{{Key: "a", Acked: true}}, nil, []string{"schedule a: acknowledged, never fired"}},
		{"early", []ScheduleOp{{Key: "a", Acked: true}}, map[string]Fire{"a": {Due: due, At: due.Add(-time.Second)}},
			[]string{"schedule a: fired at 04:59:59.000, before it was due (05:00:00.000)"}},
		{"never scheduled", nil, map[string]Fire{"z": on}, []string{"schedule z: fired, never scheduled"}},
	} {
		if got := SchedulesOnce(tc.ops, tc.fired); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	worst, n := ScheduleLatency([]ScheduleOp{{Key: "a"}, {Key: "b"}, {Key: "c"}}, map[string]Fire{"a": on, "b": {Due: due, At: due.Add(2 * time.Second)}})
	if worst != 2*time.Second || n != 2 {
		t.Errorf("latency %s of %d, want 2s of 2", worst, n)
	}
}
