package placement

import (
	"context"
	"sync"
)

// stopCtx is an activation's context, cancelled when the activation
// stops. It is what context.WithCancel(context.Background()) gives, but
// its children cost nothing once they end: a child of a context.cancelCtx
// is kept in a map the parent makes on the first child and keeps for its
// life (~0.25 KB for each resident activation, whose every store write
// derives a context with a timeout). A stopCtx instead implements
// AfterFunc, which package context uses to tie a child to it, and drops
// its registrations when the last is stopped.
type stopCtx struct {
	context.Context // Background: no deadline, no values

	mu    sync.Mutex
	done  chan struct{} // made by Done
	err   error
	after map[*afterFunc]struct{} // registered by AfterFunc, not yet run or stopped; nil when empty
}

type afterFunc struct{ f func() }

func newStopCtx() *stopCtx { return &stopCtx{Context: context.Background()} }

// Done implements context.Context.
func (c *stopCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedDone
		}
		c.done = make(chan struct{})
	}
	return c.done
}

// closedDone is Done after the cancellation, when nobody asked before.
var closedDone = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// Err implements context.Context.
func (c *stopCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc arranges for f to run once c is cancelled (at once, if it
// is), as context.AfterFunc does; stop unregisters it and reports
// whether it did so before f was started.
func (c *stopCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	if c.after == nil {
		c.after = map[*afterFunc]struct{}{}
	}
	c.after[a] = struct{}{}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.after[a]; !ok {
			return false
		}
		delete(c.after, a)
		if len(c.after) == 0 {
			c.after = nil
		}
		return true
	}
}

// cancel cancels c (once) and runs what AfterFunc registered, each in a
// goroutine of its own (as context.AfterFunc promises).
func (c *stopCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	fns := c.after
	c.after = nil
	c.mu.Unlock()
	for a := range fns {
		go a.f()
	}
}
