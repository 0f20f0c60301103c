package mcpruntime

import (
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// What a pending question came to: its recorded decision (the window's
// decline is "expired"), else pending, also past its deadline until the
// decline is recorded.
func TestLaterStatus(t *testing.T) {
	deadline := time.UnixMilli(1_700_000_000_000)
	q := callQuestion{ID: "exec_1", Summary: "s", Details: map[string]any{"k": "v"}, DeadlineMs: deadline.UnixMilli()}
	for _, c := range []struct {
		name string
		d    *app.Decision
		want app.AskState
	}{
		{"undecided", nil, app.AskWaiting},
		{"accepted", &app.Decision{Accepted: true, By: "bob"}, app.AskDecided},
		{"declined", &app.Decision{Reason: "no", By: "bob"}, app.AskDecided},
		{"declined by a human with the timeout's reason", &app.Decision{Reason: "approval_timeout", By: "bob"}, app.AskDecided},
		{"the window's decline", &app.Decision{Reason: "approval_timeout"}, app.AskExpired},
	} {
		q.Decision = c.d
		got := laterStatus(q)
		if got.State != c.want || got.ID != "exec_1" || got.Summary != "s" || got.Details["k"] != "v" || !got.Deadline.Equal(deadline) {
			t.Errorf("%s: %+v, want state %s", c.name, got, c.want)
		}
		if c.d != nil && (got.Decision.Accepted != c.d.Accepted || got.Decision.By != c.d.By || got.Decision.Reason != c.d.Reason) {
			t.Errorf("%s: decision %+v, want %+v", c.name, got.Decision, *c.d)
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
