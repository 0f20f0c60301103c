package handle

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Schedules on a handle (mcpgrain.ScheduleAt with a ctx bound to a
// handle): each is a reminder "sdk/<key>" of the handle grain, its name,
// payload and attempts an entry of the record. When it fires, the
// reminder moves to a lease (app.ScheduleLease) with the attempt counted
// (one transaction), and the callback runs on this node — the handle's
// owner — outside the grain's turn, its ctx bound to the handle; its end
// (scheduleDone) completes, retries or drops it (app.ScheduleEnded, the
// decisions sessions use too).

// reminderSchedulePrefix prefixes the reminder of each schedule.
const reminderSchedulePrefix = "sdk/"

// scheduleDone is a callback's end, a local message from its goroutine.
type scheduleDone struct {
	key     string
	attempt int
	err     error
}

// addSchedule stores a new schedule (entry and reminder, one transaction)
// or answers the key of the pending one.
func (a *handleGrain) addSchedule(ctx context.Context, g grain.Context, m *pb.HandleSchedule) (proto.Message, error) {
	s := m.GetSchedule()
	due := time.UnixMilli(s.GetDueAtMs())
	if err := app.CheckSchedule(app.Scheduled{Key: m.GetKey(), Name: s.GetName(), Due: due, Payload: s.GetPayload()}); err != nil {
		return nil, grain.Reject("%s", err.Error())
	}
	key := m.GetKey()
	if key == "" {
		key = rand.Text()
	}
	if a.rec.GetSchedules()[key] != nil {
		return &pb.HandleReply{Key: key}, nil
	}
	if len(a.rec.GetSchedules()) >= app.MaxSchedules {
		return nil, grain.Reject("%s", app.ErrTooManySchedules.Error())
	}
	next := proto.Clone(a.rec).(*pb.HandleRecord)
	if next.Schedules == nil {
		next.Schedules = map[string]*pb.SdkSchedule{}
	}
	next.Schedules[key] = &pb.SdkSchedule{Name: s.GetName(), DueAtMs: s.GetDueAtMs(), Payload: s.GetPayload(), CreatedAtMs: a.h.now().UnixMilli()}
	next.UsedAtMs = a.h.now().UnixMilli()
	r := store.Reminder{Name: reminderSchedulePrefix + key, DueAt: due}
	if err := a.commit(ctx, g, next, r); err != nil {
		return nil, err
	}
	return &pb.HandleReply{Key: key}, nil
}

// cancelSchedule drops a pending schedule (entry and reminder).
func (a *handleGrain) cancelSchedule(ctx context.Context, g grain.Context, key string) (proto.Message, error) {
	if a.rec.GetSchedules()[key] != nil {
		if err := a.dropSchedule(ctx, g, key); err != nil {
			return nil, err
		}
	}
	return &pb.HandleReply{}, nil
}

// dropSchedule removes schedule key's entry and reminder, one transaction.
func (a *handleGrain) dropSchedule(ctx context.Context, g grain.Context, key string) error {
	next := proto.Clone(a.rec).(*pb.HandleRecord)
	delete(next.Schedules, key)
	b, err := proto.Marshal(next)
	if err != nil {
		return fmt.Errorf("handle: encode record: %w", err)
	}
	if err := g.Commit(ctx, store.Writes{Record: b, CancelReminders: []string{reminderSchedulePrefix + key}}); err != nil {
		return fmt.Errorf("handle: drop schedule %s: %w", key, err)
	}
	a.rec = next
	return nil
}

// scheduleFired runs a due schedule's callback, or moves the lease of one
// already running; a key no longer pending needs nothing.
func (a *handleGrain) scheduleFired(ctx context.Context, g grain.Context, key string) error {
	e := a.rec.GetSchedules()[key]
	now := a.h.now()
	switch {
	case e == nil:
		return nil
	case a.running[key]:
		return g.SetReminder(ctx, reminderSchedulePrefix+key, now.Add(app.ScheduleLease), 0)
	}
	fs, ok := a.h.callbacks()
	if !ok { // no server built on this node yet: the reminder fires again
		return &grain.Error{Code: pb.GrainError_CODE_UNAVAILABLE, Message: "handle: the node's schedule callbacks are not known yet"}
	}
	next := proto.Clone(a.rec).(*pb.HandleRecord)
	ne := next.GetSchedules()[key]
	ne.Attempts++
	lease := store.Reminder{Name: reminderSchedulePrefix + key, DueAt: now.Add(app.ScheduleLease)}
	if err := a.commit(ctx, g, next, lease); err != nil {
		return err
	}
	if a.running == nil {
		a.running = map[string]bool{}
	}
	a.running[key] = true
	call := app.ScheduleCall{Key: key, Name: ne.GetName(), Payload: ne.GetPayload(), Due: time.UnixMilli(ne.GetDueAtMs()), Attempt: int(ne.GetAttempts())}
	sc := newScope(a.h, g.Identity(), next.GetPrincipal(), next.GetAppState())
	system, self := g.ActorSystem(), g.Self()
	go func() {
		err := runCallback(a.h, sc, fs[call.Name], call)
		system.Root.Send(self, &scheduleDone{key: key, attempt: call.Attempt, err: err})
	}()
	return nil
}

// runCallback runs one callback bound to the handle, bounded by
// app.ScheduleTimeout; a panic, or a name no callback has, is an error.
func runCallback(h *Host, sc *scope, f app.ScheduleFunc, c app.ScheduleCall) (err error) {
	if f == nil {
		return fmt.Errorf("no schedule callback is named %q", c.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), app.ScheduleTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("schedule callback %q panicked: %v", c.Name, p)
		}
	}()
	ctx = app.WithScope(app.WithHandles(ctx, h, sc.p), sc)
	return f(ctx, c)
}

// HandleLocal implements grain.LocalHandler: a callback's end.
func (a *handleGrain) HandleLocal(ctx context.Context, g grain.Context, msg any) {
	m, ok := msg.(*scheduleDone)
	if !ok {
		return
	}
	delete(a.running, m.key)
	if a.rec.GetSchedules()[m.key] == nil {
		return // cancelled meanwhile, or the handle dropped
	}
	log := a.h.cfg.Logger.With("handle", g.Identity(), "key", m.key, "attempt", m.attempt)
	if m.err != nil {
		log.Warn("mcpgrain_sdk_schedule_failed", "err", m.err)
	}
	outcome, at := app.ScheduleEnded(m.err != nil, m.attempt, a.h.now())
	a.h.metrics.schedules.WithLabelValues(outcome).Inc()
	if outcome == app.ScheduleFailed {
		if err := g.SetReminder(ctx, reminderSchedulePrefix+m.key, at, 0); err != nil {
			log.Warn("handle: move a schedule's reminder (it fires at its lease)", "err", err)
		}
		return
	}
	if outcome == app.ScheduleDropped {
		log.Warn("mcpgrain_sdk_schedule_dropped", "name", a.rec.GetSchedules()[m.key].GetName())
	}
	if err := a.dropSchedule(ctx, g, m.key); err != nil {
		log.Warn("handle: complete a schedule (its lease fires it again)", "err", err)
	}
}

// scheduleList is the pending schedules, by key.
func (a *handleGrain) scheduleList() map[string]*pb.SdkSchedule { return a.rec.GetSchedules() }

// scheduleKey is the key of a schedule reminder ("": not one).
func scheduleKey(reminder string) string {
	key, ok := strings.CutPrefix(reminder, reminderSchedulePrefix)
	if !ok {
		return ""
	}
	return key
}

var _ app.Scheduler = (*scope)(nil)

// Schedule implements app.Scheduler: a request to the handle's owner.
func (s *scope) Schedule(ctx context.Context, sc app.Scheduled) (string, error) {
	r, err := s.h.request(ctx, s.id, &pb.HandleSchedule{Principal: s.p, Key: sc.Key, Schedule: &pb.SdkSchedule{
		Name: sc.Name, DueAtMs: sc.Due.UnixMilli(), Payload: sc.Payload,
	}})
	if ge, ok := grain.AsError(err); ok && ge.Message == app.ErrTooManySchedules.Error() {
		return "", app.ErrTooManySchedules
	}
	if err != nil {
		return "", err
	}
	return r.GetKey(), nil
}

// CancelSchedule implements app.Scheduler.
func (s *scope) CancelSchedule(ctx context.Context, key string) error {
	_, err := s.h.request(ctx, s.id, &pb.HandleCancelSchedule{Principal: s.p, Key: key})
	return err
}

// Schedules implements app.Scheduler.
func (s *scope) Schedules(ctx context.Context) ([]app.Scheduled, error) {
	r, err := s.h.request(ctx, s.id, &pb.HandleListSchedules{Principal: s.p})
	if err != nil {
		return nil, err
	}
	m := r.GetSchedules()
	list := make([]app.Scheduled, 0, len(m))
	for _, key := range slices.Sorted(maps.Keys(m)) {
		e := m[key]
		list = append(list, app.Scheduled{Key: key, Name: e.GetName(), Due: time.UnixMilli(e.GetDueAtMs()), Payload: e.GetPayload(), Attempts: int(e.GetAttempts())})
	}
	return list, nil
}
