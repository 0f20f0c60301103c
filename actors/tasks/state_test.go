package tasks

import (
	"testing"
	"time"
)

func TestStepTransitions(t *testing.T) {
	for _, c := range []struct {
		from    Status
		e       Event
		to      Status
		changed bool
		err     bool
	}{
		{Working, NeedInput, InputRequired, true, false},
		{Working, Finish, Completed, true, false},
		{Working, Fail, Failed, true, false},
		{Working, Cancel, Cancelled, true, false},
		{Working, InputComplete, Working, false, true},
		{InputRequired, InputComplete, Working, true, false},
		{InputRequired, Cancel, Cancelled, true, false},
		{InputRequired, Fail, Failed, true, false},
		{InputRequired, Finish, InputRequired, false, true},
		{InputRequired, NeedInput, InputRequired, false, true},
		// Terminal tasks never change; cancelling one is an idempotent no-op.
		{Completed, Cancel, Completed, false, false},
		{Failed, Cancel, Failed, false, false},
		{Cancelled, Cancel, Cancelled, false, false},
		{Cancelled, Finish, Cancelled, false, true},
		{Cancelled, Fail, Cancelled, false, true},
		{Completed, NeedInput, Completed, false, true},
		{Failed, InputComplete, Failed, false, true},
	} {
		to, changed, err := Step(c.from, c.e)
		if to != c.to || changed != c.changed || (err != nil) != c.err {
			t.Errorf("Step(%s, %s) = %s, %v, %v; want %s, %v, error %v", c.from, c.e, to, changed, err, c.to, c.changed, c.err)
		}
	}
}

func TestTerminalStatuses(t *testing.T) {
	for s, want := range map[Status]bool{Working: false, InputRequired: false, Completed: true, Failed: true, Cancelled: true} {
		if s.Terminal() != want {
			t.Errorf("%s.Terminal() = %v, want %v", s, s.Terminal(), want)
		}
	}
}

func TestAfterLossRerunsOnlySafeToolsAFewTimes(t *testing.T) {
	for _, c := range []struct {
		runs        int
		restartable bool
		want        Loss
	}{
		{1, true, Rerun},
		{MaxRuns - 1, true, Rerun},
		{MaxRuns, true, FailLost},
		{1, false, FailLost},
		{MaxRuns + 3, false, FailLost},
	} {
		if got := afterLoss(c.runs, c.restartable); got != c.want {
			t.Errorf("afterLoss(%d, %v) = %v, want %v", c.runs, c.restartable, got, c.want)
		}
	}
}

func TestHandoverWaitsForTheLeaseOfADrainingRun(t *testing.T) {
	now := time.UnixMilli(1_900_000_000_000)
	for _, c := range []struct {
		status     Status
		runsHere   bool
		leaseUntil time.Time
		want       Handover
	}{
		{Working, true, time.Time{}, Idle},
		{Working, true, now.Add(time.Second), Idle},
		{InputRequired, false, time.Time{}, Idle},
		{Completed, false, now.Add(time.Second), Idle},
		{Failed, false, time.Time{}, Idle},
		// A stopping activation drains its run: the lease holds it.
		{Working, false, now.Add(time.Second), Draining},
		// Its lease ran out, or none was taken (the node died).
		{Working, false, now, Lost},
		{Working, false, now.Add(-time.Second), Lost},
		{Working, false, time.Time{}, Lost},
	} {
		if got := handover(c.status, c.runsHere, c.leaseUntil, now); got != c.want {
			t.Errorf("handover(%s, %v, %v) = %v, want %v", c.status, c.runsHere, c.leaseUntil.Sub(now), got, c.want)
		}
	}
}
