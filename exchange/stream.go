package exchange

import (
	"github.com/asynkron/protoactor-go/actor"
)

// streamActor is the per-request actor a session grain streams an HTTP
// response to. It hands every message to the HTTP handler goroutine.
type streamActor struct {
	ch   chan<- any
	done <-chan struct{}
	// watched is the activation it watches: protoactor does not unwatch
	// when the watcher stops, and the activation would keep this dead
	// actor in its watcher set (one per request, for its whole life).
	watched *actor.PID
}

func (a *streamActor) deliver(m any) {
	select {
	case a.ch <- m:
	case <-a.done: // the HTTP handler is gone
	}
}

// watchGrain asks the stream actor to watch the session activation, so a
// dead activation (or node) ends the response instead of hanging it.
type watchGrain struct{ pid *actor.PID }

// grainGone is delivered when the watched activation terminated.
type grainGone struct{}

func (a *streamActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *watchGrain:
		a.watched = m.pid
		ctx.Watch(m.pid)
	case *actor.Terminated:
		a.watched = nil
		a.deliver(grainGone{})
	case *actor.Stopping:
		if a.watched != nil {
			ctx.Unwatch(a.watched)
		}
	case *actor.Started, *actor.Stopped, *actor.Restarting:
	default:
		a.deliver(m)
	}
}

// responseStream is the gateway end of one tunnelled exchange.
type responseStream struct {
	system *actor.ActorSystem
	pid    *actor.PID
	ch     chan any
	done   chan struct{}
}

func newResponseStream(system *actor.ActorSystem) *responseStream {
	ch, done := make(chan any, 64), make(chan struct{})
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &streamActor{ch: ch, done: done} }))
	return &responseStream{system: system, pid: pid, ch: ch, done: done}
}

func (s *responseStream) watch(grainPID *actor.PID) {
	s.system.Root.Send(s.pid, &watchGrain{pid: grainPID})
}

func (s *responseStream) close() {
	close(s.done) // unblocks the actor if it waits to hand over a message
	s.system.Root.Stop(s.pid)
}
