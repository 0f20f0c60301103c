package residency

import (
	"context"
	"fmt"
	"time"
)

// DefaultEvictTimeout bounds one eviction request when
// [Evictor].Timeout is zero.
const DefaultEvictTimeout = 10 * time.Second

// EvictResult is what became of one eviction request.
type EvictResult string

// The results of an eviction request (the session host's
// mcpgrain_cap_eviction_requests_total labels).
const (
	// Evicted: the candidate disposed of its runtime.
	Evicted EvictResult = "evicted"
	// Declined: the candidate re-checked itself and kept its runtime.
	Declined EvictResult = "declined"
	// Failed: no answer (an error, the timeout, or a panic of Evict).
	Failed EvictResult = "failed"
)

// Evictor sends the eviction requests [Registry.Admit] chooses (step 2 of
// the protocol), each on its own goroutine so the cold build that chose the
// candidate never waits for it. A request that fails — an error, no answer
// within Timeout, a panic of Evict — changes nothing else: the candidate
// stays registered (only its own disposal releases it) and is skipped by
// picks until its grace window ends, and later requests are sent as
// before. The zero value is not usable: Evict is required.
type Evictor struct {
	// Evict asks the grain id to give up its runtime and reports whether
	// it did (required).
	Evict func(ctx context.Context, id string) (bool, error)
	// Timeout bounds one request (zero: DefaultEvictTimeout).
	Timeout time.Duration
	// Done, when set, hears each request's result (err is set for Failed),
	// on the request's goroutine: count it, log it.
	Done func(id string, r EvictResult, err error)
}

// Request asks the grain id to evict itself, without waiting.
func (e *Evictor) Request(id string) {
	go e.request(context.Background(), id)
}

// RequestFrom is Request on behalf of ctx: Evict's context carries ctx's
// values (its trace context: the eviction request is linked to the build
// that asked for it), not its cancellation or deadline.
func (e *Evictor) RequestFrom(ctx context.Context, id string) {
	go e.request(context.WithoutCancel(ctx), id)
}

func (e *Evictor) request(parent context.Context, id string) {
	r, err := e.send(parent, id)
	if e.Done != nil {
		e.Done(id, r, err)
	}
}

// send is one request. Evict runs on a goroutine of its own, so one that
// ignores its context is given up on at the timeout, and a panic of Evict
// is a failure, not a crash of the node (nothing else recovers there).
func (e *Evictor) send(parent context.Context, id string) (EvictResult, error) {
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultEvictTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	type answer struct {
		evicted bool
		err     error
	}
	ch := make(chan answer, 1) // the late answer of an abandoned request is dropped
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- answer{err: fmt.Errorf("panicked: %v", p)}
			}
		}()
		evicted, err := e.Evict(ctx, id)
		ch <- answer{evicted, err}
	}()
	select {
	case a := <-ch:
		switch {
		case a.err != nil:
			return Failed, fmt.Errorf("residency: eviction request to %s: %w", id, a.err)
		case a.evicted:
			return Evicted, nil
		}
		return Declined, nil
	case <-ctx.Done():
		return Failed, fmt.Errorf("residency: eviction request to %s: no answer within %s", id, timeout)
	}
}
