package session

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The SDK's durable schedules, as the grain carries them out
// (machine_schedule.go decides): the runtime's scope stores and lists
// them through its hooks (scheduleMsg, a turn of the grain), the grain
// runs a due one's callback through the runtime (ScheduleRunner) and
// completes, retries or drops it when the callback ends
// (scheduleDoneMsg).

// ReminderSchedulePrefix prefixes the reminder of each SDK schedule:
// "sdk/<key>". The session's own reminders (expiry, approval:<exec>) never
// start with it.
const ReminderSchedulePrefix = "sdk/"

// scheduleOp is what a scheduleMsg asks.
type scheduleOp uint8

const (
	opSchedule scheduleOp = iota + 1
	opCancel
	opList
)

// scheduleMsg is a schedule call of the runtime's scope, a local message
// to the activation; the reply goes to done.
type scheduleMsg struct {
	h    *hooks
	op   scheduleOp
	s    app.Scheduled
	done chan scheduleReply
}

type scheduleReply struct {
	key  string
	list []app.Scheduled
	err  error
}

// scheduleDoneMsg is a callback's end, from its goroutine.
type scheduleDoneMsg struct {
	key     string
	attempt int
	err     error
}

// ask sends m to the activation and waits for its reply (bounded by ctx
// and stateTimeout; a disposed runtime's calls fail).
func (h *hooks) ask(ctx context.Context, m *scheduleMsg) scheduleReply {
	closed, ok := h.wait()
	if !ok {
		return scheduleReply{err: errRuntimeClosed}
	}
	defer h.done()
	m.h, m.done = h, make(chan scheduleReply, 1)
	h.system.Root.Send(h.self, m)
	t := time.NewTimer(stateTimeout)
	defer t.Stop()
	select {
	case r := <-m.done:
		return r
	case <-closed:
		return scheduleReply{err: errRuntimeClosed}
	case <-ctx.Done():
		return scheduleReply{err: ctx.Err()}
	case <-t.C:
		return scheduleReply{err: fmt.Errorf("session: storing a schedule took longer than %s", stateTimeout)}
	}
}

// Schedule implements app.Scheduler.
func (h *hooks) Schedule(ctx context.Context, s app.Scheduled) (string, error) {
	r := h.ask(ctx, &scheduleMsg{op: opSchedule, s: s})
	return r.key, r.err
}

// CancelSchedule implements app.Scheduler.
func (h *hooks) CancelSchedule(ctx context.Context, key string) error {
	return h.ask(ctx, &scheduleMsg{op: opCancel, s: app.Scheduled{Key: key}}).err
}

// Schedules implements app.Scheduler.
func (h *hooks) Schedules(ctx context.Context) ([]app.Scheduled, error) {
	r := h.ask(ctx, &scheduleMsg{op: opList})
	return r.list, r.err
}

// onScheduleMsg answers a schedule call of the resident runtime.
func (s *session) onScheduleMsg(ctx context.Context, g grain.Context, m *scheduleMsg) scheduleReply {
	switch {
	case m.h != s.hooks || s.rt == nil:
		return scheduleReply{err: errRuntimeClosed}
	case s.rec == nil || s.ended:
		return scheduleReply{err: errors.New("session: the session is not created yet, or ended")}
	}
	switch m.op {
	case opSchedule:
		key, err := s.addSchedule(ctx, g, m.s)
		return scheduleReply{key: key, err: err}
	case opCancel:
		return scheduleReply{err: s.cancelSchedule(ctx, g, m.s.Key)}
	default:
		return scheduleReply{list: s.scheduleList()}
	}
}

// addSchedule stores a new schedule — its entry in the record and its
// reminder, one transaction — or returns the key of the pending one.
func (s *session) addSchedule(ctx context.Context, g grain.Context, sc app.Scheduled) (string, error) {
	if err := app.CheckSchedule(sc); err != nil {
		return "", err
	}
	key := sc.Key
	if key == "" {
		key = rand.Text()
	}
	if s.rec.GetSchedules()[key] != nil {
		return key, nil // idempotent: the pending one stays as it is
	}
	if len(s.rec.GetSchedules()) >= app.MaxSchedules {
		return "", app.ErrTooManySchedules
	}
	rec := proto.Clone(s.rec).(*pb.SessionRecord)
	if rec.Schedules == nil {
		rec.Schedules = map[string]*pb.SdkSchedule{}
	}
	rec.Schedules[key] = &pb.SdkSchedule{Name: sc.Name, DueAtMs: sc.Due.UnixMilli(), Payload: sc.Payload, CreatedAtMs: s.now().UnixMilli()}
	r := store.Reminder{Name: ReminderSchedulePrefix + key, DueAt: sc.Due}
	if err := s.commit(ctx, g, rec, store.Writes{SetReminders: []store.Reminder{r}}); err != nil {
		return "", errors.Join(app.ErrRetry, err)
	}
	return key, nil
}

// cancelSchedule removes a pending schedule (entry and reminder).
func (s *session) cancelSchedule(ctx context.Context, g grain.Context, key string) error {
	if s.rec.GetSchedules()[key] == nil {
		return nil
	}
	if err := s.dropSchedule(ctx, g, key); err != nil {
		return errors.Join(app.ErrRetry, err)
	}
	return nil
}

// dropSchedule removes schedule key's entry and reminder, one transaction.
func (s *session) dropSchedule(ctx context.Context, g grain.Context, key string) error {
	rec := proto.Clone(s.rec).(*pb.SessionRecord)
	delete(rec.Schedules, key)
	return s.commit(ctx, g, rec, store.Writes{CancelReminders: []string{ReminderSchedulePrefix + key}})
}

// scheduleList lists the pending schedules, by key.
func (s *session) scheduleList() []app.Scheduled {
	var list []app.Scheduled
	for _, key := range slices.Sorted(maps.Keys(s.rec.GetSchedules())) {
		list = append(list, scheduled(key, s.rec.GetSchedules()[key]))
	}
	return list
}

func scheduled(key string, e *pb.SdkSchedule) app.Scheduled {
	return app.Scheduled{Key: key, Name: e.GetName(), Due: time.UnixMilli(e.GetDueAtMs()), Payload: e.GetPayload(), Attempts: int(e.GetAttempts())}
}

// knownSchedule reports whether schedule key is pending in a live session.
func (s *session) knownSchedule(key string) bool {
	return s.rec != nil && !s.ended && s.rec.GetSchedules()[key] != nil
}

// onScheduleFired steps the machine with a schedule's reminder.
func (s *session) onScheduleFired(ctx context.Context, g grain.Context, key string) error {
	return s.step(ctx, g, event{kind: evScheduleFired, exec: key, now: s.now(), gone: s.rec == nil || s.ended, known: s.knownSchedule(key)})
}

// runSchedule carries out actRunSchedule: the attempt counted and the
// reminder moved to the lease (one transaction), then the callback started
// on its own goroutine. A failed write, or a runtime still closing (the
// machine asked for a rebuild), fails the reminder's delivery: it fires
// again at the next scan.
func (s *session) runSchedule(ctx context.Context, g grain.Context, a action) error {
	if s.rt == nil { // its runtime is closing: the reminder fires again at the next scan
		_ = s.step(ctx, g, event{kind: evScheduleDone, exec: a.exec})
		return &grain.Error{Code: pb.GrainError_CODE_UNAVAILABLE, Message: "session runtime is closing; the schedule runs at the next scan"}
	}
	rec := proto.Clone(s.rec).(*pb.SessionRecord)
	e := rec.GetSchedules()[a.exec]
	e.Attempts++
	lease := store.Reminder{Name: ReminderSchedulePrefix + a.exec, DueAt: a.at}
	if err := s.commit(ctx, g, rec, store.Writes{SetReminders: []store.Reminder{lease}}); err != nil {
		_ = s.step(ctx, g, event{kind: evScheduleDone, exec: a.exec}) // not started: nothing runs
		return err
	}
	call := app.ScheduleCall{Key: a.exec, Name: e.GetName(), Payload: e.GetPayload(), Due: time.UnixMilli(e.GetDueAtMs()), Attempt: int(e.GetAttempts())}
	runner, ok := s.rt.(ScheduleRunner)
	system, self := g.ActorSystem(), g.Self()
	go func() {
		err := errors.New("session: the runtime runs no schedules")
		if ok {
			err = runCallback(runner, call)
		}
		system.Root.Send(self, &scheduleDoneMsg{key: call.Key, attempt: call.Attempt, err: err})
	}()
	return nil
}

// runCallback runs one callback, bounded by scheduleTimeout; a panic is an
// error.
func runCallback(r ScheduleRunner, c app.ScheduleCall) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scheduleTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("schedule callback %q panicked: %v", c.Name, p)
		}
	}()
	return r.RunSchedule(ctx, c)
}

// onScheduleDone steps the machine with a callback's end.
func (s *session) onScheduleDone(ctx context.Context, g grain.Context, m *scheduleDoneMsg) {
	if m.err != nil {
		s.h.log.Warn("mcpgrain_sdk_schedule_failed", "session", s.id, "key", m.key, "attempt", m.attempt, "err", m.err)
	}
	_ = s.step(ctx, g, event{kind: evScheduleDone, exec: m.key, now: s.now(), failed: m.err != nil, attempt: m.attempt, known: s.knownSchedule(m.key)})
	s.passivateIfIdle(ctx, g)
}

// moveSchedule carries out actLeaseSchedule and actRetrySchedule: the
// schedule's reminder moves to a.at.
func (s *session) moveSchedule(ctx context.Context, g grain.Context, a action) {
	if a.kind == actRetrySchedule {
		s.h.metrics.schedules.WithLabelValues(scheduleFailed).Inc()
	}
	if err := g.SetReminder(ctx, ReminderSchedulePrefix+a.exec, a.at, 0); err != nil {
		s.h.log.Warn("session: move a schedule's reminder (it fires at its lease)", "session", s.id, "key", a.exec, "err", err)
	}
}

// completeSchedule carries out actCompleteSchedule.
func (s *session) completeSchedule(ctx context.Context, g grain.Context, a action) {
	s.h.metrics.schedules.WithLabelValues(a.label).Inc()
	if a.label == scheduleDropped {
		s.h.log.Warn("mcpgrain_sdk_schedule_dropped", "session", s.id, "key", a.exec,
			"name", s.rec.GetSchedules()[a.exec].GetName(), "attempts", scheduleMaxAttempts)
	}
	if err := s.dropSchedule(ctx, g, a.exec); err != nil {
		s.h.log.Warn("session: complete a schedule (its lease fires it again)", "session", s.id, "key", a.exec, "err", err)
	}
}
