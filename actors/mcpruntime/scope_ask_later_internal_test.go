package mcpruntime

import (
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// What a pending question came to at a time (an injected clock): its
// recorded decision (the window's decline is "expired"), else expired
// once its deadline passed — with nobody to record the decline (the
// session ended) — else pending.
func TestLaterStatus(t *testing.T) {
	deadline := time.UnixMilli(1_700_000_000_000)
	before, after := deadline.Add(-time.Millisecond), deadline.Add(time.Hour)
	q := callQuestion{ID: "exec_1", Summary: "s", Details: map[string]any{"k": "v"}, DeadlineMs: deadline.UnixMilli()}
	timeout := &app.Decision{Reason: "approval_timeout"}
	for _, c := range []struct {
		name string
		d    *app.Decision
		now  time.Time
		want app.AskState
		dec  *app.Decision
	}{
		{"undecided", nil, before, app.AskWaiting, nil},
		{"undecided past the deadline, nothing recorded", nil, after, app.AskExpired, timeout},
		{"undecided at the deadline", nil, deadline, app.AskExpired, timeout},
		{"accepted", &app.Decision{Accepted: true, By: "bob"}, before, app.AskDecided, nil},
		{"accepted, read past the deadline", &app.Decision{Accepted: true, By: "bob"}, after, app.AskDecided, nil},
		{"declined", &app.Decision{Reason: "no", By: "bob"}, before, app.AskDecided, nil},
		{"declined by a human with the timeout's reason", &app.Decision{Reason: "approval_timeout", By: "bob"}, before, app.AskDecided, nil},
		{"the window's decline", timeout, after, app.AskExpired, nil},
	} {
		q.Decision = c.d
		got := laterStatus(q, c.now)
		if got.State != c.want || got.ID != "exec_1" || got.Summary != "s" || got.Details["k"] != "v" || !got.Deadline.Equal(deadline) {
			t.Errorf("%s: %+v, want state %s", c.name, got, c.want)
		}
		want := c.d
		if want == nil {
			want = c.dec
		}
		if want == nil {
			want = &app.Decision{}
		}
		if got.Decision.Accepted != want.Accepted || got.Decision.By != want.By || got.Decision.Reason != want.Reason {
			t.Errorf("%s: decision %+v, want %+v", c.name, got.Decision, *want)
		}
	}
}

// A pending question's execution id is the same in every run of the step
// that asks it, and another step's differs; its call can never be an open
// call's retry.
func TestLaterIDs(t *testing.T) {
	a, b := laterExecID(stepKeyOf("call_1", 0, laterStep)), laterExecID(stepKeyOf("call_1", 0, laterStep))
	if a != b || a == laterExecID(stepKeyOf("call_1", 1, laterStep)) || len(a) != len("exec_")+32 {
		t.Fatalf("ids %s %s", a, b)
	}
	if laterIdent(a) == identity("t", nil) || laterCallID(a) == a {
		t.Fatal("a pending question's call is not apart")
	}
}

// What the reminder of a pending question does when it fires: nothing for
// a question decided first (by a human, or the window's decline already
// recorded) or none of the grain's; the window's decline at or past the
// deadline; fire again at the deadline when it fired early (a clock
// step) — or laterRearmFloor after it fired if the reminders' clock is
// past the deadline already (the grain's clock is behind: no spinning).
func TestLaterAlarm(t *testing.T) {
	deadline := time.UnixMilli(1_700_000_000_000)
	undecided := &callQuestion{ID: "exec_1", DeadlineMs: deadline.UnixMilli()}
	accepted := &callQuestion{ID: "exec_1", DeadlineMs: deadline.UnixMilli(), Decision: &app.Decision{Accepted: true, By: "bob"}}
	lapsed := &callQuestion{ID: "exec_1", DeadlineMs: deadline.UnixMilli(), Decision: &app.Decision{Reason: "approval_timeout"}}
	for _, c := range []struct {
		name         string
		q            *callQuestion
		now, firedAt time.Time
		act          alarmAct
		again        time.Time
	}{
		{"none of the grain's", nil, deadline, deadline, alarmDone, time.Time{}},
		{"decided before the deadline", accepted, deadline.Add(time.Hour), deadline, alarmDone, time.Time{}},
		{"decided, fired early", accepted, deadline.Add(-time.Hour), deadline.Add(-time.Hour), alarmDone, time.Time{}},
		{"the window's decline already recorded", lapsed, deadline.Add(time.Hour), deadline, alarmDone, time.Time{}},
		{"at the deadline", undecided, deadline, deadline, alarmDecline, time.Time{}},
		{"past the deadline (a node was down)", undecided, deadline.Add(time.Hour), deadline.Add(time.Hour), alarmDecline, time.Time{}},
		{"fired early", undecided, deadline.Add(-time.Minute), deadline.Add(-time.Minute), alarmAgain, deadline},
		{"the grain's clock behind the reminders'", undecided, deadline.Add(-time.Minute), deadline.Add(time.Minute), alarmAgain, deadline.Add(time.Minute + laterRearmFloor)},
		{"just before the deadline", undecided, deadline.Add(-time.Millisecond), deadline.Add(-time.Millisecond), alarmAgain, deadline},
	} {
		act, again := laterAlarm(c.q, c.now, c.firedAt)
		if act != c.act || !again.Equal(c.again) {
			t.Errorf("%s: %v %v, want %v %v", c.name, act, again, c.act, c.again)
		}
	}
}

// The names of the reminders of pending questions.
func TestLaterReminderNames(t *testing.T) {
	if id, ok := LaterReminderOf(LaterReminder("exec_1")); !ok || id != "exec_1" {
		t.Fatalf("LaterReminderOf(LaterReminder): %q %v", id, ok)
	}
	for _, name := range []string{"later:", "approval", "approval:exec_1", "lease", "expire"} {
		if _, ok := LaterReminderOf(name); ok {
			t.Errorf("%q read as a pending question's reminder", name)
		}
	}
}
