package session

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// Disposal reasons (label values of mcpgrain_runtime_disposals_total).
const (
	DisposeIdle          = "idle"
	DisposeCap           = "cap"
	DisposeDelete        = "delete"
	DisposeExpired       = "expired"
	DisposeOwnershipLost = "ownership_lost"
	DisposeRebalance     = "rebalance"
	DisposeShutdown      = "shutdown"
)

// session is one session grain activation. All methods run in the grain's
// actor, one message at a time; runtime goroutines reach it only through
// local messages (leaseMsg).
type session struct {
	h  *Host
	id string

	rec *pb.SessionRecord // nil: no such session
	// creating is the record of a session being created by its initialize
	// exchange: written (with the handshake state go-sdk produced) when
	// that state is reported, before the initialize response goes out;
	// nil otherwise.
	creating *pb.SessionRecord
	rt       Runtime // nil: not initialized (passivated or never built)
	res      *resident
	last     time.Time // in-memory last activity
	ended    bool
	// carrying: the machine's actions are being carried out (carryOut).
	carrying bool
	// unsaved: rec dropped the decisions of executions whose journal
	// settled them (releaseLease) and was not written since: the
	// record's next write carries it, the passivation's at the latest.
	unsaved bool
	// m is the lifecycle machine (machine.go); the grain carries out
	// what it decides (executor.go).
	m machine
	// retired is the runtime the last disposal closed, until the
	// activation's last writes (actRetireWrites) read its counters.
	retired Runtime
	queue   *actionQueue // the machine's queue, while it has one
	// admitting is the request being admitted (an exchange or a
	// SessionCreate), while the machine's decision about it is carried
	// out.
	admitting *admission
	hooks     *hooks
	// The idle alarm (executor's alarm) is a timer of this activation, not
	// a durable reminder: it only ever disposes a resident runtime, and a
	// runtime does not outlive its node. The machine tells the armed alarm
	// from superseded ones.
	idleTimer clock.Timer
	// epoch is the activation's ownership epoch, for the runtime's journal
	// (read from its goroutines; set once the session exists).
	epoch atomic.Uint64
	// exchanges cancels the HTTP exchanges in flight, by exchange id (nil
	// when none: see deleteKey, as for parked).
	exchanges map[string]context.CancelFunc
	// parked holds the standalone GET streams held open while the runtime
	// is not resident (see park), by exchange id; wake ends them.
	parked   map[string]parkedStream
	parkSeq  uint64
	wake     chan struct{}
	persists int64 // last activity as persisted in the record (Unix ms)
	// recent is the activation's last requests (inspect.go); disposed the
	// last disposal of its runtime, until the record keeps it.
	recent   requestRing
	disposed *pb.Disposal
}

func (s *session) now() time.Time { return s.h.cfg.Clock.Now() }

func (s *session) Activate(_ context.Context, g grain.Context, record []byte) error {
	s.epoch.Store(g.Epoch())
	if record == nil {
		return nil
	}
	rec := &pb.SessionRecord{}
	if err := proto.Unmarshal(record, rec); err != nil {
		return fmt.Errorf("session %s: decode record: %w", s.id, err)
	}
	s.rec, s.ended = rec, rec.GetTombstone() != nil
	s.last = time.UnixMilli(rec.GetLastActivityMs())
	s.persists = rec.GetLastActivityMs()
	return nil
}

func (s *session) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	// An activation without a runtime (woken only to answer "not found",
	// an inspection, a stale eviction request or a reminder) does not stay
	// resident.
	defer s.passivateIfIdle(ctx, g)
	switch m := msg.(type) {
	case *pb.SessionCreate:
		return s.create(ctx, g, m)
	case *pb.SessionAccess:
		return s.access(ctx, g, m.GetPrincipal())
	case *pb.SessionDelete:
		return s.delete(ctx, g, m.GetPrincipal())
	case *pb.RequestCapEviction:
		return &pb.CapEvictionReply{Evicted: s.capEviction(ctx, g, m.GetLinkContext())}, nil
	case *pb.SessionInspect:
		return s.snapshot(ctx, g), nil
	case *pb.HttpExchange:
		return s.exchange(ctx, g, m)
	case *pb.ExecutionGet:
		if err := s.restoreForExecutions(ctx, g); err != nil {
			return nil, err
		}
		return s.executionGet(m), nil
	case *pb.ExecutionList:
		return s.executionList(m), nil
	case *pb.ExecutionDecide:
		return s.executionDecide(ctx, g, m)
	case *pb.ExecutionResumeForModel:
		if s.rec != nil && principalEqual(s.rec.GetPrincipal(), m.GetPrincipal()) {
			if err := s.restoreForExecutions(ctx, g); err != nil {
				return nil, err
			}
		}
		return s.executionResume(ctx, g, m), nil
	case *pb.AskContinue:
		return s.askContinue(ctx, g, m)
	case *pb.ExchangeCancel:
		if cancel, ok := s.exchanges[m.GetExchangeId()]; ok {
			cancel()
		}
		if p, ok := s.parked[m.GetExchangeId()]; ok {
			p.cancel()
		}
		return &pb.ExchangeCancelled{}, nil
	default:
		return nil, grain.Reject("session: unsupported request %T", msg)
	}
}

func (s *session) reply(g grain.Context, st pb.SessionReply_Status, restored bool) *pb.SessionReply {
	return &pb.SessionReply{Status: st, Restored: restored, Node: g.Node(), Epoch: g.Epoch()}
}

// create creates the session at once (a SessionCreate request): the
// machine builds the runtime first (a session whose runtime cannot start
// is not created), then commits the record and its expiry reminder in one
// transaction that also takes ownership; a failed commit drops the
// runtime.
func (s *session) create(ctx context.Context, g grain.Context, m *pb.SessionCreate) (proto.Message, error) {
	adm := &admission{status: pb.SessionReply_STATUS_OK, principal: m.GetPrincipal()}
	s.admitting = adm
	defer func() { s.admitting = nil }()
	if err := s.step(ctx, g, event{kind: evCreate, found: s.rec != nil, noPrincipal: m.GetPrincipal().GetUser() == ""}); err != nil {
		return nil, err
	}
	if adm.status != pb.SessionReply_STATUS_OK {
		return s.reply(g, adm.status, false), nil
	}
	if err := s.step(ctx, g, event{kind: evStateReported, stale: s.rt == nil, found: s.rec != nil, ended: s.ended, state: m.GetRuntimeState()}); err != nil {
		_ = s.step(ctx, g, event{kind: evCreateFailed, direct: true})
		return nil, err
	}
	return s.reply(g, pb.SessionReply_STATUS_OK, true), nil
}

// beginCreate begins the record of the session being created
// (actBeginCreate): nothing is written until the runtime reports the
// handshake state (saveState), so the record is written once, with it.
func (s *session) beginCreate(p *pb.Principal) {
	now := s.now()
	s.creating = &pb.SessionRecord{Principal: p, CreatedAtMs: now.UnixMilli(), LastActivityMs: now.UnixMilli()}
}

// commitCreate writes the new session into existence: ownership, record
// and expiry reminder, one transaction.
func (s *session) commitCreate(ctx context.Context, g grain.Context, rec *pb.SessionRecord) error {
	b, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("session %s: encode record: %w", s.id, err)
	}
	expiry := store.Reminder{Name: ReminderExpiry, DueAt: time.UnixMilli(rec.GetLastActivityMs()).Add(s.h.cfg.SessionTTL)}
	if err := g.Commit(ctx, store.Writes{Record: b, SetReminders: []store.Reminder{expiry}}); err != nil {
		return fmt.Errorf("session %s: create: %w", s.id, err)
	}
	s.rec, s.creating = rec, nil
	s.persists = rec.GetLastActivityMs()
	s.epoch.Store(g.Epoch())
	return nil
}

// access is a SessionAccess: admitted like an exchange (the owner
// checked, the runtime built if it is not resident), it is activity.
func (s *session) access(ctx context.Context, g grain.Context, p *pb.Principal) (proto.Message, error) {
	adm, err := s.admitRequest(ctx, g, event{kind: evExchange}, &admission{principal: p})
	if err != nil {
		return nil, err
	}
	if adm.status != pb.SessionReply_STATUS_OK {
		return s.reply(g, adm.status, false), nil
	}
	s.markActivity()
	return s.reply(g, pb.SessionReply_STATUS_OK, adm.restored), nil
}

// delete is a SessionDelete (DELETE /mcp): the owner checked, the machine
// ends the session.
func (s *session) delete(ctx context.Context, g grain.Context, p *pb.Principal) (proto.Message, error) {
	adm, err := s.admitRequest(ctx, g, event{kind: evDelete}, &admission{principal: p})
	if err != nil {
		return nil, err
	}
	return s.reply(g, adm.status, false), nil
}

// admitRequest steps the machine with e, a request of adm's principal
// about the session (with what the record says of it: ownerStatus is
// validateMcpSessionOwner, ended, unknown or foreign sessions are refused
// before anything is restored), and returns adm with what the machine
// decided about it.
func (s *session) admitRequest(ctx context.Context, g grain.Context, e event, adm *admission) (*admission, error) {
	adm.status = pb.SessionReply_STATUS_OK
	e.found, e.ended = s.rec != nil, s.ended
	e.owner = e.found && principalEqual(s.rec.GetPrincipal(), adm.principal)
	s.admitting = adm
	defer func() { s.admitting = nil }()
	return adm, s.step(ctx, g, e)
}

// end tombstones the record, keeps only the expiry reminder (it comes back
// after the tombstone retention to delete the grain) — one transaction —
// then disposes the runtime and passivates.
func (s *session) end(ctx context.Context, g grain.Context, why, reason string) error {
	rec := proto.Clone(s.rec).(*pb.SessionRecord)
	rec.Tombstone = &pb.Tombstone{Reason: why, AtMs: s.now().UnixMilli()}
	rec.Schedules = nil // their reminders go with the others below
	rec.LastActivityMs = s.last.UnixMilli()
	b, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("session %s: encode record: %w", s.id, err)
	}
	purge := store.Reminder{Name: ReminderExpiry, DueAt: s.now().Add(s.h.cfg.TombstoneRetention)}
	if err := g.Commit(ctx, store.Writes{Record: b, SetReminders: []store.Reminder{purge}, CancelOtherReminders: true, Release: true}); err != nil {
		return fmt.Errorf("session %s: end: %w", s.id, err)
	}
	s.rec, s.persists = rec, rec.GetLastActivityMs()
	s.ended = true
	return s.step(ctx, g, event{kind: evEnded, reason: reason})
}

func (s *session) markActivity() {
	s.last = s.now()
	s.h.registry.Touch(s.id, s.last)
}

// record is the session's record, or the one being created.
func (s *session) record() *pb.SessionRecord {
	if s.rec != nil {
		return s.rec
	}
	return s.creating
}

// restoreForExecutions asks the machine for the runtime, if the session
// has none, so that its durable paused executions are restored: approval
// surfaces, the resume forward and approval deadlines reach a passivated
// session (an unknown or ended session builds nothing).
func (s *session) restoreForExecutions(ctx context.Context, g grain.Context) error {
	if s.rt != nil {
		return nil
	}
	if tracing.On() && s.rec != nil && !s.ended {
		var span trace.Span
		ctx, span = tracing.Start(ctx, RestoreForApprovalSpan, trace.WithAttributes(tracing.SessionKey.String(s.id)))
		defer span.End()
	}
	return s.step(ctx, g, event{kind: evBuildAsked, gone: s.rec == nil || s.ended})
}

// retiredRecord is the record to write once rt was disposed: with the
// in-memory last activity and rt's untrimmed event bytes, if either
// moved; nil otherwise.
func (s *session) retiredRecord(rt Runtime) *pb.SessionRecord {
	rec := s.activityRecord()
	if rec == nil && s.unsaved && s.rec != nil && !s.ended {
		rec = proto.Clone(s.rec).(*pb.SessionRecord)
	}
	if rt == nil || s.rec == nil || s.ended {
		return rec
	}
	n := rt.UntrimmedEventBytes()
	if n == s.rec.GetUntrimmedEventBytes() {
		return rec
	}
	if rec == nil {
		rec = proto.Clone(s.rec).(*pb.SessionRecord)
	}
	rec.UntrimmedEventBytes = n
	return rec
}

// activityRecord is the record with the in-memory last activity, if that
// moved since it was persisted (at most once per idle period, never per
// request); nil otherwise.
func (s *session) activityRecord() *pb.SessionRecord {
	if s.rec == nil || s.ended || s.last.UnixMilli() <= s.persists {
		return nil
	}
	rec := proto.Clone(s.rec).(*pb.SessionRecord)
	rec.LastActivityMs = s.last.UnixMilli()
	return rec
}

// commit writes w, with rec as the new record if it is not nil, in one
// transaction.
func (s *session) commit(ctx context.Context, g grain.Context, rec *pb.SessionRecord, w store.Writes) error {
	if rec != nil {
		b, err := proto.Marshal(rec)
		if err != nil {
			return fmt.Errorf("session %s: encode record: %w", s.id, err)
		}
		w.Record = b
	}
	if err := g.Commit(ctx, w); err != nil {
		return fmt.Errorf("session %s: commit: %w", s.id, err)
	}
	if rec != nil {
		s.rec, s.unsaved = rec, false
		s.persists = rec.GetLastActivityMs()
	}
	return nil
}

// persistActivity writes the in-memory last activity to the record if it
// moved (at most once per idle period, never per request).
func (s *session) persistActivity(ctx context.Context, g grain.Context) {
	rec := s.activityRecord()
	if rec == nil {
		return
	}
	ctx, end := s.traceMarkActivity(ctx)
	err := s.commit(ctx, g, rec, store.Writes{})
	end(err)
	if err != nil {
		s.h.log.Warn("session: persist last activity", "session", s.id, "err", err)
	}
}

// passivateIfIdle steps the machine at the end of a turn: an activation
// that holds no runtime and parks no stream passivates, so waking a
// session (probing ids, inspecting it, firing a stale reminder) never pins
// memory.
func (s *session) passivateIfIdle(ctx context.Context, g grain.Context) {
	_ = s.step(ctx, g, event{kind: evTurnDone, parkedLeft: len(s.parked)})
}

// capEviction is requestCapEviction on the candidate: re-check liveness in
// the session's own context, dispose with reason cap, or do nothing. With
// tracing on it is the span CapEvictionSpan, linked to the evicting build
// (link: its trace context), the disposal's span its child.
func (s *session) capEviction(ctx context.Context, g grain.Context, link map[string]string) bool {
	if tracing.On() {
		var span trace.Span
		ctx, span = s.startCapEviction(ctx, link)
		defer span.End()
		defer func() { span.SetAttributes(EvictedKey.Bool(s.rt == nil)) }()
	}
	evicted := len(s.decide(event{kind: evCapEviction, evictable: s.rt != nil && s.res.canEvict()})) > 0
	_ = s.carryOut(ctx, g)
	return evicted
}

// OnReminder handles the session's durable reminders.
func (s *session) OnReminder(ctx context.Context, g grain.Context, f *pb.ReminderFired) error {
	defer s.passivateIfIdle(ctx, g)
	switch name := f.GetName(); {
	case name == ReminderIdle:
		// Left by an older version, which kept the idle alarm durable:
		// nothing to do (a resident runtime has its own idle alarm).
	case name == ReminderExpiry:
		return s.onExpiry(ctx, g)
	case strings.HasPrefix(name, reminderApproval):
		return s.onApprovalDeadline(ctx, g, strings.TrimPrefix(name, reminderApproval))
	case strings.HasPrefix(name, ReminderSchedulePrefix):
		return s.onScheduleFired(ctx, g, strings.TrimPrefix(name, ReminderSchedulePrefix))
	}
	return nil
}

func (s *session) onExpiry(ctx context.Context, g grain.Context) error {
	return s.step(ctx, g, event{kind: evExpiry, now: s.now(), gone: s.rec == nil, ended: s.ended,
		endedAt: time.UnixMilli(s.rec.GetTombstone().GetAtMs()), last: s.last, persisted: time.UnixMilli(s.rec.GetLastActivityMs())})
}

// HandleLocal receives lease hooks, state changes and exchange
// completions from the runtime's goroutines.
func (s *session) HandleLocal(ctx context.Context, g grain.Context, msg any) {
	switch m := msg.(type) {
	case *exchange.Done:
		e := event{kind: evExchangeDone}
		if _, e.parked = s.parked[m.ID]; e.parked {
			s.parked = deleteKey(s.parked, m.ID)
		} else if _, e.known = s.exchanges[m.ID]; e.known {
			s.exchanges = deleteKey(s.exchanges, m.ID)
		}
		e.inFlight, e.parkedLeft = len(s.exchanges), len(s.parked)
		_ = s.step(ctx, g, e)
	case *stateMsg:
		m.done <- s.saveState(ctx, g, m)
		return
	case idleAlarm:
		s.onIdle(ctx, g, m.gen)
	case *leaseMsg:
		s.onLease(ctx, g, m)
	case *scheduleMsg:
		m.done <- s.onScheduleMsg(ctx, g, m)
	case *scheduleDoneMsg:
		s.onScheduleDone(ctx, g, m)
	}
}

func (s *session) Deactivate(ctx context.Context, g grain.Context, reason grain.Reason) {
	why := DisposeShutdown
	switch reason {
	case grain.ReasonOwnershipLost:
		why = DisposeOwnershipLost
	case grain.ReasonRebalance:
		why = DisposeRebalance
	}
	_ = s.step(ctx, g, event{kind: evDeactivate, reason: why})
}

// executionDrain bounds how long a graceful deactivation (node stop, move)
// waits for running executions before it disposes the runtime.
const executionDrain = 5 * time.Second

// drainExecutions lets running executions finish (or pause) before a
// graceful disposal, up to executionDrain: disposing cuts a tool call in
// flight, whose outcome is then unknown (a durable execution continues in
// the next activation with the call interrupted; a write is not sent
// again). A fenced activation does not wait: its writes fail anyway.
// When executions ran, it then waits (within the same bound) for the POSTs
// in flight: an execution that just ended is still writing its answer, and
// disposing cancels the request under it.
func (s *session) drainExecutions() {
	if s.rt.RunningExecutions() == 0 {
		return
	}
	deadline := time.Now().Add(executionDrain)
	s.h.log.Info("session: waiting for running executions before disposing", "session", s.id, "running", s.rt.RunningExecutions())
	for s.rt.RunningExecutions() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for s.res.posts.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}
