package mcpruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The approval window of a grain's pending questions (AskLater in a
// 2026-07-28 request or a task's run, docs/sdk.md §4): as a session's
// approval reminder declines its questions at their deadline, each
// question of a continuation or task grain has a durable reminder of its
// owning grain (LaterReminder), made durable before the question is
// published (GrainCallsConfig.Alarms): a grain lost between the two
// writes leaves a reminder that finds no question, never a question
// nobody declines. When it fires (on whichever node owns the grain then:
// it survives the loss of the node that armed it), laterAlarm decides
// what it does — decline the undecided question as the window does
// (journaled, its directory row settled: the inbox shows it timed out),
// nothing for a decided one, or fire again at the deadline if it fired
// early. A decision taken first cancels it (LaterAlarms.Disarm; one left
// over fires and does nothing).

// laterReminderPrefix names the reminders of pending questions.
const laterReminderPrefix = "later:"

// LaterReminder is the name of the reminder that declines pending
// question execID at its deadline.
func LaterReminder(execID string) string { return laterReminderPrefix + execID }

// LaterReminderOf is the pending question whose reminder is name (ok
// false: another reminder).
func LaterReminderOf(name string) (execID string, ok bool) {
	execID, ok = strings.CutPrefix(name, laterReminderPrefix)
	return execID, ok && execID != ""
}

// LaterAlarms arm and cancel the reminders of a grain's pending
// questions (GrainAlarms: the grain's durable reminders).
type LaterAlarms interface {
	// Arm makes the reminder of pending question execID due at due, and
	// returns once it is durable.
	Arm(ctx context.Context, execID string, due time.Time) error
	// Disarm cancels the reminder of pending question execID, without
	// waiting (a reminder left fires and does nothing).
	Disarm(execID string)
}

// alarmAct is what the reminder of a pending question does when it
// fires.
type alarmAct int

const (
	// alarmDone: nothing (the question was decided first, or is none of
	// the grain's); the reminder ends.
	alarmDone alarmAct = iota
	// alarmDecline: the window lapsed undecided: its decline is recorded
	// and the directory row settled; the reminder ends.
	alarmDecline
	// alarmAgain: it fired before the deadline (a clock step): it is made
	// due again.
	alarmAgain
)

// laterRearmFloor is the delay of a reminder made due again at a deadline
// the reminders' clock has passed already (the grain's clock is behind
// it): it does not fire in a loop.
const laterRearmFloor = time.Second

// laterAlarm is what the reminder of pending question q (nil: none of the
// grain's, or already settled) does when it fires at firedAt, the grain's
// clock reading now: decline it once its deadline passed undecided,
// nothing once decided, else fire again at the deadline (or
// laterRearmFloor after firedAt if that is past it already).
func laterAlarm(q *callQuestion, now, firedAt time.Time) (act alarmAct, again time.Time) {
	if q == nil || q.Decision != nil {
		return alarmDone, time.Time{}
	}
	if _, v := settleQuestion(*q, now, nil, nil); v == verdictLapsed {
		return alarmDecline, time.Time{}
	}
	again = time.UnixMilli(q.DeadlineMs)
	if !again.After(firedAt) { // the reminders' clock is past it: the grain's is behind
		again = firedAt.Add(laterRearmFloor)
	}
	return alarmAgain, again
}

// OnLaterAlarm is the firing at firedAt of the reminder of pending
// question execID of the grain (laterAlarm): it records the window's
// decline (settling the directory row) of a question whose deadline
// passed undecided, and returns when the reminder is due again (zero:
// never).
func (gc *GrainCalls) OnLaterAlarm(ctx context.Context, execID string, firedAt time.Time) (again time.Time, err error) {
	c, err := gc.load(ctx, func(ctx context.Context) (callstore.Call, error) { return gc.st.ByPause(ctx, gc.cfg.Grain, execID) },
		"", func(c *grainCall) bool { return c.doc.Later && c.doc.question(execID) >= 0 })
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, nil // decided (no longer paused), or never published
	}
	if err != nil {
		return time.Time{}, err
	}
	defer gc.release(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	var q *callQuestion
	i := c.doc.question(execID)
	if c.doc.Later && i >= 0 {
		q = &c.doc.Asks[i]
	}
	act, again := laterAlarm(q, gc.cfg.Now(), firedAt)
	if act == alarmDecline {
		if err := gc.record(c, i, &app.Decision{Reason: engine.ReasonApprovalTimeout}); err != nil {
			return time.Time{}, err
		}
	}
	return again, nil
}

// armLater arms the reminder of pending question id before it is
// published (no Alarms: none).
func (gc *GrainCalls) armLater(ctx context.Context, id string, due time.Time) error {
	if gc.cfg.Alarms == nil {
		return nil
	}
	if err := gc.cfg.Alarms.Arm(ctx, id, due); err != nil {
		return fmt.Errorf("%w: arm the pending question's deadline: %v", app.ErrRetry, err)
	}
	return nil
}

// disarmLater cancels the reminder of pending question id (decided, or
// never published).
func (gc *GrainCalls) disarmLater(id string) {
	if gc.cfg.Alarms != nil {
		gc.cfg.Alarms.Disarm(id)
	}
}

// GrainAlarms are the LaterAlarms of grain activation g: its durable
// reminders, set and cancelled on its turn — a local message to the
// activation, which its LocalHandler passes to ApplyAlarm.
func GrainAlarms(g grain.Context) LaterAlarms {
	return turnAlarms{system: g.ActorSystem(), self: g.Self()}
}

// turnAlarms sends alarm requests to a grain activation.
type turnAlarms struct {
	system *actor.ActorSystem
	self   *actor.PID
}

// alarmRequest is a local message of GrainAlarms: set (due non-zero) or
// cancel the reminder name, answering on done (nil: nobody waits).
type alarmRequest struct {
	name string
	due  time.Time
	done chan error
}

// Arm implements LaterAlarms.
func (a turnAlarms) Arm(ctx context.Context, execID string, due time.Time) error {
	m := &alarmRequest{name: LaterReminder(execID), due: due, done: make(chan error, 1)}
	a.system.Root.Send(a.self, m)
	timer := time.NewTimer(askWriteTimeout)
	defer timer.Stop()
	select {
	case err := <-m.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C: // the activation stopped (or is draining)
		return errors.New("the grain did not arm the reminder")
	}
}

// Disarm implements LaterAlarms.
func (a turnAlarms) Disarm(execID string) {
	a.system.Root.Send(a.self, &alarmRequest{name: LaterReminder(execID)})
}

// ApplyAlarm applies a local message of GrainAlarms on the grain's turn
// and reports whether msg was one.
func ApplyAlarm(ctx context.Context, g grain.Context, msg any) bool {
	m, ok := msg.(*alarmRequest)
	if !ok {
		return false
	}
	var err error
	if m.due.IsZero() {
		err = g.CancelReminders(ctx, m.name)
	} else {
		err = g.SetReminder(ctx, m.name, m.due, 0)
	}
	if m.done != nil {
		m.done <- err
	} else if err != nil {
		g.Logger().Debug("mcpruntime: cancel a pending question's reminder", "reminder", m.name, "err", err)
	}
	return true
}

// LaterReminderFired handles the firing of reminder fired of a grain
// whose durable calls are gc (nil: none) if it is a pending question's
// (ok false: another reminder): it declines the question once its window
// lapsed (GrainCalls.OnLaterAlarm), or makes the reminder due again.
func LaterReminderFired(ctx context.Context, g grain.Context, gc *GrainCalls, fired *pb.ReminderFired) (ok bool, err error) {
	execID, ok := LaterReminderOf(fired.GetName())
	if !ok || gc == nil {
		return ok, nil
	}
	again, err := gc.OnLaterAlarm(ctx, execID, time.UnixMilli(fired.GetFiredAtMs()))
	if err != nil || again.IsZero() {
		return true, err // a one-shot reminder delivered is done; an error fires it again
	}
	return true, g.SetReminder(ctx, fired.GetName(), again, 0)
}
