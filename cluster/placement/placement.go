package placement

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/mcpgrain/mcpgrain/cluster/dispatch"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Config configures a node's placement actor.
type Config struct {
	// Self is this node as the membership provider announces it.
	Self membership.Member
	// Kinds are the grain kinds this node hosts, by name.
	Kinds map[string]grain.Kind
	// Store holds grain ownership and records.
	Store store.Store
	// Reminders stores and arms grains' durable reminders. Nil: grains
	// calling SetReminder get an error.
	Reminders Reminders
	// Cluster is how the node's grains reach other grains (the node; their
	// grain.Context delegates to it). Nil: their requests fail.
	Cluster grain.Cluster
	// Logger receives placement and grain logs.
	Logger *slog.Logger
	// Metrics are the placement instruments (required).
	Metrics *Metrics
	// MaxHops bounds how often a request is forwarded between placement
	// actors whose views disagree. Default 2.
	MaxHops uint32
	// HoldLimit bounds the requests held for one deactivating grain; beyond
	// it callers get a retryable OVERLOADED error. Default 1024.
	HoldLimit int
	// IOTimeout bounds each store call of an activation. Default 10s.
	IOTimeout time.Duration
	// Now is the clock for idle accounting. Default time.Now.
	Now func() time.Time
}

// Reminders is the node's reminder service as activations use it
// (implemented by cluster/reminders.Service).
type Reminders interface {
	Register(ctx context.Context, kind, identity string, epoch uint64, rs ...store.Reminder) error
	Cancel(ctx context.Context, kind, identity string, epoch uint64, names ...string) error
	List(ctx context.Context, kind, identity string) ([]store.Reminder, error)
	// Applied arms and disarms what a grain's store transaction (Commit)
	// set and cancelled (others: every reminder set does not name).
	Applied(kind, identity string, set []store.Reminder, cancelled []string, others bool)
}

func (c *Config) defaults() {
	if c.MaxHops == 0 {
		c.MaxHops = 2
	}
	if c.HoldLimit == 0 {
		c.HoldLimit = 1024
	}
	if c.IOTimeout == 0 {
		c.IOTimeout = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Props returns the props of a node's placement actor; spawn it with
// [ActorName] so other nodes can address it.
//
// The placement actor is the only way into a grain. For every request it
//  1. checks that this node owns the grain under its current view (rendezvous
//     hashing over the members hosting the kind), otherwise forwards the
//     request to the owner's placement actor (at most MaxHops times);
//  2. activates the grain if needed — the activation takes ownership in the
//     store (epoch+1) before it sees any request;
//  3. delivers the request, keeping the caller as sender so the grain
//     replies directly.
//
// Deactivation is a handshake: the activation asks, the placement actor
// stops delivering (it holds new requests) and answers with a go-ahead
// message. Mailbox order guarantees every request delivered before the
// go-ahead is handled first, so nothing is dropped when the activation
// stops; held requests go to the next activation. This replaces
// protoactor's ReceiveTimeout+Poison passivation, which silently drops
// requests queued behind the poison pill.
func Props(cfg Config) *actor.Props {
	cfg.defaults()
	// The node's actors of this placement run on reused goroutines (see
	// package dispatch): a grain's turn is deep, and a fresh goroutine per
	// turn grew its stack by copying every time.
	warm := dispatch.NewWarm(warmIdle, mailboxThroughput)
	kinds := make(map[string]*grain.Kind, len(cfg.Kinds))
	for name, k := range cfg.Kinds {
		kinds[name] = &k
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &placementActor{
			cfg:     &cfg,
			kinds:   kinds,
			table:   NewTable(membership.View{}),
			entries: map[string]*entry{},
			byPID:   map[string]string{},
			warm:    warm,
			acts:    newActivationProps(warm),
		}
	}, actor.WithDispatcher(warm), actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive {
		// An activation that panics outside the grain's recovered calls is
		// stopped, never restarted with a half-built state.
		return actor.StopDirective
	})))
}

type entry struct {
	kind, identity string
	pid            *actor.PID
	stopping       bool
	held           []held
	creating       bool // started for a creating request (grain.Kind.Creates)
}

type held struct {
	msg    any // *LocalRequest or *pb.GrainRequest
	sender *actor.PID
}

type placementActor struct {
	cfg      *Config
	kinds    map[string]*grain.Kind // cfg.Kinds, each kept once for its activations
	table    *Table
	entries  map[string]*entry
	byPID    map[string]string
	draining bool
	drainers []*actor.PID
	warm     *dispatch.Warm // the activations' dispatcher
	acts     *activationProps
	// recheck holds the keys whose last activation, started for a creating
	// request, lost its ownership: the grain existed after all, and the
	// next activation looks for its row whatever it is started for.
	recheck map[string]bool
}

func (p *placementActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *LocalRequest:
		p.route(ctx, m.Kind, m.Identity, m.Hops, m, ctx.Sender())
	case *pb.GrainRequest:
		p.route(ctx, m.GetKind(), m.GetIdentity(), m.GetHops(), m, ctx.Sender())
	case *passivateRequest:
		p.passivate(ctx, m.pid, m.reason)
	case *actor.Terminated:
		p.terminated(ctx, m.Who)
	case *ViewChanged:
		p.viewChanged(ctx, m.View)
	case *Suspect:
		p.deactivateAll(ctx, grain.ReasonOwnershipLost)
	case *Drain:
		p.draining = true
		if ctx.Sender() != nil {
			p.drainers = append(p.drainers, ctx.Sender())
		}
		p.deactivateAll(ctx, grain.ReasonShutdown)
		p.maybeDrained(ctx)
	case *Stats:
		var r StatsReply
		for k, e := range p.entries {
			if e.stopping {
				r.Stopping = append(r.Stopping, k)
			} else {
				r.Active = append(r.Active, k)
			}
		}
		slices.Sort(r.Active)
		slices.Sort(r.Stopping)
		ctx.Respond(&r)
	}
}

// route delivers one request (msg is *LocalRequest or *pb.GrainRequest).
func (p *placementActor) route(ctx actor.Context, kind, identity string, hops uint32, msg any, sender *actor.PID) {
	owner, ok := p.owner(kind, identity)
	if !ok {
		p.reject(ctx, msg, sender, pb.GrainError_CODE_UNKNOWN_KIND, fmt.Sprintf("no member hosts grain kind %q", kind))
		return
	}
	if owner.ID != p.cfg.Self.ID {
		p.forward(ctx, owner, hops, msg, sender)
		return
	}
	key := grain.Key(kind, identity)
	e := p.entries[key]
	if e == nil {
		e = p.spawn(ctx, kind, identity, key, msg)
		if e == nil {
			p.reject(ctx, msg, sender, pb.GrainError_CODE_UNKNOWN_KIND, fmt.Sprintf("grain kind %q is not hosted here", kind))
			return
		}
	}
	if e.stopping {
		if len(e.held) >= p.cfg.HoldLimit {
			p.reject(ctx, msg, sender, pb.GrainError_CODE_OVERLOADED, "too many requests held for a deactivating grain; retry")
			return
		}
		e.held = append(e.held, held{msg: msg, sender: sender})
		p.cfg.Metrics.Held.WithLabelValues(kind).Inc()
		return
	}
	send(ctx, e.pid, msg, sender)
}

// send passes a request on to pid with its sender; one without a sender
// (answered on its Reply) travels without an envelope.
func send(ctx actor.SenderContext, pid *actor.PID, msg any, sender *actor.PID) {
	if sender == nil {
		ctx.Send(pid, msg)
		return
	}
	ctx.RequestWithCustomSender(pid, msg, sender)
}

// owner is the owner under the current view; while draining, this node is
// left out so requests go where they will be served after it is gone.
func (p *placementActor) owner(kind, identity string) (membership.Member, bool) {
	if !p.draining {
		return p.table.Owner(kind, identity)
	}
	return NewTable(withoutMember(p.table.View(), p.cfg.Self.ID)).Owner(kind, identity)
}

func withoutMember(v membership.View, id string) membership.View {
	out := make([]membership.Member, 0, len(v.Members))
	for _, m := range v.Members {
		if m.ID != id {
			out = append(out, m)
		}
	}
	return membership.View{Members: out}
}

func (p *placementActor) forward(ctx actor.Context, owner membership.Member, hops uint32, msg any, sender *actor.PID) {
	if hops >= p.cfg.MaxHops {
		p.cfg.Metrics.Forwards.WithLabelValues("refused").Inc()
		p.reject(ctx, msg, sender, pb.GrainError_CODE_NOT_OWNER, "views disagree on the owner; retry")
		return
	}
	var out *pb.GrainRequest
	switch m := msg.(type) {
	case *pb.GrainRequest:
		out = &pb.GrainRequest{Kind: m.GetKind(), Identity: m.GetIdentity(), Payload: m.GetPayload(), Hops: hops + 1}
	case *LocalRequest:
		payload, err := anypb.New(m.Msg)
		if err != nil {
			p.reject(ctx, msg, sender, pb.GrainError_CODE_REJECTED, fmt.Sprintf("cannot encode request: %v", err))
			return
		}
		out = &pb.GrainRequest{Kind: m.Kind, Identity: m.Identity, Payload: payload, Hops: hops + 1}
	}
	p.cfg.Metrics.Forwards.WithLabelValues("forwarded").Inc()
	to := actor.NewPID(owner.Address, ActorName)
	if lr, ok := msg.(*LocalRequest); ok && lr.Reply != nil {
		relay(ctx, to, out, lr)
		return
	}
	ctx.RequestWithCustomSender(to, out, sender)
}

// AnswerDeadLetters makes a [LocalRequest] that reaches no actor (its
// target stopped, or is not up) answer its Reply with
// actor.ErrDeadLetter, as protoactor answers a request's sender with a
// DeadLetterResponse. A node subscribes once, on its actor system.
func AnswerDeadLetters(system *actor.ActorSystem) *eventstream.Subscription {
	return system.EventStream.Subscribe(func(evt any) {
		if dl, ok := evt.(*actor.DeadLetterEvent); ok {
			if lr, ok := dl.Message.(*LocalRequest); ok && lr.Reply != nil {
				lr.Reply.deliver(Answer{Failed: actor.ErrDeadLetter})
			}
		}
	})
}

// relay forwards a request whose caller waits on its Reply: the other
// node answers a future here, and its answer (or the future's timeout
// after lr.Timeout) goes on to the Reply.
func relay(ctx actor.Context, to *actor.PID, out *pb.GrainRequest, lr *LocalRequest) {
	timeout := lr.Timeout
	if timeout <= 0 {
		timeout = DefaultForwardTimeout
	}
	f := ctx.RequestFuture(to, out, timeout)
	go func() {
		res, err := f.Result()
		if err != nil {
			lr.Reply.deliver(Answer{Failed: err})
			return
		}
		m, ok := res.(proto.Message)
		if !ok {
			lr.Reply.deliver(Answer{Failed: fmt.Errorf("unexpected answer %T from %s", res, to)})
			return
		}
		lr.Reply.deliver(Answer{Remote: m})
	}()
}

func (p *placementActor) reject(ctx actor.Context, msg any, sender *actor.PID, code pb.GrainError_Code, text string) {
	lr, local := msg.(*LocalRequest)
	if local && lr.Reply != nil {
		lr.Reply.deliver(Answer{LocalReply: LocalReply{Err: &grain.Error{Code: code, Message: text, Node: p.cfg.Self.ID}}})
		return
	}
	if sender == nil {
		return
	}
	ge := &grain.Error{Code: code, Message: text, Node: p.cfg.Self.ID}
	if local {
		ctx.Send(sender, &LocalReply{Err: ge})
		return
	}
	ctx.Send(sender, ge.Proto())
}

func (p *placementActor) spawn(ctx actor.Context, kind, identity, key string, first any) *entry {
	k, ok := p.kinds[kind]
	if !ok {
		return nil
	}
	creating := creates(k, first) && !p.recheck[key]
	delete(p.recheck, key)
	a := &activation{cfg: p.cfg, kind: k, identity: identity, key: key, creating: creating}
	pid := p.acts.spawn(ctx, a)
	e := &entry{kind: kind, identity: identity, pid: pid, creating: creating}
	p.entries[key] = e
	p.byPID[pid.Id] = key
	return e
}

// activationProps are the Props of a node's activations: one for all of
// them (a Props a spawn, with its producer's closure, was ~0.25 KB a
// resident activation). spawn hands the activation to the producer
// through next: protoactor calls a Props' producer synchronously inside
// Spawn, and again only to restart an actor, which an activation never is
// (the placement actor's supervisor stops one that panics).
type activationProps struct {
	props *actor.Props
	next  atomic.Pointer[activation]
}

func newActivationProps(warm *dispatch.Warm) *activationProps {
	ap := &activationProps{}
	ap.props = actor.PropsFromProducer(func() actor.Actor {
		if a := ap.next.Swap(nil); a != nil {
			return a
		}
		// Not from spawn (a restart, which the supervisor never asks
		// for): an actor that stops at once, never an activation twice.
		return defunct{}
	}, actor.WithDispatcher(warm), actor.WithMailbox(activationMailbox))
	return ap
}

// spawn starts a as a child of the placement actor.
func (ap *activationProps) spawn(ctx actor.SpawnerContext, a *activation) *actor.PID {
	ap.next.Store(a)
	pid := ctx.Spawn(ap.props)
	ap.next.Store(nil)
	return pid
}

// defunct is what activationProps' producer makes outside a spawn: it
// stops when started.
type defunct struct{}

// Receive stops the actor when it starts.
func (defunct) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		ctx.Stop(ctx.Self())
	}
}

// activationMailbox makes an activation's mailbox: the lock-free one, as
// an idle one is two stub nodes where the default (a ring of 10) holds
// ~0.2 KB for each resident activation.
var activationMailbox = actor.UnboundedLockfree()

// creates reports whether first, the request an activation of k is
// started for, creates the grain (see grain.Kind.Creates; only a request
// from this node is looked at: a remote one would have to be decoded).
func creates(k *grain.Kind, first any) bool {
	lr, ok := first.(*LocalRequest)
	return ok && k.CreatedByWrite && k.Creates != nil && k.Creates(lr.Msg)
}

// Dispatcher settings of a node's placement actor and activations.
const (
	// warmIdle bounds the goroutines kept idle for the next turns: about
	// as many as turns run at once on a busy node.
	warmIdle = 256
	// mailboxThroughput is protoactor's default: messages per turn.
	mailboxThroughput = 300
)

func (p *placementActor) passivate(ctx actor.Context, pid *actor.PID, reason grain.Reason) {
	key, ok := p.byPID[pid.Id]
	if !ok {
		return
	}
	if e := p.entries[key]; e != nil && e.creating && reason == grain.ReasonOwnershipLost {
		if p.recheck == nil {
			p.recheck = map[string]bool{}
		}
		p.recheck[key] = true
	}
	p.stopEntry(ctx, p.entries[key], reason)
}

func (p *placementActor) stopEntry(ctx actor.Context, e *entry, reason grain.Reason) {
	if e.stopping {
		return
	}
	e.stopping = true
	ctx.Send(e.pid, &deactivate{reason: reason})
}

func (p *placementActor) deactivateAll(ctx actor.Context, reason grain.Reason) {
	for _, e := range p.entries {
		p.stopEntry(ctx, e, reason)
	}
}

func (p *placementActor) terminated(ctx actor.Context, who *actor.PID) {
	key, ok := p.byPID[who.Id]
	if !ok {
		return
	}
	delete(p.byPID, who.Id)
	e := p.entries[key]
	delete(p.entries, key)
	// Requests held during the deactivation go through routing again: to
	// a new activation here, or to the new owner.
	for _, h := range e.held {
		switch m := h.msg.(type) {
		case *LocalRequest:
			p.route(ctx, m.Kind, m.Identity, m.Hops, m, h.sender)
		case *pb.GrainRequest:
			p.route(ctx, m.GetKind(), m.GetIdentity(), m.GetHops(), m, h.sender)
		}
	}
	p.maybeDrained(ctx)
}

func (p *placementActor) maybeDrained(ctx actor.Context) {
	if !p.draining || len(p.entries) > 0 {
		return
	}
	for _, d := range p.drainers {
		ctx.Send(d, &Drained{})
	}
	p.drainers = nil
}

func (p *placementActor) viewChanged(ctx actor.Context, v membership.View) {
	p.table = NewTable(v)
	for _, e := range p.entries {
		if owner, ok := p.owner(e.kind, e.identity); !ok || owner.ID != p.cfg.Self.ID {
			p.stopEntry(ctx, e, grain.ReasonRebalance)
		}
	}
}
