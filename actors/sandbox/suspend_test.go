package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The host's wait stands in for a human approval; it is the behaviour
// under test (time passing), not synchronisation.
func TestSuspendStopsTheWallClockWhileAHostWaits(t *testing.T) {
	// The run's own work must fit in the wall time on a loaded machine
	// (150 ms did not, in CI's tests step); the host's wait outlasts it.
	const wall = time.Second
	wait := func(suspend bool) HostFunc {
		return func(ctx context.Context, path string, args any) (any, error) {
			if suspend {
				resume := Suspend(ctx)
				defer resume()
			}
			select {
			case <-time.After(wall + wall/2): // the host's wait (not a synchronisation): longer than the wall time
				return "approved", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	lim := Limits{WallTime: wall}
	res, err := Run(t.Context(), `return await tools.wait()`, wait(true), lim)
	if err != nil || res.Value != "approved" {
		t.Fatalf("suspended wait: %v %v", res.Value, err)
	}
	_, err = Run(t.Context(), `return await tools.wait()`, wait(false), lim)
	checkLimit(t, err, LimitWallTime, "timed out")
	// The clock runs again after the wait: code that loops afterwards
	// still times out.
	_, err = Run(t.Context(), `await tools.wait(); while (true) {}`, wait(true), lim)
	checkLimit(t, err, LimitWallTime, "timed out")
	// Suspend on a context that is not an execution's does nothing.
	Suspend(context.Background())()
}

// A parked execution whose wait ends — its decision came, or its context
// was cancelled with the runtime that ran it — counts as running again,
// and holds its slot, until its Run returned and released it: the node's
// running count cannot tell it from a fresh execution. (gateway
// TestDecidedPauseWaitingForASlotPinsItsRuntime once read a hibernated
// session's cancelled execution, still unwinding, as the loop it had just
// started; it now waits for the count to drop to zero first.)
func TestAParkedExecutionWhoseWaitEndedHoldsItsSlotUntilReleased(t *testing.T) {
	p, _ := newTestPool(t, PoolOptions{MaxRunning: 1, SlotWait: -1, Spares: -1})
	check := func(what string, running, parked int) {
		t.Helper()
		if st := p.Stats(); st.Running != running || st.Parked != parked {
			t.Fatalf("%s: running %d, parked %d; want %d, %d", what, st.Running, st.Parked, running, parked)
		}
	}
	s, err := p.admit(t.Context(), claimOf(Limits{Tenant: "acme/alice", Org: "acme"}), false)
	if err != nil {
		t.Fatal(err)
	}
	check("admitted", 1, 0)
	s.park()
	check("parked", 0, 1)
	s.unpark() // what Suspend's resume does when the host's wait ends, cancelled or not
	check("its wait ended", 1, 0)
	var busy *Error
	if _, err := p.admit(t.Context(), claimOf(Limits{Tenant: "globex/carol", Org: "globex"}), false); !errors.As(err, &busy) || busy.Kind != KindBusy {
		t.Fatalf("another organization's execution while the only slot is held: %v, want busy", err)
	}
	s.release() // its Run returned
	check("its run returned", 0, 0)
}
