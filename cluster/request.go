package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/placement"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// ErrUnknownOutcome is returned when a non-idempotent request's delivery
// attempt timed out: the grain may or may not have executed it, so it is not
// retried silently. Callers that can tolerate a repeat may retry.
var ErrUnknownOutcome = errors.New("cluster: grain request timed out; it may or may not have been executed")

// CallOption adjusts one [Node.Request]: it is [grain.CallOption], so the
// options of cluster and grain code are the same values.
type CallOption = grain.CallOption

// Idempotent marks a request as safe to repeat: a delivery attempt that
// times out is retried (until the request deadline) instead of failing with
// [ErrUnknownOutcome]. It is [grain.Idempotent].
func Idempotent() CallOption { return grain.Idempotent() }

// AttemptTimeout overrides Config.AttemptTimeout for one request. It is
// [grain.AttemptTimeout].
func AttemptTimeout(d time.Duration) CallOption { return grain.AttemptTimeout(d) }

// Deadline ends one request's retries at t if that is earlier than its
// context's deadline. It is [grain.Deadline].
func Deadline(t time.Time) CallOption { return grain.Deadline(t) }

const (
	minBackoff = 2 * time.Millisecond
	maxBackoff = 100 * time.Millisecond
)

// Request sends msg to the grain (kind, identity), activating it if needed,
// and returns its reply. It goes straight to the owner under this node's
// view and retries, with short jittered backoff until ctx's deadline (or
// Config.RequestTimeout, or an earlier [Deadline]), every attempt that provably did not execute: a
// placement actor that is not the owner, a deactivating or fenced
// activation, a node whose placement actor is not up (dead letter), a kind
// no member hosts yet. Errors are *grain.Error, [ErrUnknownOutcome], or the
// context's error.
func (n *Node) Request(ctx context.Context, kind, identity string, msg proto.Message, opts ...CallOption) (proto.Message, error) {
	return n.RequestWith(ctx, kind, identity, msg, callOptions(opts))
}

// callOptions applies opts (an options value of its own on the heap only
// when there are options: a function an option is takes its address).
func callOptions(opts []CallOption) grain.CallOptions {
	if len(opts) == 0 {
		return grain.CallOptions{}
	}
	o := new(grain.CallOptions)
	for _, opt := range opts {
		opt(o)
	}
	return *o
}

// RequestWith is [Node.Request] with its options as a value: a caller
// that sends many requests (the gateway's forwarder, every exchange) sets
// them without an option's function and the heap copy it takes.
func (n *Node) RequestWith(ctx context.Context, kind, identity string, msg proto.Message, o grain.CallOptions) (proto.Message, error) {
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = n.cfg.AttemptTimeout
	}
	began := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = began.Add(n.cfg.RequestTimeout)
	}
	if !o.Deadline.IsZero() && o.Deadline.Before(deadline) {
		deadline = o.Deadline
	}
	reply, err := n.request(ctx, kind, identity, msg, o, deadline)
	tracing.Observe(ctx, n.metrics.requestTimes.WithLabelValues(kind), time.Since(began).Seconds())
	n.metrics.requests.WithLabelValues(kind, outcome(err)).Inc()
	return reply, err
}

func outcome(err error) string {
	switch ge, isGrain := grain.AsError(err); {
	case err == nil:
		return "ok"
	case isGrain && ge.Code == pb.GrainError_CODE_REJECTED:
		return "rejected"
	case errors.Is(err, errStoreUnavailable):
		return "store_unavailable"
	case errors.Is(err, ErrUnknownOutcome):
		return "timeout"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	default:
		return "error"
	}
}

func (n *Node) request(ctx context.Context, kind, identity string, msg proto.Message, o grain.CallOptions, deadline time.Time) (proto.Message, error) {
	var (
		payload *anypb.Any // marshalled once, on the first remote attempt
		lastErr error
		backoff = minBackoff
	)
	for {
		if err := ctx.Err(); err != nil {
			return nil, errors.Join(err, lastErr)
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			if lastErr == nil {
				lastErr = ErrUnknownOutcome
			}
			return nil, fmt.Errorf("cluster: request to %s deadline exceeded after retries: %w", grain.Key(kind, identity), lastErr)
		}
		target, env, err := n.route(kind, identity, msg, &payload)
		switch {
		case errors.Is(err, errEncode):
			return nil, err
		case target != nil:
			reply, err, retry := n.attempt(ctx, target, env, min(o.AttemptTimeout, remaining), o.Idempotent)
			if !retry {
				return reply, err
			}
			lastErr = err
		default:
			lastErr = err
		}
		backoff = n.backOff(ctx, backoff, deadline)
	}
}

// errEncode marks a message that cannot be encoded for a remote owner.
var errEncode = errors.New("cluster: encode")

// route picks where an attempt goes under this node's view: the local
// placement actor, the owner's (payload is the message encoded once, on
// the first remote attempt), or nowhere yet (err says why; the caller
// retries).
func (n *Node) route(kind, identity string, msg proto.Message, payload **anypb.Any) (*actor.PID, any, error) {
	owner, ok := n.Owner(kind, identity)
	switch {
	case !ok:
		n.metrics.retries.WithLabelValues("unknown_kind").Inc()
		return nil, nil, &grain.Error{Code: pb.GrainError_CODE_UNKNOWN_KIND, Message: fmt.Sprintf("no member hosts grain kind %q", kind), Node: n.id}
	case owner.ID == n.id:
		return n.placement, &placement.LocalRequest{Kind: kind, Identity: identity, Msg: msg}, nil
	case n.unreachable(owner.Address):
		// Its connection just broke: the member probably died and the view
		// will move the grain. Sending now could execute nowhere or (if it
		// is alive after all) somewhere we cannot hear back from.
		n.metrics.retries.WithLabelValues("owner_unreachable").Inc()
		return nil, nil, fmt.Errorf("cluster: owner %s of %s is unreachable", owner.ID, grain.Key(kind, identity))
	}
	if *payload == nil {
		p, err := anypb.New(msg)
		if err != nil {
			return nil, nil, fmt.Errorf("%w %T: %w", errEncode, msg, err)
		}
		*payload = p
	}
	return actor.NewPID(owner.Address, placement.ActorName), &pb.GrainRequest{Kind: kind, Identity: identity, Payload: *payload}, nil
}

// backOff waits a jittered exponential backoff, bounded by ctx and the
// deadline, and returns the next backoff.
func (n *Node) backOff(ctx context.Context, backoff time.Duration, deadline time.Time) time.Duration {
	wait := min(backoff/2+rand.N(backoff), time.Until(deadline))
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return min(backoff*2, maxBackoff)
}

// attempt makes one delivery attempt and classifies the result (classify).
// An attempt to another node is abandoned early when that node leaves the
// membership view (it probably died): idempotent requests retry at once,
// others report an unknown outcome instead of waiting for the timeout.
func (n *Node) attempt(ctx context.Context, target *actor.PID, env any, timeout time.Duration, idempotent bool) (reply proto.Message, err error, retry bool) {
	if lr, ok := env.(*placement.LocalRequest); ok {
		return n.count(n.awaitLocal(ctx, target, lr, timeout, idempotent))
	}
	f := n.system.Root.RequestFuture(target, env, timeout)
	res, v, err := n.awaitRemote(ctx, f, target, idempotent)
	if v != nil {
		return n.count(*v)
	}
	return n.count(classify(res, err, idempotent, target))
}

// awaitLocal sends a request to this node's placement actor and waits for
// its answer on the request's Reply (no protoactor future: no process
// registered, no condition variable), at most timeout, and no longer than
// the caller waits (ctx), as [Node.awaitRemote] does.
func (n *Node) awaitLocal(ctx context.Context, target *actor.PID, lr *placement.LocalRequest, timeout time.Duration, idempotent bool) verdict {
	lr.Reply, lr.Timeout = placement.NewReply(), timeout
	n.system.Root.Send(target, lr)
	t := startTimer(timeout)
	defer stopTimer(t)
	select {
	case a := <-lr.Reply:
		return classifyAnswer(a, idempotent, target)
	case <-t.C:
		return classify(nil, actor.ErrTimeout, idempotent, target)
	case <-ctx.Done():
		return abandoned(ctx, idempotent)
	}
}

// abandoned is the verdict on an attempt its caller stopped waiting for:
// the request is on its way or running, so whether it ran is unknown.
func abandoned(ctx context.Context, idempotent bool) verdict {
	if !idempotent {
		return verdict{err: fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())}
	}
	return verdict{err: ctx.Err()}
}

// attemptTimers are the stopped timers of finished local attempts (since
// Go 1.23 a stopped timer's channel holds no stale value, so one is reused
// as new).
var attemptTimers sync.Pool

// startTimer is a timer firing after d, reused when one is free.
func startTimer(d time.Duration) *time.Timer {
	if t, ok := attemptTimers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// stopTimer stops t and keeps it for reuse.
func stopTimer(t *time.Timer) {
	t.Stop()
	attemptTimers.Put(t)
}

// classifyAnswer decides what a local attempt's answer means, as classify
// does for a future's result.
func classifyAnswer(a placement.Answer, idempotent bool, target *actor.PID) verdict {
	switch {
	case a.Failed != nil:
		return classify(nil, a.Failed, idempotent, target)
	case a.Remote != nil:
		return classify(a.Remote, nil, idempotent, target)
	case a.Err != nil:
		return classifyGrainError(a.Err, idempotent)
	}
	return verdict{reply: a.Msg}
}

// count counts a verdict's retry reason and returns the verdict.
func (n *Node) count(v verdict) (proto.Message, error, bool) {
	if v.reason != "" {
		n.metrics.retries.WithLabelValues(v.reason).Inc()
	}
	return v.reply, v.err, v.retry
}

// awaitRemote waits for a remote attempt's answer, or decides without it
// (v non-nil) when the caller gives up or the target leaves the view.
func (n *Node) awaitRemote(ctx context.Context, f *actor.Future, target *actor.PID, idempotent bool) (res any, v *verdict, err error) {
	type result struct {
		res any
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, e := f.Result()
		done <- result{r, e}
	}()
	for {
		changed := n.viewChanged()
		select {
		case r := <-done:
			return r.res, nil, r.err
		case <-ctx.Done():
			// The caller gave up, not the grain.
			v := abandoned(ctx, idempotent)
			return nil, &v, nil
		case <-changed:
			if n.hasAddress(target.Address) {
				// Still a member: it answers, even if only to say another
				// member owns the grain now.
				continue
			}
			if !idempotent {
				return nil, &verdict{err: fmt.Errorf("%w (its node left the membership view mid-request)", ErrUnknownOutcome)}, nil
			}
			return nil, &verdict{err: fmt.Errorf("cluster: %s left the membership view", target.Address), retry: true, reason: "owner_left"}, nil
		}
	}
}

// verdict is what one attempt's outcome means for the request.
type verdict struct {
	reply  proto.Message
	err    error
	retry  bool   // the attempt provably did not execute (or may repeat): try again
	reason string // the retry's mcpgrain_request_retries_total reason, if counted
}

// classify decides what an attempt's answer (res, or the future's err)
// means: a reply, a final error, or a retry. Pure: request_test.go walks it
// through a table.
func classify(res any, err error, idempotent bool, target *actor.PID) verdict {
	switch {
	case errors.Is(err, actor.ErrDeadLetter):
		return verdict{err: fmt.Errorf("cluster: %s not reachable yet: %w", target, err), retry: true, reason: "dead_letter"}
	case errors.Is(err, actor.ErrTimeout):
		if !idempotent {
			return verdict{err: ErrUnknownOutcome}
		}
		return verdict{err: ErrUnknownOutcome, retry: true, reason: "timeout"}
	case err != nil:
		return verdict{err: fmt.Errorf("cluster: request to %s: %w", target, err)}
	}
	var gerr *grain.Error
	switch r := res.(type) {
	case *placement.LocalReply:
		if r.Err == nil {
			return verdict{reply: r.Msg}
		}
		gerr = r.Err
	case *pb.GrainResponse:
		m, err := r.GetPayload().UnmarshalNew()
		if err != nil {
			return verdict{err: fmt.Errorf("cluster: decode reply %q: %w", r.GetPayload().GetTypeUrl(), err)}
		}
		return verdict{reply: m}
	case *pb.GrainError:
		gerr = grain.FromProto(r)
	default:
		return verdict{err: fmt.Errorf("cluster: unexpected reply %T from %s", res, target)}
	}
	return classifyGrainError(gerr, idempotent)
}

// classifyGrainError decides what a grain's error answer means.
func classifyGrainError(gerr *grain.Error, idempotent bool) verdict {
	switch {
	case gerr.Retryable():
		return verdict{err: gerr, retry: true, reason: retryReason(gerr.Code)}
	case gerr.Code != pb.GrainError_CODE_STORE_UNAVAILABLE:
		return verdict{err: gerr}
	case idempotent:
		// The grain ran but its store went away mid-request: a repeat is
		// safe only for idempotent requests (the store usually comes back
		// within the request's deadline, e.g. a database restart).
		return verdict{err: gerr, retry: true, reason: retryReason(gerr.Code)}
	default:
		return verdict{err: &unknownOutcome{cause: gerr}}
	}
}

// errStoreUnavailable matches (errors.Is) a request that failed with an
// unknown outcome because the grain's store became unreachable.
var errStoreUnavailable = errors.New("cluster: the grain's store became unreachable mid-request")

// unknownOutcome is [ErrUnknownOutcome] caused by the grain's store going
// away mid-request. It does not unwrap to the grain error: callers must not
// read it as a plain failure of the request.
type unknownOutcome struct{ cause *grain.Error }

func (e *unknownOutcome) Error() string {
	return fmt.Sprintf("%v: the grain's store became unreachable mid-request (%s)", ErrUnknownOutcome, e.cause.Message)
}

func (e *unknownOutcome) Is(target error) bool {
	return target == ErrUnknownOutcome || target == errStoreUnavailable
}

// downFor is how long a broken connection keeps a member from receiving
// requests before we try it again (a member that really died leaves the
// view sooner: within its membership TTL).
const downFor = 3 * time.Second

// unreachable reports whether address's connection broke less than downFor ago.
func (n *Node) unreachable(address string) bool {
	v, ok := n.down.Load(address)
	if !ok {
		return false
	}
	if time.Since(v.(time.Time)) > downFor {
		n.down.Delete(address)
		return false
	}
	return true
}

// hasAddress reports whether a member with address is in the current view.
func (n *Node) hasAddress(address string) bool {
	for _, m := range n.View().Members {
		if m.Address == address {
			return true
		}
	}
	return false
}

func retryReason(c pb.GrainError_Code) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "CODE_"))
}

// Departed returns a channel that is closed once the member at address
// (an actor-remote address, as in a PID) is no longer in this node's
// membership view, or never was; it is never closed if ctx ends first.
// A frozen or partitioned member keeps its connections open, so this is
// how a caller streaming from it learns it is gone.
func (n *Node) Departed(ctx context.Context, address string) <-chan struct{} {
	out := make(chan struct{})
	if address == n.self.Address {
		return out // this node does not leave its own view while it serves
	}
	go func() {
		for {
			changed := n.viewChanged()
			if !n.hasAddress(address) {
				close(out)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return out
}
