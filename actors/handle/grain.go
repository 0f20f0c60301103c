package handle

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// reminderExpire is the handle grain's expiry reminder.
const reminderExpire = "expire"

// Bounds of one saved value, checked by the grain (the SDK checks its
// own, smaller MaxBytes first).
const (
	maxValueBytes = 1 << 20
	maxNameBytes  = 256
	maxStates     = 64
)

// handleGrain is one activation of a handle: its record (nil: no such
// handle, or dropped).
type handleGrain struct {
	h       *Host
	rec     *pb.HandleRecord
	running map[string]bool // schedules whose callback runs now, by key
}

// Activate implements grain.Grain.
func (a *handleGrain) Activate(_ context.Context, _ grain.Context, record []byte) error {
	if record == nil {
		return nil
	}
	rec := &pb.HandleRecord{}
	if err := proto.Unmarshal(record, rec); err != nil {
		return fmt.Errorf("handle: decode record: %w", err)
	}
	a.rec = rec
	return nil
}

// Deactivate implements grain.Grain.
func (a *handleGrain) Deactivate(context.Context, grain.Context, grain.Reason) {}

// Receive implements grain.Grain.
func (a *handleGrain) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	switch m := msg.(type) {
	case *pb.HandleCreate:
		return a.create(ctx, g, m)
	case *pb.HandleOpen:
		if !a.owned(m.GetPrincipal()) {
			return &pb.HandleReply{Unknown: true}, nil
		}
		return a.open(ctx, g)
	case *pb.HandleSave:
		if !a.owned(m.GetPrincipal()) {
			return &pb.HandleReply{Unknown: true}, nil
		}
		return a.save(ctx, g, m)
	case *pb.HandleDrop:
		if !a.owned(m.GetPrincipal()) {
			return &pb.HandleReply{Unknown: true}, nil
		}
		return a.drop(ctx, g)
	default:
		return a.receiveSchedule(ctx, g, msg)
	}
}

// receiveSchedule answers the schedule requests.
func (a *handleGrain) receiveSchedule(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	switch m := msg.(type) {
	case *pb.HandleSchedule:
		if !a.owned(m.GetPrincipal()) {
			return &pb.HandleReply{Unknown: true}, nil
		}
		return a.addSchedule(ctx, g, m)
	case *pb.HandleCancelSchedule:
		if !a.owned(m.GetPrincipal()) {
			return &pb.HandleReply{Unknown: true}, nil
		}
		return a.cancelSchedule(ctx, g, m.GetKey())
	case *pb.HandleListSchedules:
		if !a.owned(m.GetPrincipal()) {
			return &pb.HandleReply{Unknown: true}, nil
		}
		return &pb.HandleReply{Schedules: a.scheduleList()}, nil
	default:
		return nil, grain.Reject("handle: unsupported request %T", msg)
	}
}

// drop deletes the handle: record and reminders (its schedules').
func (a *handleGrain) drop(ctx context.Context, g grain.Context) (proto.Message, error) {
	if err := a.h.uncount(ctx, a.rec.GetPrincipal(), g.Identity()); err != nil {
		return nil, fmt.Errorf("handle: drop: %w", err)
	}
	if err := g.Delete(ctx); err != nil {
		return nil, fmt.Errorf("handle: drop: %w", err)
	}
	a.rec = nil
	a.h.metrics.handles.WithLabelValues(outcomeDropped).Inc()
	return &pb.HandleReply{}, nil
}

// owned reports whether the handle exists and p minted it.
func (a *handleGrain) owned(p *pb.Principal) bool {
	o := a.rec.GetPrincipal()
	return a.rec != nil && p.GetUser() != "" && o.GetUser() == p.GetUser() && o.GetOrg() == p.GetOrg()
}

// create writes the record of a new handle (a fenced write that creates
// the grain).
func (a *handleGrain) create(ctx context.Context, g grain.Context, m *pb.HandleCreate) (proto.Message, error) {
	if a.rec != nil || g.Epoch() != 0 {
		return nil, grain.Reject("handle: %s exists", g.Identity())
	}
	if m.GetPrincipal().GetUser() == "" {
		return nil, grain.Reject("handle: a handle needs a principal")
	}
	now := a.h.now().UnixMilli()
	rec := &pb.HandleRecord{Principal: m.GetPrincipal(), CreatedAtMs: now, UsedAtMs: now}
	if err := a.write(ctx, g, rec, m.GetTool()); err != nil {
		return nil, err
	}
	a.h.metrics.handles.WithLabelValues(outcomeMinted).Inc()
	return &pb.HandleReply{}, nil
}

// open answers the states, recording the use now and then.
func (a *handleGrain) open(ctx context.Context, g grain.Context) (proto.Message, error) {
	now := a.h.now()
	if touchDue(time.UnixMilli(a.rec.GetUsedAtMs()), a.h.cfg.IdleTTL, now) {
		next := proto.Clone(a.rec).(*pb.HandleRecord)
		next.UsedAtMs = now.UnixMilli()
		if err := a.commit(ctx, g, next); err != nil {
			return nil, err
		}
	}
	return &pb.HandleReply{States: a.rec.GetAppState()}, nil
}

// save is the compare-and-set of one value.
func (a *handleGrain) save(ctx context.Context, g grain.Context, m *pb.HandleSave) (proto.Message, error) {
	name, v := m.GetName(), m.GetState()
	switch {
	case name == "" || len(name) > maxNameBytes:
		return nil, grain.Reject("handle: a state name of 1 to %d bytes", maxNameBytes)
	case len(v.GetValue()) > maxValueBytes:
		return nil, grain.Reject("handle: state %q of %d bytes: at most %d", name, len(v.GetValue()), maxValueBytes)
	}
	cur := a.rec.GetAppState()[name]
	if cur.GetRevision() != m.GetIfRevision() {
		if cur == nil {
			cur = &pb.HandleState{}
		}
		return &pb.HandleReply{Current: cur}, nil
	}
	if cur == nil && len(a.rec.GetAppState()) >= maxStates {
		return nil, grain.Reject("handle: at most %d states", maxStates)
	}
	next := proto.Clone(a.rec).(*pb.HandleRecord)
	if next.AppState == nil {
		next.AppState = map[string]*pb.HandleState{}
	}
	saved := &pb.HandleState{Version: v.GetVersion(), Value: v.GetValue(), Revision: cur.GetRevision() + 1}
	next.AppState[name] = saved
	next.UsedAtMs = a.h.now().UnixMilli()
	if err := a.commit(ctx, g, next); err != nil {
		return nil, err
	}
	return &pb.HandleReply{Saved: true, Current: saved}, nil
}

// commit stores rec with its expiry reminder (due when it will have been
// idle for the TTL), the reminders more and its row of the handles index
// if its last use moved, fenced, and makes it the activation's.
func (a *handleGrain) commit(ctx context.Context, g grain.Context, rec *pb.HandleRecord, more ...store.Reminder) error {
	return a.write(ctx, g, rec, "", more...)
}

// write is commit, with the tool that minted the handle for its index
// row if this commit creates it.
func (a *handleGrain) write(ctx context.Context, g grain.Context, rec *pb.HandleRecord, tool string, more ...store.Reminder) error {
	b, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("handle: encode record: %w", err)
	}
	due := time.UnixMilli(rec.GetUsedAtMs()).Add(a.h.cfg.IdleTTL)
	w := store.Writes{Record: b, SetReminders: append([]store.Reminder{{Name: reminderExpire, DueAt: due}}, more...)}
	if a.rec == nil || rec.GetUsedAtMs() != a.rec.GetUsedAtMs() {
		w.Also = []store.Stmt{indexIn(rec, tool)} // the handles index: created, or its last use moved
	}
	if err := g.Commit(ctx, w); err != nil {
		return fmt.Errorf("handle: save: %w", err)
	}
	a.rec = rec
	return nil
}

// OnReminder implements grain.ReminderHandler: the expiry, or a
// schedule.
func (a *handleGrain) OnReminder(ctx context.Context, g grain.Context, fired *pb.ReminderFired) error {
	if a.rec == nil {
		return nil
	}
	if key := scheduleKey(fired.GetName()); key != "" {
		return a.scheduleFired(ctx, g, key)
	}
	if fired.GetName() != reminderExpire {
		return nil
	}
	del, next := Expiry(time.UnixMilli(a.rec.GetUsedAtMs()), a.h.cfg.IdleTTL, a.h.now())
	if !del {
		return g.SetReminder(ctx, reminderExpire, next, 0)
	}
	if err := a.h.uncount(ctx, a.rec.GetPrincipal(), g.Identity()); err != nil {
		return fmt.Errorf("handle: expire: %w", err) // the reminder fires again
	}
	if err := g.Delete(ctx); err != nil {
		return fmt.Errorf("handle: expire: %w", err)
	}
	a.rec = nil
	a.h.metrics.handles.WithLabelValues(outcomeExpired).Inc()
	return nil
}
