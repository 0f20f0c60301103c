package placement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
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
	kind     grain.Kind
	identity string
	key      string

	g        grain.Grain
	state    activationState
	epoch    uint64
	self     *actor.PID
	parent   *actor.PID
	system   *actor.ActorSystem
	logger   *slog.Logger
	ctx      context.Context // cancelled when the activation stops
	cancel   context.CancelFunc
	asked    bool // passivation requested
	counted  bool // counted in the Active gauge
	lastSeen time.Time
	timer    *time.Timer
}

var _ grain.Context = (*activation)(nil)

func (a *activation) Kind() string                    { return a.kind.Name }
func (a *activation) Identity() string                { return a.identity }
func (a *activation) Node() string                    { return a.cfg.Self.ID }
func (a *activation) Epoch() uint64                   { return a.epoch }
func (a *activation) Self() *actor.PID                { return a.self }
func (a *activation) ActorSystem() *actor.ActorSystem { return a.system }
func (a *activation) Logger() *slog.Logger            { return a.logger }

// Save implements [grain.Context]: a write fenced by the activation's epoch.
func (a *activation) Save(ctx context.Context, record []byte) error {
	return a.fenced(ctx, func(ctx context.Context) error { return a.cfg.Store.Save(ctx, a.key, a.epoch, record) })
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
	ctx, cancel := context.WithTimeout(ctx, a.cfg.IOTimeout)
	defer cancel()
	err := write(ctx)
	if errors.Is(err, store.ErrFenced) {
		a.lose("write fenced")
	}
	return err
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
	a.logger.Warn("grain ownership lost: a newer activation holds the epoch; stopping this one", "why", why)
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
		reply, gerr := a.handle(m.Msg)
		ctx.Respond(&LocalReply{Msg: reply, Err: gerr})
	case *pb.GrainRequest:
		a.handleRemote(ctx, m)
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
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.logger = a.cfg.Logger.With("kind", a.kind.Name, "identity", a.identity)
	began := time.Now()
	var own store.Ownership
	if !a.kind.Ephemeral {
		ioctx, cancel := context.WithTimeout(a.ctx, a.cfg.IOTimeout)
		var err error
		own, err = a.cfg.Store.Acquire(ioctx, a.key, a.cfg.Self.ID)
		cancel()
		if err != nil {
			a.fail(fmt.Errorf("take ownership: %w", err))
			return
		}
	}
	a.epoch = own.Epoch
	a.logger = a.logger.With("epoch", a.epoch)
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
	a.logger.Warn("grain activation failed", "err", err)
	a.requestPassivation(grain.ReasonActivationFailed)
}

// guard runs fn, turning a panic into a logged error so one bad message
// cannot take the activation (and the requests queued behind it) down.
func (a *activation) guard(what string, fn func()) (panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			a.logger.Error("grain panicked", "during", what, "panic", r, "stack", string(debug.Stack()))
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
	if gerr != nil {
		ctx.Respond(gerr.Proto())
		return
	}
	payload, err := anypb.New(reply)
	if err != nil {
		ctx.Respond(a.errorf(pb.GrainError_CODE_INTERNAL, "cannot encode reply: %v", err).Proto())
		return
	}
	ctx.Respond(&pb.GrainResponse{Payload: payload})
}

// handle runs one request through the grain and classifies the outcome.
func (a *activation) handle(msg proto.Message) (proto.Message, *grain.Error) {
	switch a.state {
	case stateFailed:
		return nil, a.errorf(pb.GrainError_CODE_UNAVAILABLE, "activation failed; retry")
	case stateLost:
		return nil, a.errorf(pb.GrainError_CODE_OWNERSHIP_LOST, "activation lost ownership; retry")
	case stateStopping:
		return nil, a.errorf(pb.GrainError_CODE_DEACTIVATING, "activation is stopping; retry")
	}
	if msg == nil {
		return nil, a.errorf(pb.GrainError_CODE_REJECTED, "empty request")
	}
	a.lastSeen = a.cfg.Now()
	var (
		reply proto.Message
		err   error
	)
	receive := func() { reply, err = a.g.Receive(a.ctx, a, msg) }
	if fired, ok := msg.(*pb.ReminderFired); ok {
		if h, ok := a.g.(grain.ReminderHandler); ok {
			receive = func() {
				if err = h.OnReminder(a.ctx, a, fired); err == nil {
					reply = &pb.ReminderAck{}
				}
			}
		}
	}
	if a.guard(fmt.Sprintf("receive %T", msg), receive) {
		return nil, a.errorf(pb.GrainError_CODE_INTERNAL, "grain failed while handling the request")
	}
	if a.state == stateLost {
		// Whatever the grain answered, its write did not land: the caller
		// must retry against the activation that owns the grain now.
		return nil, a.errorf(pb.GrainError_CODE_OWNERSHIP_LOST, "write fenced: another activation owns the grain; retry")
	}
	if err != nil {
		if ge, ok := grain.AsError(err); ok {
			out := *ge
			if out.Node == "" {
				out.Node = a.cfg.Self.ID
			}
			return nil, &out
		}
		a.logger.Warn("grain request failed", "err", err)
		return nil, a.errorf(pb.GrainError_CODE_INTERNAL, "%v", err)
	}
	if reply == nil {
		return nil, a.errorf(pb.GrainError_CODE_INTERNAL, "grain returned no reply")
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
		if release && a.state != stateLost && !a.kind.Ephemeral {
			ioctx, cancel := context.WithTimeout(a.ctx, a.cfg.IOTimeout)
			if err := a.cfg.Store.Release(ioctx, a.key, a.epoch); err != nil && !errors.Is(err, store.ErrFenced) {
				a.logger.Warn("release grain ownership", "err", err)
			}
			cancel()
		}
	}
	if a.counted {
		a.cfg.Metrics.Active.WithLabelValues(a.kind.Name).Dec()
		a.counted = false
	}
	a.cfg.Metrics.Deactivations.WithLabelValues(a.kind.Name, string(reason)).Inc()
	a.logger.Debug("grain deactivated", "reason", reason)
	a.state = stateStopping
	ctx.Stop(a.self)
}
