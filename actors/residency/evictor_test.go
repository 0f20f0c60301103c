package residency

import (
	"context"
	"errors"
	"testing"
	"time"
)

type evictDone struct {
	id  string
	r   EvictResult
	err error
}

// An eviction request that fails (issue 27 edge; executor's
// mcp_session_cap_eviction_request_failed) — an error, a panic of the
// request, or no answer at all — is reported as failed; the candidate
// stays registered and is skipped until its grace window ends; the evictor
// goes on: the next admission's request to another candidate is sent and
// evicts it.
func TestFailedEvictionRequestKeepsTheEntryAndTheEvictorGoesOn(t *testing.T) {
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	for _, tc := range []struct {
		name  string
		evict func(ctx context.Context) (bool, error)
	}{
		{"error", func(context.Context) (bool, error) { return false, errors.New("grain request timed out") }},
		{"panic", func(context.Context) (bool, error) { panic("eviction request blew up") }},
		{"no answer", func(context.Context) (bool, error) { <-hung; return true, nil }}, // ignores its context
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := reg(t, 2, "A", "B", "C")
			done := make(chan evictDone, 2)
			ev := &Evictor{
				Timeout: 50 * time.Millisecond,
				Evict: func(ctx context.Context, id string) (bool, error) {
					if id == "A" {
						return tc.evict(ctx)
					}
					r.Release(id) // the candidate disposes of its runtime
					return true, nil
				},
				Done: func(id string, res EvictResult, err error) { done <- evictDone{id, res, err} },
			}
			adm := r.Admit(at(1000))
			adm.Slot.Release()
			if adm.Evict != "A" {
				t.Fatalf("Admit chose %q, want A", adm.Evict)
			}
			ev.Request(adm.Evict)
			if d := waitDone(t, done); d.id != "A" || d.r != Failed || d.err == nil {
				t.Fatalf("A's request: %+v, want failed with its error", d)
			}
			checkCounts(t, r, at(1000), Counts{Resident: 3, Peak: 3, Evictable: 3, EvictionPending: 1})

			adm = r.Admit(at(1001))
			adm.Slot.Release()
			if adm.Evict != "B" {
				t.Fatalf("the next Admit chose %q, want B (A is inside its grace window)", adm.Evict)
			}
			ev.Request(adm.Evict)
			if d := waitDone(t, done); d.id != "B" || d.r != Evicted || d.err != nil {
				t.Fatalf("B's request: %+v, want evicted", d)
			}
			checkCounts(t, r, at(1001), Counts{Resident: 2, Peak: 3, Evictable: 2, EvictionPending: 1})
			if id, ok := r.Pick(at(1000 + DefaultEvictionGrace.Milliseconds())); !ok || id != "A" {
				t.Fatalf("Pick after A's grace = %q, %v; want A again", id, ok)
			}
		})
	}
}

// waitDone waits for an eviction request's result; 30 s is far past any
// request's 50 ms timeout, so running out means the request was never
// given up on.
func waitDone(t *testing.T, done <-chan evictDone) evictDone {
	t.Helper()
	select {
	case d := <-done:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("no result from the eviction request: the evictor is stuck on it")
		return evictDone{}
	}
}
