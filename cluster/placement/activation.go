package placement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/lazylog"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

type activationState int

const (
	stateStarting activationState = iota
	stateActive
	stateFailed // taking ownership or Activate failed
	stateLost   // a fenced write failed: another activation owns the grain
	stateStopping
)

// activation hosts one grain activation inside its own actor. It owns the
// grain's epoch: it takes ownership in the store before the grain sees any
// request, and routes every save through the epoch fence.
type activation struct {
	cfg      *Config
	kind     *grain.Kind // the placement actor's (a copy was 48 B an activation)
	identity string
	key      string

	g        grain.Grain
	state    activationState
	epoch    uint64
	self     *actor.PID
	parent   *actor.PID
	system   *actor.ActorSystem
	ctx      context.Context // cancelled when the activation stops
	cancel   context.CancelFunc
	asked    bool // passivation requested
	owned    bool // holds a.epoch in the store (false: ephemeral, or a CreatedByWrite grain not written yet)
	creating bool // started for a request that creates the grain (grain.Kind.Creates): no row to look for
	released bool // a Commit released the ownership already (its last step)
	counted  bool // counted in the Active gauge
	// The request being handled (zero between requests): whether it came
	// from another node and is answered later (Defer), and (below) its
	// caller. Kept apart from a turn value so the flags share the bools'
	// padding: the struct stays in its 192 B size class.
	turnRemote   bool
	turnDeferred bool
	lastSeen     time.Time
	timer        *time.Timer
	sender       *actor.PID // the caller of the request being handled, if it has one
	reply        Reply      // the Reply of the request being handled, if it has one
	// started is what start did, with tracing on and a store read: the
	// span of it is recorded under the first request's trace (trace.go).
	started *startTrace
}

// turn is the caller of a deferred request, for its answer.
type turn struct {
	sender *actor.PID
	reply  Reply // a LocalRequest's Reply: answered there, not to sender
	remote bool  // answer with pb.GrainResponse / pb.GrainError, else LocalReply
}

// endTurn forgets the request just handled.
func (a *activation) endTurn() {
	a.sender, a.reply, a.turnRemote, a.turnDeferred = nil, nil, false, false
}

// awaited reports whether the turn's caller waits for an answer.
func (t *turn) awaited() bool { return t.sender != nil || t.reply != nil }

// answer sends the grain's answer to a local caller: on its Reply, or as
// a LocalReply to its sender.
func (t *turn) answer(system *actor.ActorSystem, reply proto.Message, gerr *grain.Error) {
	if t.reply != nil {
		t.reply.deliver(Answer{LocalReply: LocalReply{Msg: reply, Err: gerr}})
		return
	}
	system.Root.Send(t.sender, &LocalReply{Msg: reply, Err: gerr})
}

var (
	_ grain.Context = (*activation)(nil)
	_ grain.Keyed   = (*activation)(nil)
)

func (a *activation) Kind() string                    { return a.kind.Name }
func (a *activation) Identity() string                { return a.identity }
func (a *activation) Key() string                     { return a.key }
func (a *activation) Node() string                    { return a.cfg.Self.ID }
func (a *activation) Epoch() uint64                   { return a.epoch }
func (a *activation) Self() *actor.PID                { return a.self }
func (a *activation) ActorSystem() *actor.ActorSystem { return a.system }
func (a *activation) Logger() *slog.Logger            { return a.logger() }

// logger is the activation's logger, with its kind, identity and (once
// known) epoch: made for each use, as an activation rarely logs and a
// logger kept per resident activation cost ~0.3 KB.
func (a *activation) logger() *slog.Logger {
	return activationLogger(a.cfg.Logger, a.kind.Name, a.identity, a.epoch)
}

// activationLogger is the logger of the activation of kind and identity
// at epoch (0: not yet known).
func activationLogger(base *slog.Logger, kind, identity string, epoch uint64) *slog.Logger {
	if epoch == 0 {
		return lazylog.With(base, "kind", kind, "identity", identity)
	}
	return lazylog.With(base, "kind", kind, "identity", identity, "epoch", epoch)
}

// Save implements [grain.Context]: a write fenced by the activation's epoch.
func (a *activation) Save(ctx context.Context, record []byte) error {
	return a.fenced(ctx, func(ctx context.Context) error { return a.cfg.Store.Save(ctx, a.key, a.epoch, record) })
}

// Commit implements [grain.Context].
func (a *activation) Commit(ctx context.Context, w store.Writes) error {
	if (len(w.SetReminders) > 0 || len(w.CancelReminders) > 0) && a.cfg.Reminders == nil {
		return errNoReminders
	}
	if a.kind.Ephemeral {
		return errEphemeral
	}
	if !a.owned && a.state != stateLost {
		return a.create(ctx, w)
	}
	return a.fenced(ctx, func(ctx context.Context) error {
		stored, err := a.cfg.Store.Apply(ctx, a.key, a.epoch, w)
		if err == nil && a.cfg.Reminders != nil {
			a.cfg.Reminders.Applied(a.kind.Name, a.identity, stored, w.CancelReminders, w.CancelOtherReminders)
		}
		if err == nil && w.Release {
			a.released = true // nothing left to release when it stops
		}
		return err
	})
}

// create is Commit for a CreatedByWrite grain that does not exist yet:
// ownership and the first writes in one transaction.
func (a *activation) create(ctx context.Context, w store.Writes) error {
	ioctx, cancel := context.WithTimeout(ctx, a.cfg.IOTimeout)
	defer cancel()
	o, stored, err := a.cfg.Store.Create(ioctx, a.key, a.cfg.Self.ID, w)
	switch {
	case errors.Is(err, store.ErrFenced):
		a.lose("created by another activation")
		return fmt.Errorf("grain %s: %w", a.key, err)
	case err != nil && ctx.Err() == nil && errors.Is(ioctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: no answer within %s: %w", store.ErrUnavailable, a.cfg.IOTimeout, err)
	case err != nil:
		return err
	}
	a.epoch, a.owned = o.Epoch, true
	if a.cfg.Reminders != nil {
		a.cfg.Reminders.Applied(a.kind.Name, a.identity, stored, w.CancelReminders, w.CancelOtherReminders)
	}
	return nil
}

// Delete implements [grain.Context].
func (a *activation) Delete(ctx context.Context) error {
	if err := a.fenced(ctx, func(ctx context.Context) error { return a.cfg.Store.Delete(ctx, a.key, a.epoch) }); err != nil {
		return err
	}
	a.owned = false // nothing left to release
	a.requestPassivation(grain.ReasonRequested)
	return nil
}

var (
	errNoReminders = errors.New("grain: this node has no reminder service")
	errEphemeral   = errors.New("grain: an ephemeral grain has no durable state")
)

// SetReminder implements [grain.Context].
func (a *activation) SetReminder(ctx context.Context, name string, due time.Time, period time.Duration) error {
	return a.SetReminders(ctx, store.Reminder{Name: name, DueAt: due, Period: period})
}

// SetReminders implements [grain.Context].
func (a *activation) SetReminders(ctx context.Context, rs ...store.Reminder) error {
	if a.cfg.Reminders == nil {
		return errNoReminders
	}
	return a.fenced(ctx, func(ctx context.Context) error {
		return a.cfg.Reminders.Register(ctx, a.kind.Name, a.identity, a.epoch, rs...)
	})
}

// CancelReminders implements [grain.Context].
func (a *activation) CancelReminders(ctx context.Context, names ...string) error {
	if a.cfg.Reminders == nil {
		return errNoReminders
	}
	return a.fenced(ctx, func(ctx context.Context) error {
		return a.cfg.Reminders.Cancel(ctx, a.kind.Name, a.identity, a.epoch, names...)
	})
}

// RemindersStored implements [grain.Context]: it touches only the
// reminder service (its own lock) and the activation's fixed identity.
func (a *activation) RemindersStored(set []store.Reminder, cancelled []string) {
	if a.cfg.Reminders != nil {
		a.cfg.Reminders.Applied(a.kind.Name, a.identity, set, cancelled, false)
	}
}

// Reminders implements [grain.Context].
func (a *activation) Reminders(ctx context.Context) ([]store.Reminder, error) {
	if a.cfg.Reminders == nil {
		return nil, errNoReminders
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.IOTimeout)
	defer cancel()
	return a.cfg.Reminders.List(ctx, a.kind.Name, a.identity)
}

// fenced runs a write fenced by the epoch: a fenced failure stops the
// activation (ownership lost).
func (a *activation) fenced(ctx context.Context, write func(context.Context) error) error {
	if a.kind.Ephemeral {
		return errEphemeral
	}
	if a.state == stateLost {
		return fmt.Errorf("grain %s: %w", a.key, store.ErrFenced)
	}
	ioctx, cancel := context.WithTimeout(ctx, a.cfg.IOTimeout)
	defer cancel()
	err := a.own(ioctx)
	if err == nil {
		err = write(ioctx)
	}
	if errors.Is(err, store.ErrFenced) {
		a.lose("write fenced")
	}
	if err != nil && ctx.Err() == nil && errors.Is(ioctx.Err(), context.DeadlineExceeded) {
		// The store did not answer within the I/O timeout (hung or
		// unreachable), not the caller giving up.
		err = fmt.Errorf("%w: no answer within %s: %w", store.ErrUnavailable, a.cfg.IOTimeout, err)
	}
	return err
}

// Own implements [grain.Context].
func (a *activation) Own(ctx context.Context) error {
	return a.fenced(ctx, func(context.Context) error { return nil })
}

// own takes ownership of a CreatedByWrite grain at its first write. A
// grain that another activation created meanwhile (the row now holds a
// record this activation never saw) is lost to this one.
func (a *activation) own(ctx context.Context) error {
	if a.owned {
		return nil
	}
	o, err := a.cfg.Store.Acquire(ctx, a.key, a.cfg.Self.ID)
	if err != nil {
		return fmt.Errorf("grain %s: take ownership: %w", a.key, err)
	}
	a.epoch, a.owned = o.Epoch, true
	if o.Record != nil {
		return fmt.Errorf("grain %s created by another activation: %w", a.key, store.ErrFenced)
	}
	return nil
}

// Passivate implements [grain.Context].
func (a *activation) Passivate(reason grain.Reason) {
	if reason == "" {
		reason = grain.ReasonRequested
	}
	a.requestPassivation(reason)
}

func (a *activation) lose(why string) {
	if a.state == stateLost {
		return
	}
	a.state = stateLost
	a.cfg.Metrics.FencedWrites.WithLabelValues(a.kind.Name).Inc()
	a.logger().Warn("grain ownership lost: a newer activation holds the epoch; stopping this one", "why", why)
	a.requestPassivation(grain.ReasonOwnershipLost)
}

func (a *activation) requestPassivation(reason grain.Reason) {
	if a.asked {
		return
	}
	a.asked = true
	a.system.Root.Send(a.parent, &passivateRequest{pid: a.self, reason: reason})
}

// Receive implements actor.Actor.
func (a *activation) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case *LocalRequest:
		a.sender, a.reply = ctx.Sender(), m.Reply
		reply, gerr := a.handle(m.Msg)
		switch {
		case a.turnDeferred:
		case m.Reply != nil:
			m.Reply.deliver(Answer{LocalReply: LocalReply{Msg: reply, Err: gerr}})
		default:
			ctx.Respond(&LocalReply{Msg: reply, Err: gerr})
		}
		a.endTurn()
	case *pb.GrainRequest:
		a.sender, a.turnRemote = ctx.Sender(), true
		a.handleRemote(ctx, m)
		a.endTurn()
	case *deactivate:
		a.stop(ctx, m.reason)
	case idleTick:
		a.checkIdle()
	case *actor.Stopping, *actor.Restarting:
	case *actor.Stopped:
		if a.timer != nil {
			a.timer.Stop()
		}
		if a.cancel != nil {
			a.cancel()
		}
	default:
		if h, ok := a.g.(grain.LocalHandler); ok && a.state == stateActive {
			a.guard("local message", func() { h.HandleLocal(a.ctx, a, m) })
		}
	}
}

func (a *activation) start(ctx actor.Context) {
	a.self, a.parent, a.system = ctx.Self(), ctx.Parent(), ctx.ActorSystem()
	sc := newStopCtx() // its children's registrations end with them (stopctx.go)
	a.ctx, a.cancel = sc, sc.cancel
	began := time.Now()
	var own store.Ownership
	if tracing.On() && !a.kind.Ephemeral && !a.creating {
		defer func() { a.started = newStartTrace(began, own, a.state) }()
	}
	if !a.kind.Ephemeral && !a.creating {
		ioctx, cancel := context.WithTimeout(a.ctx, a.cfg.IOTimeout)
		var err error
		if a.kind.CreatedByWrite {
			own, err = a.cfg.Store.AcquireExisting(ioctx, a.key, a.cfg.Self.ID)
		} else {
			own, err = a.cfg.Store.Acquire(ioctx, a.key, a.cfg.Self.ID)
		}
		cancel()
		switch {
		case a.kind.CreatedByWrite && errors.Is(err, store.ErrNotFound):
			// Not created: nothing to own until the grain writes.
		case err != nil:
			a.fail(fmt.Errorf("take ownership: %w", err))
			return
		default:
			a.owned = true
		}
	}
	a.epoch = own.Epoch
	a.g = a.kind.New(a.identity)
	var actErr error
	a.guard("activate", func() { actErr = a.g.Activate(a.ctx, a, own.Record) })
	if actErr != nil {
		a.fail(fmt.Errorf("activate: %w", actErr))
		return
	}
	if a.state == stateLost { // Activate saved and was fenced
		return
	}
	a.state = stateActive
	a.cfg.Metrics.Activations.WithLabelValues(a.kind.Name).Inc()
	a.cfg.Metrics.Active.WithLabelValues(a.kind.Name).Inc()
	a.counted = true
	a.cfg.Metrics.ActivationTime.WithLabelValues(a.kind.Name).Observe(time.Since(began).Seconds())
	a.lastSeen = a.cfg.Now()
	if a.kind.IdleTimeout > 0 {
		a.armIdle(a.kind.IdleTimeout)
	}
}

func (a *activation) fail(err error) {
	a.state = stateFailed
	a.cfg.Metrics.ActivationErrors.WithLabelValues(a.kind.Name).Inc()
	a.logger().Warn("grain activation failed", "err", err)
	a.requestPassivation(grain.ReasonActivationFailed)
}

// guard runs fn, turning a panic into a logged error so one bad message
// cannot take the activation (and the requests queued behind it) down.
func (a *activation) guard(what string, fn func()) (panicked bool) {
	return a.guardMsg(what, nil, fn)
}

// guardMsg is guard for the handling of msg: the message's type is
// named in the log only when fn panics (formatting it up front cost every
// request an allocation).
func (a *activation) guardMsg(what string, msg proto.Message, fn func()) (panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			if msg != nil {
				what = fmt.Sprintf("%s %T", what, msg)
			}
			a.logger().Error("grain panicked", "during", what, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	fn()
	return false
}

func (a *activation) handleRemote(ctx actor.Context, m *pb.GrainRequest) {
	msg, err := m.GetPayload().UnmarshalNew()
	if err != nil {
		ctx.Respond(a.errorf(pb.GrainError_CODE_REJECTED, "cannot decode payload %q: %v", m.GetPayload().GetTypeUrl(), err).Proto())
		return
	}
	reply, gerr := a.handle(msg)
	if a.turnDeferred {
		return
	}
	ctx.Respond(remoteReply(a.cfg.Self.ID, reply, gerr))
}

// remoteReply is the wire form of a grain's answer to a remote caller.
func remoteReply(node string, reply proto.Message, gerr *grain.Error) proto.Message {
	if gerr != nil {
		return gerr.Proto()
	}
	payload, err := anypb.New(reply)
	if err != nil {
		return (&grain.Error{Code: pb.GrainError_CODE_INTERNAL, Message: fmt.Sprintf("cannot encode reply: %v", err), Node: node}).Proto()
	}
	return &pb.GrainResponse{Payload: payload}
}

// Defer implements [grain.Context].
func (a *activation) Defer() func(proto.Message, error) {
	t := turn{sender: a.sender, reply: a.reply, remote: a.turnRemote}
	if !t.awaited() {
		// Not in a request that awaits an answer (a local message, or a
		// caller that sends without waiting): nothing to answer.
		return func(proto.Message, error) {}
	}
	a.turnDeferred = true
	d := &deferredAnswer{system: a.system, t: t, node: a.cfg.Self.ID,
		logBase: a.cfg.Logger, kind: a.kind.Name, identity: a.identity, epoch: a.epoch}
	return d.answer
}

// deferredAnswer answers a deferred request once (what Defer returns,
// with what it needs in one allocation).
type deferredAnswer struct {
	once                 sync.Once
	system               *actor.ActorSystem
	t                    turn // the request's, as it was deferred
	node, kind, identity string
	logBase              *slog.Logger
	epoch                uint64
}

func (d *deferredAnswer) answer(reply proto.Message, err error) {
	d.once.Do(func() {
		reply, gerr := classify(d.logger, d.node, reply, err)
		if d.t.remote {
			d.system.Root.Send(d.t.sender, remoteReply(d.node, reply, gerr))
			return
		}
		d.t.answer(d.system, reply, gerr)
	})
}

// logger is the activation's logger as it was when the request was
// deferred, made only to log an error (the activation may have moved on).
func (d *deferredAnswer) logger() *slog.Logger {
	return activationLogger(d.logBase, d.kind, d.identity, d.epoch)
}

// handle runs one request through the grain and classifies the outcome.
func (a *activation) handle(msg proto.Message) (proto.Message, *grain.Error) {
	if a.started != nil {
		traceStart(a.ctx, a.kind.Name, a.identity, msg, a.started) // before the receive span: the activation came first
		a.started = nil
	}
	switch a.state {
	case stateFailed:
		return nil, a.errorf(pb.GrainError_CODE_UNAVAILABLE, "activation failed; retry")
	case stateLost:
		return nil, a.errorf(pb.GrainError_CODE_OWNERSHIP_LOST, "activation lost ownership; retry")
	case stateStopping:
		return nil, a.errorf(pb.GrainError_CODE_DEACTIVATING, "activation is stopping; retry")
	}
	if a.asked {
		// Passivation was requested (the grain disposed its state, or went
		// idle): serving this request would rebuild what the go-ahead is
		// about to tear down mid-request. The caller retries and reaches
		// the next activation.
		return nil, a.errorf(pb.GrainError_CODE_DEACTIVATING, "activation is passivating; retry")
	}
	if msg == nil {
		return nil, a.errorf(pb.GrainError_CODE_REJECTED, "empty request")
	}
	a.lastSeen = a.cfg.Now()
	var (
		reply proto.Message
		err   error
	)
	ctx, endSpan := tracing.Receive(a.ctx, a.kind.Name, msg) // a child of the caller's span when msg carries its trace context
	defer endSpan()
	if fired, ok := msg.(*pb.ReminderFired); ok {
		var endFired func()
		ctx, endFired = reminderSpan(a.ctx, a.kind.Name, fired) // a root, linked to the span that set the reminder
		defer endFired()
	}
	receive := func() { reply, err = a.g.Receive(ctx, a, msg) }
	if fired, ok := msg.(*pb.ReminderFired); ok {
		if h, ok := a.g.(grain.ReminderHandler); ok {
			receive = func() {
				if err = h.OnReminder(ctx, a, fired); err == nil {
					reply = &pb.ReminderAck{}
				}
			}
		}
	}
	if a.guardMsg("receive", msg, receive) {
		a.answerNow()
		return nil, a.errorf(pb.GrainError_CODE_INTERNAL, "grain failed while handling the request")
	}
	if a.state == stateLost {
		// Whatever the grain answered, its write did not land: the caller
		// must retry against the activation that owns the grain now.
		a.answerNow()
		return nil, a.errorf(pb.GrainError_CODE_OWNERSHIP_LOST, "write fenced: another activation owns the grain; retry")
	}
	if a.turnDeferred {
		return nil, nil // answered later, by the function Defer returned
	}
	return classify(a.logger, a.cfg.Self.ID, reply, err)
}

// answerNow cancels a Defer of the current request: the activation
// answers it now (with an error), and a later deferred reply finds its
// caller gone.
func (a *activation) answerNow() {
	a.turnDeferred = false
}

// classify turns what a grain answered into the reply or the error its
// caller gets.
func classify(logger func() *slog.Logger, node string, reply proto.Message, err error) (proto.Message, *grain.Error) {
	errorf := func(code pb.GrainError_Code, format string, args ...any) *grain.Error {
		return &grain.Error{Code: code, Message: fmt.Sprintf(format, args...), Node: node}
	}
	if err != nil {
		if ge, ok := grain.AsError(err); ok {
			out := *ge
			if out.Node == "" {
				out.Node = node
			}
			return nil, &out
		}
		if store.Unavailable(err) {
			logger().Warn("grain request failed: store unavailable", "err", err)
			return nil, errorf(pb.GrainError_CODE_STORE_UNAVAILABLE, "store unavailable while handling the request (its writes may or may not have been applied): %v", err)
		}
		logger().Warn("grain request failed", "err", err)
		return nil, errorf(pb.GrainError_CODE_INTERNAL, "%v", err)
	}
	if reply == nil {
		return nil, errorf(pb.GrainError_CODE_INTERNAL, "grain returned no reply")
	}
	return reply, nil
}

func (a *activation) errorf(code pb.GrainError_Code, format string, args ...any) *grain.Error {
	return &grain.Error{Code: code, Message: fmt.Sprintf(format, args...), Node: a.cfg.Self.ID}
}

func (a *activation) armIdle(d time.Duration) {
	self, root := a.self, a.system.Root
	a.timer = time.AfterFunc(d, func() { root.Send(self, idleTick{}) })
}

func (a *activation) checkIdle() {
	if a.state != stateActive || a.asked {
		return
	}
	idle := a.cfg.Now().Sub(a.lastSeen)
	if idle >= a.kind.IdleTimeout {
		a.requestPassivation(grain.ReasonIdle)
		return
	}
	a.armIdle(a.kind.IdleTimeout - idle)
}

// stop runs after the placement actor's go-ahead: no request can arrive
// after this message.
func (a *activation) stop(ctx actor.Context, reason grain.Reason) {
	if a.g != nil && (a.state == stateActive || a.state == stateLost) {
		release := a.state == stateActive
		a.guard("deactivate", func() { a.g.Deactivate(a.ctx, a, reason) })
		if release && a.state != stateLost && a.owned && !a.released {
			ioctx, cancel := context.WithTimeout(a.ctx, a.cfg.IOTimeout)
			if err := a.cfg.Store.Release(ioctx, a.key, a.epoch); err != nil && !errors.Is(err, store.ErrFenced) {
				a.logger().Warn("release grain ownership", "err", err)
			}
			cancel()
		}
	}
	if a.counted {
		a.cfg.Metrics.Active.WithLabelValues(a.kind.Name).Dec()
		a.counted = false
	}
	a.cfg.Metrics.Deactivations.WithLabelValues(a.kind.Name, string(reason)).Inc()
	a.logger().Debug("grain deactivated", "reason", reason)
	a.state = stateStopping
	ctx.Stop(a.self)
}
