package grain

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"
)

// CallOptions are the options of one request to a grain. The zero value
// is the default: not idempotent, the node's attempt timeout.
type CallOptions struct {
	// Idempotent marks the request as safe to repeat: a delivery attempt
	// that times out is retried (until the request's deadline) instead of
	// failing with an unknown outcome.
	Idempotent bool
	// AttemptTimeout, if positive, bounds one delivery attempt instead of
	// the node's configured attempt timeout.
	AttemptTimeout time.Duration
	// Deadline, if set, ends the request's retries (and bounds its
	// attempts) earlier than the context's deadline: the same bound as a
	// context with this deadline, without deriving one (a derived context
	// of a request's costs a timer and a registration with its parent).
	Deadline time.Time
}

// CallOption adjusts one request to a grain ([Requester.Request]).
type CallOption func(*CallOptions)

// Idempotent marks a request as safe to repeat (see
// [CallOptions.Idempotent]).
func Idempotent() CallOption { return func(o *CallOptions) { o.Idempotent = true } }

// AttemptTimeout bounds each delivery attempt of one request by d (see
// [CallOptions.AttemptTimeout]).
func AttemptTimeout(d time.Duration) CallOption {
	return func(o *CallOptions) { o.AttemptTimeout = d }
}

// Deadline ends one request's retries at t, if earlier than its
// context's deadline (see [CallOptions.Deadline]).
func Deadline(t time.Time) CallOption {
	return func(o *CallOptions) { o.Deadline = t }
}

// Requester sends a request to a grain anywhere in the cluster and waits
// for its answer; cluster.Node implements it, and so does every grain's
// [Context]. It is the one way mcpgrain code reaches a grain it does not
// host itself.
type Requester interface {
	// Request sends msg to the grain (kind, identity), activating it on
	// the member that owns it if needed, and returns its reply. Attempts
	// that provably did not execute are retried until ctx's deadline (or
	// the node's request timeout). Errors are *[Error] (a refusal is code
	// REJECTED), an unknown outcome, or ctx's error.
	Request(ctx context.Context, kind, identity string, msg proto.Message, opts ...CallOption) (proto.Message, error)
}

// Cluster is what grain code asks of the cluster it runs in: requests to
// other grains, one-way messages, and broadcasts to every member. The
// node hosting a grain provides it — to each activation as part of its
// [Context], and to the code a kind's activations share through a [Host]
// — so nothing has to be wired to the node after it started.
type Cluster interface {
	Requester
	// Tell sends msg to the grain (kind, identity) without waiting for its
	// answer: the request runs in the background (it outlives ctx's
	// cancellation, bounded by the node's request timeout), and a failure
	// is only logged. For notifications whose loss the sender tolerates.
	Tell(ctx context.Context, kind, identity string, msg proto.Message, opts ...CallOption)
	// Broadcast sends msg to one grain of kind on every other member that
	// hosts kind, at once, and waits for every answer; the error names the
	// members that did not answer or refused. The node picks identities
	// that land on each member: the receiving grain must not depend on its
	// identity (a kind's node-wide state, e.g. a catalog, is what a
	// broadcast reaches). Replies are discarded.
	Broadcast(ctx context.Context, kind string, msg proto.Message, opts ...CallOption) error
}

// Host builds grain kinds whose shared, node-wide code (a registry all
// activations use, an MCP server's middleware) reaches other grains
// outside any grain's turn. The node calls it once, while it starts and
// before it hosts any grain, with the node itself as c: the kinds it
// returns are hosted next to cluster.Config.Kinds. c takes requests only
// once the node has started; code must not call it from Host itself.
type Host func(ctx context.Context, c Cluster) ([]Kind, error)
