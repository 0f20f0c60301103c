// Package inspect is one session's story on demand: the current state of a
// session, a task or a paused execution (and a user's live handles), read
// from any node (the grain's
// owner answers for a resident session; the store for a passivated one),
// served to admins of its organization at GET /api/inspect/… (Register)
// and printed by `mcpgrain inspect` (Text).
package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// ErrNotFound is returned for an id that names nothing (or nothing the
// caller may inspect: the route answers both alike).
var ErrNotFound = errors.New("inspect: not found")

// Inspector reads the state of sessions, tasks and executions.
type Inspector struct {
	// Node routes an inspection to a resident session's owner.
	Node *cluster.Node
	// Store holds ownership, records, reminders, tasks and the execution
	// directory.
	Store store.Store
	// HandleList lists a user's handles (nil: the route answers 503).
	HandleList HandleLister
}

// Session is a session's state as inspection reports it.
type Session struct {
	ID  string `json:"id"`
	Org string `json:"org"`
	// User created the session.
	User string `json:"user"`
	// OwnerNode is the node whose activation holds the session; "" when
	// it is passivated (no activation anywhere).
	OwnerNode string `json:"ownerNode,omitempty"`
	// Passivated: no activation holds the session (it is restored on its
	// next request); Resident: its MCP runtime is built.
	Passivated bool   `json:"passivated"`
	Resident   bool   `json:"resident"`
	Epoch      uint64 `json:"epoch"`
	// Ended is "deleted" or "expired" once the session ended.
	Ended   string `json:"ended,omitempty"`
	Streams int    `json:"streams"`
	// Paused counts the pauses held in the runtime's memory (they keep
	// the session resident); DurablePaused those journaled in the store.
	Paused        int        `json:"pausedExecutions"`
	DurablePaused int        `json:"durablePausedExecutions"`
	Running       int        `json:"runningExecutions"`
	Leases        []string   `json:"leases"`
	Reminders     []Reminder `json:"reminders"`
	LastDispose   *Disposal  `json:"lastDispose,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	LastActivity  time.Time  `json:"lastActivity"`
	// Requests are the activation's last requests, oldest first (with
	// their trace ids when tracing is on); RequestsNote says why there
	// are none.
	Requests     []Request `json:"recentRequests"`
	RequestsNote string    `json:"recentRequestsNote,omitempty"`
}

// Reminder is a durable reminder and when it is due.
type Reminder struct {
	Name string    `json:"name"`
	Due  time.Time `json:"due"`
}

// Disposal is a runtime's disposal: why and when.
type Disposal struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Request is one request a session's activation served.
type Request struct {
	Method  string    `json:"method"`
	At      time.Time `json:"at"`
	TraceID string    `json:"traceId,omitempty"`
}

// notePassivated explains an empty request list of a passivated session.
const notePassivated = "passivated: the last requests are kept in memory by the session's activation only"

// Session inspects session id: a passivated session from the store
// (without waking it), a resident one from its owner's activation.
func (in Inspector) Session(ctx context.Context, id string) (Session, error) {
	key := grain.Key(exchange.KindSession, id)
	own, err := in.Store.Load(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return Session{}, ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("inspect: session %s: %w", id, err)
	}
	if own.Owner == "" {
		return in.passivated(ctx, id, key, own)
	}
	reply, err := in.Node.Request(ctx, exchange.KindSession, id, &pb.SessionInspect{}, cluster.Idempotent())
	if err != nil {
		return Session{}, fmt.Errorf("inspect: session %s: %w", id, err)
	}
	sn, ok := reply.(*pb.SessionSnapshot)
	if !ok || !sn.GetExists() {
		return Session{}, ErrNotFound
	}
	return FromSnapshot(id, sn), nil
}

// passivated describes a session no activation holds, from its record and
// reminders.
func (in Inspector) passivated(ctx context.Context, id, key string, own store.Ownership) (Session, error) {
	rec := &pb.SessionRecord{}
	if len(own.Record) == 0 {
		return Session{}, ErrNotFound
	}
	if err := proto.Unmarshal(own.Record, rec); err != nil {
		return Session{}, fmt.Errorf("inspect: session %s: decode record: %w", id, err)
	}
	rs, err := in.Store.Reminders(ctx, key)
	if err != nil {
		return Session{}, fmt.Errorf("inspect: session %s: reminders: %w", id, err)
	}
	sn := &pb.SessionSnapshot{Exists: true, Principal: rec.GetPrincipal(), CreatedAtMs: rec.GetCreatedAtMs(),
		LastActivityMs: rec.GetLastActivityMs(), Epoch: own.Epoch, LastDispose: rec.GetLastDispose()}
	sn.Ended = rec.GetTombstone().GetReason()
	for _, r := range rs {
		sn.RemindersDue = append(sn.RemindersDue, &pb.ReminderDue{Name: r.Name, DueAtMs: r.DueAt.UnixMilli()})
	}
	s := FromSnapshot(id, sn)
	s.Passivated, s.RequestsNote = true, notePassivated
	return s, nil
}

// FromSnapshot is the Session a session activation's snapshot describes.
func FromSnapshot(id string, sn *pb.SessionSnapshot) Session {
	s := Session{ID: id, Org: sn.GetPrincipal().GetOrg(), User: sn.GetPrincipal().GetUser(), OwnerNode: sn.GetNode(),
		Resident: sn.GetResident(), Epoch: sn.GetEpoch(), Ended: sn.GetEnded(), Streams: int(sn.GetStreams()),
		Paused: int(sn.GetPaused()), DurablePaused: int(sn.GetDurablePaused()), Running: int(sn.GetRunning()), Leases: append([]string{}, sn.GetLeases()...),
		CreatedAt: ms(sn.GetCreatedAtMs()), LastActivity: ms(sn.GetLastActivityMs()), Reminders: []Reminder{}, Requests: []Request{}}
	for _, r := range sn.GetRemindersDue() {
		s.Reminders = append(s.Reminders, Reminder{Name: r.GetName(), Due: ms(r.GetDueAtMs())})
	}
	if d := sn.GetLastDispose(); d != nil {
		s.LastDispose = &Disposal{Reason: d.GetReason(), At: ms(d.GetAtMs())}
	}
	for _, r := range sn.GetRecentRequests() {
		s.Requests = append(s.Requests, Request{Method: r.GetMethod(), At: ms(r.GetAtMs()), TraceID: r.GetTraceId()})
	}
	return s
}

// ms is a Unix millisecond time in UTC (the zero time for 0).
func ms(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// Task is a task's state as inspection reports it.
type Task struct {
	ID            string `json:"id"`
	Org           string `json:"org"`
	User          string `json:"user"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	Attempts      int    `json:"attempts"`
	// OwnerNode is the node whose task grain activation holds it ("":
	// none, Passivated).
	OwnerNode  string    `json:"ownerNode,omitempty"`
	Passivated bool      `json:"passivated"`
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// Task inspects task id (from the store: tasks are written through).
func (in Inspector) Task(ctx context.Context, id string, now time.Time) (Task, error) {
	t, err := taskstore.New(in.Store).GetTask(ctx, id, now)
	if errors.Is(err, store.ErrNotFound) {
		return Task{}, ErrNotFound
	}
	if err != nil {
		return Task{}, fmt.Errorf("inspect: task %s: %w", id, err)
	}
	out := Task{ID: t.ID, Org: t.Org, User: t.User, Status: t.Status, StatusMessage: t.StatusMessage, Attempts: t.Attempts,
		LeaseUntil: t.LeaseUntil.UTC(), CreatedAt: t.Created.UTC(), UpdatedAt: t.Updated.UTC(), ExpiresAt: t.Expires.UTC()}
	own, err := in.Store.Load(ctx, grain.Key(exchange.KindTask, id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Task{}, fmt.Errorf("inspect: task %s: ownership: %w", id, err)
	}
	out.OwnerNode, out.Passivated = own.Owner, own.Owner == ""
	return out, nil
}

// Execution is a paused (or settled) execution's state as inspection
// reports it, with its session's.
type Execution struct {
	ID        string    `json:"id"`
	Org       string    `json:"org"`
	User      string    `json:"user"`
	SessionID string    `json:"sessionId,omitempty"`
	Message   string    `json:"message,omitempty"`
	Deadline  time.Time `json:"deadline"`
	// Settled is when it stopped waiting (zero: still paused).
	Settled   time.Time `json:"settled,omitzero"`
	DecidedBy string    `json:"decidedBy,omitempty"`
	Decision  string    `json:"decision,omitempty"`
	// Session is the owning session's state (nil: none, or it is gone).
	Session *Session `json:"session,omitempty"`
}

// Execution inspects paused execution id through the execution directory,
// with its session.
func (in Inspector) Execution(ctx context.Context, id string) (Execution, error) {
	e, err := directory.New(in.Store).GetExecution(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Execution{}, ErrNotFound
	}
	if err != nil {
		return Execution{}, fmt.Errorf("inspect: execution %s: %w", id, err)
	}
	out := Execution{ID: e.ID, Org: e.Org, User: e.User, SessionID: e.Session, Message: e.Message,
		Deadline: e.Deadline.UTC(), DecidedBy: e.DecidedBy, Decision: e.Decision}
	if !e.Settled.IsZero() {
		out.Settled = e.Settled.UTC()
	}
	if e.Session != "" {
		s, err := in.Session(ctx, e.Session)
		switch {
		case err == nil && s.Org == e.Org:
			out.Session = &s
		case err != nil && !errors.Is(err, ErrNotFound):
			return Execution{}, err
		}
	}
	return out, nil
}
