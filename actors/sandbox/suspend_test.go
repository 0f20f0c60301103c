package sandbox

import (
	"context"
	"testing"
	"time"
)

// The host's wait stands in for a human approval; it is the behaviour
// under test (time passing), not synchronisation.
func TestSuspendStopsTheWallClockWhileAHostWaits(t *testing.T) {
	wait := func(suspend bool) HostFunc {
		return func(ctx context.Context, path string, args any) (any, error) {
			if suspend {
				resume := Suspend(ctx)
				defer resume()
			}
			select {
			case <-time.After(400 * time.Millisecond):
				return "approved", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	lim := Limits{WallTime: 150 * time.Millisecond}
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
