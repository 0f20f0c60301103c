package exchange

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// replies is where the frames of a Forwarder's exchanges arrive: one
// process in the actor system's registry, named as the reply address of
// every exchange the Forwarder sends, that hands each frame to the
// response stream of its exchange id. It is a bare actor.Process, not an
// actor: a frame costs a map lookup and a queue append on the goroutine
// that delivers it (the sender's on this node, the remote endpoint's from
// another one). A reply actor per request cost a spawn, a stop and a
// mailbox turn for every message — about a twentieth of a quick request's
// CPU on the gateway.
type replies struct {
	pid       *actor.PID
	streams   Table[*responseStream] // by exchange id
	followers *followers             // watch the activations whose responses go on
}

func newReplies(system *actor.ActorSystem) *replies {
	r := &replies{followers: &followers{system: system}}
	r.pid, _ = system.ProcessRegistry.Add(r, "mcpgrain-replies-"+system.ProcessRegistry.NextId())
	return r
}

// SendUserMessage implements actor.Process: a frame goes to its
// exchange's stream; a frame of an exchange that ended, or anything else,
// is dropped.
func (r *replies) SendUserMessage(_ *actor.PID, message any) {
	f, ok := actor.UnwrapEnvelopeMessage(message).(*pb.ExchangeFrame)
	if !ok {
		return
	}
	if s, ok := r.streams.Load(f.GetExchangeId()); ok {
		s.deliver(f)
	}
}

// SendSystemMessage implements actor.Process (nothing watches replies).
func (r *replies) SendSystemMessage(*actor.PID, any) {}

// Stop implements actor.Process: replies live as long as the node.
func (r *replies) Stop(*actor.PID) {}

// open starts the stream of exchange id.
func (r *replies) open(id string) *responseStream {
	s := &responseStream{id: id, replies: r, ready: make(chan struct{}, 1)}
	r.streams.Store(id, s)
	return s
}

// grainGone is delivered (by the followers) when the activation the
// response comes from terminated.
type grainGone struct{}

// responseStream is the gateway end of one tunnelled exchange: what
// arrived for it (frames, grainGone), in order, until its handler takes
// it. The queue is unbounded, as an actor's mailbox is: delivering never
// waits for the client.
type responseStream struct {
	id      string
	replies *replies
	grain   *actor.PID // the activation followed, or nil

	mu     sync.Mutex
	queue  []any
	closed bool
	ready  chan struct{} // holds a token while the queue is not empty
}

// deliver queues m for the handler (dropped once the stream closed).
func (s *responseStream) deliver(m any) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, m)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take returns what was queued since the last take, oldest first.
func (s *responseStream) take() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// watch follows the session activation, so a dead activation (or node)
// ends the response instead of hanging it.
func (s *responseStream) watch(grainPID *actor.PID) {
	s.grain = grainPID
	s.replies.followers.follow(grainPID, s)
}

func (s *responseStream) close() {
	if s.grain != nil {
		s.replies.followers.unfollow(s.grain, s)
	}
	s.replies.streams.Delete(s.id)
	s.mu.Lock()
	s.closed, s.queue = true, nil
	s.mu.Unlock()
}
