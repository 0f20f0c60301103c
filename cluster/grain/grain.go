// Package grain is the contract between mcpgrain's cluster runtime and the
// virtual grains it hosts (sessions, continuations, tasks, the probe).
//
// A grain is a virtual actor: it always exists logically, and the cluster
// activates it on the node that owns its identity the first time a request
// arrives (executor's "Durable Object instance"). Between requests it may be
// passivated (executor's "hibernation"): the in-memory activation is dropped,
// its durable record stays in the store, and the next request activates it
// again, restoring from that record.
//
// The runtime guarantees a grain implementation:
//   - one message at a time (it runs inside one protoactor actor);
//   - ownership: Activate runs only after this activation took ownership in
//     the store with a new epoch, and [Context.Save] is fenced by that epoch,
//     so a stale duplicate activation can never overwrite newer state; an
//     activation whose save is fenced is stopped;
//   - no lost requests: a request that reaches a passivating activation is
//     delivered to the next activation instead of being dropped.
//
// A node hosts the kinds listed in cluster.Config.Kinds (and those its
// cluster.Config.Hosts build), and cluster.Node.Request reaches a grain by
// kind and identity (see the example of [Kind]). A grain reaches other
// grains through its [Context], which embeds the node's [Cluster]: one
// [Requester] for the whole code base, plus one-way messages and
// broadcasts (see the example of [Cluster]).
package grain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Kind describes one grain kind hosted by a node.
type Kind struct {
	// Name is the kind's name, unique in the cluster, e.g. "session".
	Name string
	// New makes the in-memory grain for one activation of identity.
	New func(identity string) Grain
	// IdleTimeout passivates an activation that received no request for
	// this long. Zero never passivates on idleness: the grain decides itself
	// with [Context.Passivate] (sessions do, from their reminders).
	IdleTimeout time.Duration
	// Ephemeral grains keep no durable state: activating one does not take
	// ownership in the store (no store write, epoch 0) and Save and
	// reminders fail. For grains whose state may be lost with their node.
	Ephemeral bool
	// CreatedByWrite grains exist only once written: activating one whose
	// row is not in the store takes no ownership (nothing is written, epoch
	// 0, Activate gets a nil record) until its first fenced write or
	// [Context.Own]. An activation that only answers "no such grain" —
	// e.g. for a guessed id — leaves no trace in the store. If another
	// activation created the grain meanwhile, the first write fails like a
	// fenced one (the caller retries on the current activation).
	CreatedByWrite bool
	// Creates, for a CreatedByWrite kind, reports whether first — the
	// request an activation is started for, when it comes from this node —
	// creates the grain under a new identity. Such an activation does not
	// look for the grain's row (a write transaction that would only learn
	// there is none); if the row exists after all, its first write fails
	// like a fenced one. Nil: every activation looks.
	Creates func(first proto.Message) bool
}

// Grain is one activation's behaviour. Methods are called one at a time.
type Grain interface {
	// Activate runs once, after ownership was taken; record is the durable
	// record as last saved, or nil for a grain that never saved one. An
	// error fails the activation: queued requests get a retryable
	// "unavailable" error and the activation stops.
	Activate(ctx context.Context, g Context, record []byte) error
	// Receive handles one request and returns the reply. Return an error
	// made with [Reject] for a request the grain refuses; any other error is
	// reported to the caller as an internal error. A panic is recovered and
	// reported as an internal error; the activation stays up.
	Receive(ctx context.Context, g Context, msg proto.Message) (proto.Message, error)
	// Deactivate runs once before the activation stops, for any reason.
	// Saves are still fenced here; after [ReasonOwnershipLost] they fail.
	Deactivate(ctx context.Context, g Context, reason Reason)
}

// LocalHandler is implemented by grains that also receive local, non-request
// messages (timers and callbacks they send to [Context.Self]).
type LocalHandler interface {
	HandleLocal(ctx context.Context, g Context, msg any)
}

// ReminderHandler is implemented by grains that handle their reminders.
// Delivery is at least once; an error makes the node retry the reminder at
// its next scan.
type ReminderHandler interface {
	OnReminder(ctx context.Context, g Context, fired *pb.ReminderFired) error
}

// Context is what the runtime gives a grain activation: its identity,
// its durable state and reminders, and — through the embedded [Cluster] —
// the other grains of the cluster (g.Request, g.Tell, g.Broadcast), from
// its turn or from any goroutine it starts. A grain never needs a handle
// on the node beyond it.
type Context interface {
	Cluster
	// Kind is the grain's kind name.
	Kind() string
	// Identity is the grain's identity within its kind.
	Identity() string
	// Node is the id of the node hosting this activation.
	Node() string
	// Epoch is this activation's ownership epoch (0 until a
	// [Kind.CreatedByWrite] grain that did not exist took ownership).
	Epoch() uint64
	// Own takes ownership in the store now, if this activation does not
	// hold it yet ([Kind.CreatedByWrite]): for a grain that must know its
	// epoch before its first write. It fails like a fenced write if another
	// activation created the grain meanwhile.
	Own(ctx context.Context) error
	// Save durably replaces the grain's record, fenced by Epoch. If another
	// activation took ownership since, it returns an error wrapping
	// store.ErrFenced and the activation stops after the current message
	// (reason [ReasonOwnershipLost]).
	Save(ctx context.Context, record []byte) error
	// Defer lets the grain answer the request it is handling later, from
	// any goroutine: Receive returns (nil, nil) after calling it, and the
	// returned function sends the reply (an error is classified as one
	// Receive returns), once; later calls do nothing. The activation
	// serves other requests meanwhile. For work that must not hold the
	// grain's turn (a long wait on something else). Outside a request that
	// awaits an answer it returns a function that does nothing.
	Defer() func(reply proto.Message, err error)
	// Commit applies several writes — the record, reminders set and
	// cancelled — in one store transaction fenced by Epoch, taking
	// ownership in the same transaction if this activation does not hold
	// it yet ([Kind.CreatedByWrite]). A lifecycle step is one Commit.
	// Fenced like Save.
	Commit(ctx context.Context, w store.Writes) error
	// Delete removes the grain from the store — its record and reminders —
	// fenced by Epoch, and passivates the activation. A later activation
	// finds no such grain (Activate gets a nil record; a
	// [Kind.CreatedByWrite] grain writes nothing until created again). For
	// grains whose identity is never reused: see store.Store.Delete.
	Delete(ctx context.Context) error
	// SetReminder creates or replaces the grain's durable reminder name,
	// due at due and then every period (0: once), fenced by Epoch. When it
	// fires, the grain receives a *mcpgrainv1.ReminderFired (at
	// [ReminderHandler.OnReminder] if implemented, else at Receive), even if
	// it was passivated meanwhile.
	SetReminder(ctx context.Context, name string, due time.Time, period time.Duration) error
	// SetReminders creates or replaces several reminders in one store
	// transaction (Grain and Version fields are ignored).
	SetReminders(ctx context.Context, rs ...store.Reminder) error
	// CancelReminders deletes the grain's reminders by name, fenced by Epoch.
	CancelReminders(ctx context.Context, names ...string) error
	// RemindersStored tells the node's reminder service of the grain's
	// reminders that another domain's transaction stored (set, as
	// stored, with versions) or cancelled, fenced by this activation's
	// epoch (store.RemindersIn; a durable pause's journal carries its
	// deadline): it arms and disarms them as after SetReminders and
	// CancelReminders, and writes nothing. Safe to call from any
	// goroutine.
	RemindersStored(set []store.Reminder, cancelled []string)
	// Reminders lists the grain's reminders.
	Reminders(ctx context.Context) ([]store.Reminder, error)
	// Passivate asks the runtime to deactivate this activation after the
	// current message with reason. Requests that arrive meanwhile are held
	// and delivered to the next activation.
	Passivate(reason Reason)
	// Self is the activation's actor, for timers and local messages, which
	// arrive at [LocalHandler.HandleLocal].
	Self() *actor.PID
	// ActorSystem is the node's actor system.
	ActorSystem() *actor.ActorSystem
	// Logger logs with the grain's kind, identity and epoch attached.
	Logger() *slog.Logger
}

// Reason says why an activation stops.
type Reason string

// Reasons an activation stops. They label the deactivation metrics.
const (
	ReasonIdle             Reason = "idle"              // no request within Kind.IdleTimeout, or the grain's own idle decision (sessions)
	ReasonRequested        Reason = "requested"         // the grain called Passivate without a more specific reason
	ReasonRebalance        Reason = "rebalance"         // membership changed and another node owns it now
	ReasonOwnershipLost    Reason = "ownership_lost"    // a fenced write failed, or this node's membership lapsed
	ReasonShutdown         Reason = "shutdown"          // the node is stopping
	ReasonActivationFailed Reason = "activation_failed" // taking ownership or Activate failed
)

// Error is a classified grain failure, returned to callers of
// cluster.Node.Request.
type Error struct {
	// Code classifies the failure.
	Code pb.GrainError_Code
	// Message is a human-readable detail.
	Message string
	// Node is the id of the node that reported it.
	Node string
}

// Error implements error.
func (e *Error) Error() string {
	code := e.Code.String()
	if e.Node != "" {
		return fmt.Sprintf("grain %s on %s: %s", code, e.Node, e.Message)
	}
	return fmt.Sprintf("grain %s: %s", code, e.Message)
}

// Retryable reports whether sending the same request again can succeed:
// the request was not executed (not owner, deactivating, unavailable,
// overloaded, ownership lost, kind not hosted yet).
func (e *Error) Retryable() bool {
	switch e.Code {
	case pb.GrainError_CODE_NOT_OWNER, pb.GrainError_CODE_DEACTIVATING, pb.GrainError_CODE_OWNERSHIP_LOST,
		pb.GrainError_CODE_UNAVAILABLE, pb.GrainError_CODE_UNKNOWN_KIND, pb.GrainError_CODE_OVERLOADED:
		return true
	}
	return false
}

// Proto converts e to its wire form.
func (e *Error) Proto() *pb.GrainError {
	return &pb.GrainError{Code: e.Code, Message: e.Message, Node: e.Node}
}

// FromProto converts a wire error.
func FromProto(p *pb.GrainError) *Error {
	return &Error{Code: p.GetCode(), Message: p.GetMessage(), Node: p.GetNode()}
}

// Reject returns an error that tells the caller the grain refused the
// request (code REJECTED, not retryable).
func Reject(format string, args ...any) error {
	return &Error{Code: pb.GrainError_CODE_REJECTED, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error if it is or wraps one.
func AsError(err error) (*Error, bool) {
	var ge *Error
	ok := errors.As(err, &ge)
	return ge, ok
}

// Key is the store key of a grain: "<kind>/<identity>".
func Key(kind, identity string) string { return kind + "/" + identity }

// Keyed is a Context that knows its grain's store key (the node's
// activations do: they keep it).
type Keyed interface {
	// Key is Key(Kind(), Identity()).
	Key() string
}

// KeyOf is the store key of g's grain: the one g keeps if it is Keyed
// (no new string: a resident grain that holds its key shares it), else
// made from its kind and identity.
func KeyOf(g Context) string {
	if k, ok := g.(Keyed); ok {
		return k.Key()
	}
	return Key(g.Kind(), g.Identity())
}
