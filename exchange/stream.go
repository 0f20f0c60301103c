package exchange

import (
	"github.com/asynkron/protoactor-go/actor"
)

// streamActor is the per-request actor a session grain streams an HTTP
// response to. It hands every message to the HTTP handler goroutine.
type streamActor struct {
	ch   chan<- any
	done <-chan struct{}
}

func (a *streamActor) deliver(m any) {
	select {
	case a.ch <- m:
	case <-a.done: // the HTTP handler is gone
	}
}

// grainGone is delivered (by the followers) when the activation the
// response comes from terminated.
type grainGone struct{}

func (a *streamActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Restarting:
	case *actor.Stopped:
		// A dead actor's PID may stay reachable (in a watcher set, a
		// cached PID): keep nothing of the response alive through it.
		a.ch, a.done = nil, nil
	default:
		a.deliver(m)
	}
}

// responseStream is the gateway end of one tunnelled exchange.
type responseStream struct {
	system    *actor.ActorSystem
	followers *followers
	pid       *actor.PID
	ch        chan any
	done      chan struct{}
	grain     *actor.PID // the activation followed, or nil
}

func newResponseStream(system *actor.ActorSystem, f *followers) *responseStream {
	ch, done := make(chan any, 64), make(chan struct{})
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &streamActor{ch: ch, done: done} }))
	return &responseStream{system: system, followers: f, pid: pid, ch: ch, done: done}
}

// watch follows the session activation, so a dead activation (or node)
// ends the response instead of hanging it.
func (s *responseStream) watch(grainPID *actor.PID) {
	s.grain = grainPID
	s.followers.follow(grainPID, s.pid)
}

func (s *responseStream) close() {
	if s.grain != nil {
		s.followers.unfollow(s.grain, s.pid)
	}
	close(s.done) // unblocks the actor if it waits to hand over a message
	s.system.Root.Stop(s.pid)
}
