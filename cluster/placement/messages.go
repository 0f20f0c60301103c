package placement

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

// ActorName is the registered name of every node's placement actor; remote
// nodes address it as actor.NewPID(address, ActorName).
const ActorName = "placement"

// LocalRequest is a grain request sent by a caller on the same node as the
// placement actor. It skips protobuf marshalling; the reply is a
// [*LocalReply] to its sender, or an [Answer] on its Reply when set.
// Requests that must cross nodes travel as mcpgrainv1.GrainRequest and are
// answered with GrainResponse/GrainError.
type LocalRequest struct {
	Kind     string
	Identity string
	Msg      proto.Message
	Hops     uint32
	// Reply, when set, receives the answer instead of the message's
	// sender: the caller sends the request without a sender and waits on
	// the channel (a protoactor future registers a process, a timer and a
	// condition variable per request).
	Reply Reply
	// Timeout is how long the caller waits for the answer on Reply: a
	// request forwarded to another node waits for that node's answer as
	// long (0: DefaultForwardTimeout).
	Timeout time.Duration
}

// DefaultForwardTimeout bounds the wait for another node's answer to a
// forwarded [LocalRequest] whose Timeout is 0.
const DefaultForwardTimeout = 30 * time.Second

// Reply is where a [LocalRequest]'s answer is delivered: made with room
// for one answer (NewReply), so a delivery never blocks; an answer after
// the first one is dropped or left unread (the caller takes one).
type Reply chan Answer

// NewReply makes a Reply for one request.
func NewReply() Reply { return make(Reply, 1) }

// deliver sends a, unless an answer is waiting already.
func (r Reply) deliver(a Answer) {
	select {
	case r <- a:
	default:
	}
}

// Answer is what a [LocalRequest]'s Reply receives: exactly one of the
// embedded LocalReply (this node's answer), Remote and Failed is set.
type Answer struct {
	// LocalReply is the answer of this node's activation or placement
	// actor.
	LocalReply
	// Remote is another node's answer when the request was forwarded
	// there: *pb.GrainResponse or *pb.GrainError.
	Remote proto.Message
	// Failed is why no answer came: actor.ErrDeadLetter (the request
	// reached no actor) or actor.ErrTimeout (a forwarded request's
	// answer did not come within its Timeout), or another delivery error.
	Failed error
}

// LocalReply answers a [LocalRequest]: exactly one of Msg and Err is set.
type LocalReply struct {
	Msg proto.Message
	Err *grain.Error
}

// ViewChanged tells the placement actor about a new membership view.
type ViewChanged struct{ View membership.View }

// Suspect tells the placement actor that this node's membership lease
// lapsed: every activation is dropped (reason ownership_lost).
type Suspect struct{}

// Drain asks the placement actor to deactivate every activation (reason
// shutdown) and route new requests to other members. It replies [Drained]
// once no activation is left.
type Drain struct{}

// Drained answers [Drain].
type Drained struct{}

// Stats asks for the placement actor's current activations; the reply is a
// [StatsReply]. Used by tests, checkers and the debug endpoint.
type Stats struct{}

// StatsReply lists the grain keys activated on this node.
type StatsReply struct {
	// Active are the keys of activations that accept requests.
	Active []string
	// Stopping are the keys of activations being deactivated.
	Stopping []string
}

// passivateRequest is sent by an activation to its placement actor to start
// the deactivation handshake.
type passivateRequest struct {
	pid    *actor.PID
	reason grain.Reason
}

// deactivate is the placement actor's go-ahead: every request forwarded to
// the activation before it has already been delivered (mailbox order), and
// none will follow, so the activation can run Deactivate and stop.
type deactivate struct {
	reason grain.Reason
}

// idleTick is an activation's idle-timer wake-up.
type idleTick struct{}

// IgnoreDeadLetterLogging implements actor.IgnoreDeadLetterLogging: a tick
// that races the activation's stop is expected.
func (idleTick) IgnoreDeadLetterLogging() {}
