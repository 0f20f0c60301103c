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
