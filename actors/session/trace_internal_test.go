package session

import (
	"context"
	"testing"
	"time"
)

// With tracing off the executor's span hooks allocate nothing: a lease
// step (the one hook called unguarded on the lifecycle path) returns at
// once; the others are behind tracing.On().
func TestLifecycleTracingOffAllocatesNothing(t *testing.T) {
	s := &session{id: "s1"}
	ctx := context.Background()
	acts := []action{
		{kind: actSetDeadline, exec: "exec-1", at: time.UnixMilli(1)},
		{kind: actCountApproval, exec: "exec-1", label: "accept"},
		{kind: actReleaseLease, exec: "exec-1"},
		{kind: actRecordTimeout, exec: "exec-1"},
	}
	if n := testing.AllocsPerRun(1000, func() {
		for _, a := range acts {
			s.traceLease(ctx, a)
		}
	}); n != 0 {
		t.Fatalf("tracing off: %v allocations per lifecycle lease step, want 0", n)
	}
}
