package exchange

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// followers watches activations for the response streams that follow them:
// one actor per Forwarder, so an activation has at most one watcher from a
// gateway node however many of its responses that node relays.
//
// Each stream used to watch its activation itself, at the cost of a Watch
// and an Unwatch per streamed response. And protoactor's PIDSet.Remove
// leaves the removed PID in its slice's spare capacity, where a PID keeps
// its process (mailbox, context, actor) reachable: every resident
// activation kept its last response stream — about 1.6 KB per session —
// alive until it stopped. The follower actor lives as long as the node,
// so what an activation's watcher set keeps of it costs nothing.
//
// The follower never unwatches: when a grain's last stream leaves, it
// forgets the grain, and watches it again (an idempotent Watch) when
// another stream follows it. A Terminated for a grain it no longer follows
// is dropped. Activation PIDs are unique per activation, so a Terminated
// is never taken for a later activation of the same grain.
type followers struct {
	once   sync.Once
	system *actor.ActorSystem
	pid    *actor.PID
}

// follow asks the follower to deliver grainGone to stream when grain's
// activation terminates.
type follow struct {
	grain  *actor.PID
	stream *responseStream
}

// unfollow withdraws a follow.
type unfollow struct {
	grain  *actor.PID
	stream *responseStream
}

// following asks how many streams follow grain (the answer is an int):
// what the follower still holds, for tests and diagnostics.
type following struct{ grain *actor.PID }

// actor is the follower actor's PID; it is spawned on first use.
func (f *followers) actor() *actor.PID {
	f.once.Do(func() {
		f.pid = f.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &followerActor{} }))
	})
	return f.pid
}

func (f *followers) follow(grain *actor.PID, stream *responseStream) {
	f.system.Root.Send(f.actor(), &follow{grain: grain, stream: stream})
}

func (f *followers) unfollow(grain *actor.PID, stream *responseStream) {
	f.system.Root.Send(f.actor(), &unfollow{grain: grain, stream: stream})
}

// pidKey identifies a process across nodes.
type pidKey struct{ address, id string }

func keyOf(p *actor.PID) pidKey { return pidKey{p.GetAddress(), p.GetId()} }

// followerActor is the followers' actor: the streams following each
// watched activation.
type followerActor struct {
	streams map[pidKey]map[*responseStream]struct{}
}

func (a *followerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *follow:
		if a.streams == nil {
			a.streams = map[pidKey]map[*responseStream]struct{}{}
		}
		g := keyOf(m.grain)
		s := a.streams[g]
		if s == nil {
			s = map[*responseStream]struct{}{}
			a.streams[g] = s
			ctx.Watch(m.grain)
		}
		s[m.stream] = struct{}{}
	case *unfollow:
		g := keyOf(m.grain)
		if s := a.streams[g]; s != nil {
			delete(s, m.stream)
			if len(s) == 0 {
				delete(a.streams, g)
			}
		}
	case *following:
		ctx.Respond(len(a.streams[keyOf(m.grain)]))
	case *actor.Terminated:
		g := keyOf(m.GetWho())
		for stream := range a.streams[g] {
			stream.deliver(grainGone{})
		}
		delete(a.streams, g)
	}
}
