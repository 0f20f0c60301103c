package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// The grain as the lifecycle machine's executor (machine.go): it steps the
// machine with what happened and carries out the actions, in order.

// step applies e to the machine and carries out the actions it decided.
func (s *session) step(ctx context.Context, g grain.Context, e event) error {
	s.decide(e)
	return s.carryOut(ctx, g)
}

// actionQueue is a machine's queue of actions, recycled through
// actionQueues: a session holds one only while it carries actions out, so
// a resident session keeps none and a step allocates none.
type actionQueue struct{ acts []action }

var actionQueues = sync.Pool{New: func() any { return &actionQueue{acts: make([]action, 0, 8)} }}

// decide applies e to the machine (with a queue from the pool, unless
// actions are being carried out) and returns the actions it decided.
func (s *session) decide(e event) []action {
	if s.queue == nil {
		s.queue = actionQueues.Get().(*actionQueue)
		s.m.out = s.queue.acts[:0]
	}
	return s.m.step(e)
}

// carryOut carries out the machine's queued actions, in order, up to the
// first that fails (the rest are dropped). A step taken while an action is
// carried out (a build done, a disposal done, a timeout recorded) queues
// its actions behind the current ones, and the outermost carryOut carries
// them out. The node's view of the runtime's pins (residency, read by
// other goroutines) follows the machine at every step.
func (s *session) carryOut(ctx context.Context, g grain.Context) error {
	if s.res != nil {
		l, d := s.m.pins()
		s.res.leases.Store(int32(l))
		s.res.decided.Store(int32(d))
	}
	if s.carrying || s.queue == nil {
		return nil
	}
	s.carrying = true
	defer func() {
		s.carrying = false
		clear(s.m.out) // the pool keeps no strings alive
		s.queue.acts, s.m.out = s.m.out[:0], nil
		actionQueues.Put(s.queue)
		s.queue = nil
	}()
	for i := 0; i < len(s.m.out); i++ {
		if err := s.do(ctx, g, s.m.out[i]); err != nil {
			return err
		}
	}
	return nil
}

// do carries out one action.
func (s *session) do(ctx context.Context, g grain.Context, a action) error {
	switch a.kind {
	case actBuild:
		return s.build(ctx, g)
	case actArmIdle:
		s.armIdle(g, a.at, a.gen)
	case actHandOver:
		s.rt.ResolveApproval(a.exec, s.rec.GetDecisions()[a.exec])
	case actSetDeadline:
		// The deadline's reminder links to the lease's start span (one
		// the pause's journal stored links to the call that paused).
		ctx := s.traceLease(ctx, a)
		if a.stored {
			return nil
		}
		if err := g.SetReminder(ctx, reminderApproval+a.exec, a.at, 0); err != nil {
			s.h.log.Warn("session: arm approval deadline", "session", s.id, "execution", a.exec, "err", err)
		}
	case actMarkActivity:
		s.markActivity()
	case actCountApproval:
		s.traceLease(ctx, a)
		s.h.metrics.approvals.WithLabelValues(a.label).Inc()
	case actRecordTimeout:
		s.traceLease(ctx, a)
		return s.recordTimeout(ctx, g, a.exec)
	case actReleaseLease:
		s.traceLease(ctx, a)
		s.releaseLease(ctx, g, a.exec, a.stored)
	case actPersistActivity:
		s.persistActivity(ctx, g)
	case actLogExtension:
		s.h.log.Info("mcp_session_"+strings.TrimPrefix(a.label, "extend_")+"_extension", "session", s.id,
			"idle_ms", s.now().Sub(s.last).Milliseconds(), "lease_ms", a.lease.Milliseconds())
	case actCountIdleAlarm:
		s.h.metrics.idleAlarms.Inc()
	case actDispose:
		return s.closeRuntime(ctx, g, a)
	case actRetireWrites:
		s.retireWrites(ctx, g, a.drop)
	case actPassivate:
		g.Passivate(grain.Reason(a.label))
	case actSetExpiry:
		err := g.SetReminder(ctx, ReminderExpiry, a.at, 0)
		if err != nil && a.label != "" {
			err = fmt.Errorf("session %s: %s: %w", s.id, a.label, err)
		}
		return err
	case actEnd:
		return s.end(ctx, g, tombstoneReason(a.label), a.label)
	case actDrain:
		s.drainExecutions()
		return s.step(ctx, g, event{kind: evDispose, reason: a.label, retire: true})
	case actAbandonCreate:
		s.creating = nil
	case actAnswer:
		s.admitting.status = a.status
	case actReject:
		return grain.Reject("%s", a.label)
	case actBeginCreate:
		s.beginCreate(s.admitting.principal)
	case actServe:
		return s.admitted(a.restored)
	case actPark:
		return s.park(ctx, g, s.admitting.m)
	case actEndOldestParked:
		s.endOldestParked()
	case actUnpark:
		s.unpark()
	default:
		return s.doRecord(ctx, g, a)
	}
	return nil
}

// doRecord carries out one action that writes the session's record or
// runs what it holds (the runtime's and the application's state, the
// SDK's schedules, the tombstone's deletion).
func (s *session) doRecord(ctx context.Context, g grain.Context, a action) error {
	switch a.kind {
	case actCommitCreate:
		return s.commitCreating(ctx, g, a.state)
	case actSaveState:
		if a.app != nil {
			return s.saveAppState(ctx, g, a.name, a.app)
		}
		return s.saveRuntimeState(ctx, g, a.state)
	case actRefuseState:
		if a.label != "" {
			return errors.New(a.label)
		}
		return errRuntimeClosed
	case actRunSchedule:
		return s.runSchedule(ctx, g, a)
	case actLeaseSchedule, actRetrySchedule:
		s.moveSchedule(ctx, g, a)
	case actCompleteSchedule:
		s.completeSchedule(ctx, g, a)
	case actDeleteGrain:
		if err := g.Delete(ctx); err != nil {
			return fmt.Errorf("session %s: delete the tombstone: %w", s.id, err)
		}
	}
	return nil
}

// tombstoneReason is the tombstone reason of a session ended for
// disposal reason (stored in session records: the values must not
// change).
func tombstoneReason(reason string) string {
	if reason == DisposeDelete {
		return "deleted"
	}
	return "expired"
}

// build builds the runtime (a cold build or a restore after passivation):
// a residency admission first, whose build slot is released exactly once
// (success, failure, panic, cancellation); a failed or interrupted build
// leaves nothing behind. With tracing on the build is the span InitSpan,
// with the admission's residency facts; the eviction it asks for links
// to it.
func (s *session) build(ctx context.Context, g grain.Context) error {
	built := false
	defer func() {
		if !built {
			s.buildFailed(ctx, g)
		}
	}()
	now := s.now()
	if s.h.sizing != nil {
		s.h.resize(now)
	}
	adm := s.h.registry.Admit(now)
	defer adm.Slot.Release()
	rec := s.record()
	if tracing.On() {
		var span trace.Span
		ctx, span = s.startInit(ctx, adm, s.rec != nil) // restore: the session exists already
		defer func() { s.endInit(span, built) }()
	}
	if adm.Evict != "" {
		s.h.requestEviction(ctx, adm.Evict)
	}
	if adm.Overflow {
		s.h.metrics.overflow.Inc()
		s.h.log.InfoContext(ctx, "session: residency soft cap exceeded and nothing evictable; building anyway", "session", s.id, "cap_overflow", true)
	}
	hk := &hooks{system: g.ActorSystem(), self: g.Self(), arm: g.RemindersStored}
	began := time.Now()
	rt, err := s.h.cfg.Builder.Build(ctx, BuildInput{SessionID: s.id, Grain: grain.KeyOf(g), Epoch: s.epoch.Load,
		Principal: rec.GetPrincipal(), State: rec.GetRuntimeState(), Leases: hk, StateChanged: hk.StateChanged,
		AppState: rec.GetAppState(), AppStateChanged: hk.AppStateChanged,
		UntrimmedEventBytes: rec.GetUntrimmedEventBytes(), Schedules: hk, Deadlines: reminderApproval, DeadlinesStored: hk.DeadlinesStored})
	if err != nil {
		return &grain.Error{Code: pb.GrainError_CODE_UNAVAILABLE, Message: fmt.Sprintf("session runtime failed to start: %v", err)}
	}
	built = true
	s.h.metrics.restore.Observe(time.Since(began).Seconds())
	s.h.metrics.activations.Inc()
	s.rt, s.hooks = rt, hk
	s.res = &resident{rt: rt}
	s.h.registry.Register(residencyEntry(s.id, s.res), s.now())
	s.h.addResident(s.id, s.res)
	return s.step(ctx, g, event{kind: evBuilt, now: s.now(), reapply: s.decidedPauses()})
}

// buildFailed steps the machine with a failed or interrupted build and
// carries out what it decides at once: the build's error stops the queue,
// and what goes with a failed build (a creation abandoned) must not be
// dropped with it.
func (s *session) buildFailed(ctx context.Context, g grain.Context) {
	n := len(s.m.out)
	for _, a := range slices.Clone(s.m.step(event{kind: evBuildFailed})) {
		_ = s.do(ctx, g, a)
	}
	clear(s.m.out[n:])
	s.m.out = s.m.out[:n]
}

// admitted marks the request being admitted to be served (actServe) once
// the actions are carried out; restored: its runtime was built for it.
func (s *session) admitted(restored bool) error {
	if s.rt == nil { // the machine built nothing: the session is gone or its runtime is closing, so never
		return &grain.Error{Code: pb.GrainError_CODE_UNAVAILABLE, Message: "session runtime not built: the session is gone or its runtime is closing"}
	}
	s.admitting.serve, s.admitting.restored = true, restored
	return nil
}

// decidedPauses lists the fresh runtime's restored pauses that have a
// recorded decision (one that arrived just before the runtime was lost,
// before the execution could journal it): the machine re-applies them.
func (s *session) decidedPauses() []string {
	var ids []string
	for id := range s.rec.GetDecisions() {
		if _, live := s.rt.PausedExecution(id); live {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// armIdle arms idle alarm gen at due (replacing the armed one).
func (s *session) armIdle(g grain.Context, due time.Time, gen uint64) {
	s.stopIdle()
	self, system := g.Self(), g.ActorSystem()
	s.idleTimer = s.h.cfg.Clock.AfterFunc(due.Sub(s.now()), func() { system.Root.Send(self, idleAlarm{gen: gen}) })
}

// stopIdle disarms the idle alarm.
func (s *session) stopIdle() {
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
}

// idleAlarm is the idle alarm firing (a local message to the activation).
type idleAlarm struct{ gen uint64 }

// onIdle steps the machine with the idle alarm gen and the runtime's
// counts; a superseded alarm is ignored.
func (s *session) onIdle(ctx context.Context, g grain.Context, gen uint64) {
	if !s.m.idleCurrent(gen) {
		return
	}
	s.idleTimer = nil // it fired
	now := s.now()
	e := event{kind: evIdleFired, gen: gen, now: now, last: s.last}
	if s.rt != nil {
		e.input = alarm.Input{
			Idle:          now.Sub(s.last),
			Paused:        s.rt.PausedExecutions(),
			DurablePaused: s.rt.DurablePausedExecutions(),
			Running:       s.rt.RunningExecutions(),
			Streams:       s.res.streams(),
		}
	}
	_ = s.step(ctx, g, e)
	s.passivateIfIdle(ctx, g)
}

// closeRuntime is the I/O of a disposal the machine decided: the runtime,
// already not counted as initialized, stops serving (exchanges cancelled,
// hooks quiet, residency released, idle alarm stopped), the directory rows
// of the pauses lost with it go, and it is closed uninterruptibly (the
// close ignores the caller's cancellation; only CloseTimeout bounds it).
func (s *session) closeRuntime(ctx context.Context, g grain.Context, a action) error {
	if tracing.On() {
		var span trace.Span
		ctx, span = s.startDispose(ctx, a.label)
		defer s.endDispose(span)
	}
	rt := s.rt
	s.rt, s.res, s.retired = nil, nil, rt
	s.cancelExchanges()
	s.hooks.close()
	s.hooks = nil
	s.h.registry.Release(s.id)
	s.h.removeResident(s.id)
	s.stopIdle()
	s.unpublish(ctx, a.drop...)
	if a.label == DisposeDelete || a.label == DisposeExpired {
		rt.Ended()
	}
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), s.h.cfg.CloseTimeout)
	defer stop()
	func() {
		defer func() {
			if r := recover(); r != nil {
				s.h.log.Error("session: runtime close panicked", "session", s.id, "panic", r)
			}
		}()
		if err := rt.Close(cctx); err != nil {
			s.h.log.Warn("session: runtime close", "session", s.id, "err", err)
		}
	}()
	s.h.metrics.disposals.WithLabelValues(a.label).Inc()
	s.disposed = &pb.Disposal{Reason: a.label, AtMs: s.now().UnixMilli()}
	s.h.log.InfoContext(ctx, "mcp_session_idle_runtime_dispose", "session", s.id, "reason", a.label,
		"idle_ms", s.now().Sub(s.last).Milliseconds(), "resident_runtimes", s.h.registry.Resident())
	return s.step(ctx, g, event{kind: evDisposeDone})
}

// retireWrites is the activation's last transaction after a disposal: the
// last activity (if it moved) and the disposed runtime's counters, the
// dropped leases' reminders cancelled, the ownership released.
func (s *session) retireWrites(ctx context.Context, g grain.Context, dropped []string) {
	var cancel []string
	for _, id := range dropped {
		cancel = append(cancel, reminderApproval+id)
	}
	rec := s.retiredRecord(s.retired)
	s.retired = nil
	if s.disposed != nil && s.rec != nil && !s.ended {
		if rec == nil {
			rec = proto.Clone(s.rec).(*pb.SessionRecord)
		}
		rec.LastDispose = s.disposed
	}
	if err := s.commit(ctx, g, rec, store.Writes{CancelReminders: cancel, Release: true}); err != nil {
		s.h.log.Warn("session: persist activity and cancel reminders on disposal", "session", s.id, "err", err)
	}
}

// onLease steps the machine with what the runtime reports about a paused
// execution (a hook of a runtime already disposed is stale).
func (s *session) onLease(ctx context.Context, g grain.Context, m *leaseMsg) {
	e := event{kind: evLease, lease: m.kind, exec: m.execID, deadline: m.deadline, action: m.action, stale: m.h != s.hooks || s.rt == nil}
	if m.kind != LeaseResuming {
		// A deadline the pause's journal stored is armed now (stale or
		// not: it is this activation's reminder), the pause registered.
		e.stored = m.h.takeDeadline(m.kind, m.execID)
	}
	if !e.stale {
		switch m.kind {
		case LeasePaused:
			e.durable = s.rt.DurablePause(m.execID)
			if j, ok := s.rt.(PauseJournal); ok {
				e.journaled = j.JournaledPause(m.execID)
			}
		case LeaseResuming:
			e.timedOut = s.rec.GetDecisions()[m.execID].GetReason() == ReasonApprovalTimeout
		}
	}
	_ = s.step(ctx, g, e)
}

// releaseLease drops a settled execution's deadline reminder and its
// recorded decision, in one transaction — or, if the journal's settling
// write cancelled the reminder (cancelled), writes nothing: the decision
// is dropped from the record in memory, and its next write (the
// passivation's at the latest) carries that. A record written before
// then (a crash) keeps a decision no live pause takes (decidedPauses).
func (s *session) releaseLease(ctx context.Context, g grain.Context, execID string, cancelled bool) {
	if cancelled {
		if s.rec.GetDecisions()[execID] != nil {
			delete(s.rec.Decisions, execID)
			s.unsaved = true
		}
		return
	}
	var rec *pb.SessionRecord
	if s.rec != nil && s.rec.GetDecisions()[execID] != nil {
		rec = proto.Clone(s.rec).(*pb.SessionRecord)
		delete(rec.Decisions, execID)
	}
	if err := s.commit(ctx, g, rec, store.Writes{CancelReminders: []string{reminderApproval + execID}}); err != nil {
		s.h.log.Warn("session: release a settled execution's deadline and decision", "session", s.id, "execution", execID, "err", err)
	}
}

// onApprovalDeadline steps the machine with an approval deadline, once a
// passivated session restored its durable pauses.
func (s *session) onApprovalDeadline(ctx context.Context, g grain.Context, execID string) error {
	if err := s.restoreForExecutions(ctx, g); err != nil {
		return err
	}
	if s.rt == nil {
		return nil
	}
	_, live := s.rt.PausedExecution(execID)
	return s.step(ctx, g, event{kind: evDeadline, exec: execID, live: live, decided: s.rec.GetDecisions()[execID] != nil})
}

// recordTimeout records the deadline's decline of execID (reason
// approval_timeout), then steps the machine, which hands it over.
func (s *session) recordTimeout(ctx context.Context, g grain.Context, execID string) error {
	d := &pb.ApprovalDecision{Action: "decline", Reason: ReasonApprovalTimeout, DecidedAtMs: s.now().UnixMilli()}
	if err := s.recordDecision(ctx, g, execID, d, nil); err != nil {
		return err
	}
	s.h.log.Info("mcp_pending_approval_lease_expire", "session", s.id, "execution", execID)
	return s.step(ctx, g, event{kind: evTimeoutRecorded, exec: execID})
}
