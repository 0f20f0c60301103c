// Package dispatch runs actors' mailboxes on goroutines kept for reuse.
//
// protoactor's default dispatcher starts a goroutine every time a mailbox
// has messages to process. A new goroutine starts with a small stack, and
// a grain's turn (a store write, go-sdk's handler, protobuf) is deep: the
// stack is grown by copying, several times, on every turn — a tenth of
// the CPU of creating a session. A warm dispatcher hands the work to an
// idle goroutine of an earlier turn when there is one, whose stack is
// already grown, and starts a new one only when none is idle. For a
// goroutine that is not ours to reuse (go-sdk's per-request handler),
// GrowStack grows the stack once while it is shallow.
package dispatch

import "github.com/asynkron/protoactor-go/actor"

// Warm is an actor.Dispatcher that reuses goroutines. Scheduling never
// blocks and never waits for a goroutine to be free: with none idle it
// starts one, as protoactor's default dispatcher does. At most maxIdle
// goroutines wait for work; one that finds the idle list full ends.
type Warm struct {
	idle       chan chan func()
	throughput int
}

var _ actor.Dispatcher = (*Warm)(nil)

// NewWarm returns a warm dispatcher keeping up to maxIdle goroutines idle,
// whose mailboxes process up to throughput messages in a turn (protoactor's
// default is 300).
func NewWarm(maxIdle, throughput int) *Warm {
	return &Warm{idle: make(chan chan func(), maxIdle), throughput: throughput}
}

// Schedule runs fn on an idle goroutine, or on a new one.
func (d *Warm) Schedule(fn func()) {
	select {
	case w := <-d.idle:
		w <- fn // buffered: the goroutine takes it when it gets there
	default:
		go d.work(fn)
	}
}

// Idle is how many goroutines wait for work.
func (d *Warm) Idle() int { return len(d.idle) }

// Throughput implements actor.Dispatcher.
func (d *Warm) Throughput() int { return d.throughput }

// work runs fn, then whatever it is handed while it waits on the idle
// list, until the list is full when it looks for more.
func (d *Warm) work(fn func()) {
	next := make(chan func(), 1)
	for {
		fn()
		select {
		case d.idle <- next:
		default:
			return
		}
		fn = <-next
	}
}
