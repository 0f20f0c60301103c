// Package clock abstracts time so timing-dependent logic (reminders, idle
// leases, approval deadlines) can be tested with a fake clock instead of
// sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells time and runs functions later.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc runs f in its own goroutine after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the function from running; it reports whether it did.
	Stop() bool
}

// Real returns the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a manual clock for tests. Time moves only with [Fake.Advance] or
// [Fake.Set], which run every timer that became due, in due order, each in
// the calling goroutine (so a test knows they ran when Advance returns).
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	seq    int
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

type fakeTimer struct {
	c       *Fake
	at      time.Time
	seq     int
	f       func()
	stopped bool
}

// Now implements [Clock].
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements [Clock]. A non-positive d runs f at the next Advance
// (even Advance(0)).
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop implements [Timer].
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.stopped {
		return false
	}
	t.stopped = true
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			break
		}
	}
	return true
}

// Advance moves time forward by d, running due timers.
func (c *Fake) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves time to t (never backwards), running due timers in order;
// timers they arm that are also due run too.
func (c *Fake) Set(t time.Time) {
	for {
		c.mu.Lock()
		// Step to each due timer so Now() inside a timer is its due time.
		sort.SliceStable(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		if len(c.timers) == 0 || c.timers[0].at.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next := c.timers[0]
		c.timers = c.timers[1:]
		next.stopped = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// Pending returns how many timers are armed.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// PendingAt returns how many armed timers are due exactly at t: a test
// asks after one timer while others (an idle timer, a node's tick) may be
// armed concurrently.
func (c *Fake) PendingAt(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.timers {
		if x.at.Equal(t) {
			n++
		}
	}
	return n
}
