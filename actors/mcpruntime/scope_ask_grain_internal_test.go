package mcpruntime

import (
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/policy"
)

// What a sessionless question comes to: the first recorded decision
// stands (whoever answers later, even past the deadline); past the
// deadline an undecided question is the window's decline whatever the
// answer; else an approver's answer is the decision, a viewer's or an
// unknown action changes nothing, and no answer waits.
func TestSettleQuestion(t *testing.T) {
	now := time.UnixMilli(1_900_000_000_000)
	deadline := now.Add(time.Minute).UnixMilli()
	prior := &app.Decision{Accepted: true, By: "bob"}
	accept := &offer{Action: engine.Accept, By: "alice", Role: "admin"}
	for _, tc := range []struct {
		name string
		q    callQuestion
		at   time.Time
		a    *offer
		want verdict
		d    *app.Decision
	}{
		{"decided before", callQuestion{Decision: prior, DeadlineMs: deadline}, now, accept, verdictDecided, prior},
		{"decided before, past the deadline", callQuestion{Decision: prior, DeadlineMs: deadline}, now.Add(time.Hour), nil, verdictDecided, prior},
		{"lapsed, no answer", callQuestion{DeadlineMs: deadline}, now.Add(time.Minute), nil, verdictLapsed, &app.Decision{Reason: engine.ReasonApprovalTimeout}},
		{"lapsed, an approver answers", callQuestion{DeadlineMs: deadline}, now.Add(2 * time.Minute), accept, verdictLapsed, &app.Decision{Reason: engine.ReasonApprovalTimeout}},
		{"waiting", callQuestion{DeadlineMs: deadline}, now, nil, verdictWaiting, nil},
		{"an admin accepts", callQuestion{DeadlineMs: deadline}, now, accept, verdictAccepted, &app.Decision{Accepted: true, By: "alice"}},
		{"a member declines with a reason", callQuestion{DeadlineMs: deadline}, now,
			&offer{Action: engine.Decline, Reason: "freeze", By: "bob", Role: "member"}, verdictAccepted, &app.Decision{Reason: "freeze", By: "bob"}},
		{"a form's content", callQuestion{DeadlineMs: deadline, Form: true}, now,
			&offer{Action: engine.Accept, By: "alice", Role: "admin", ContentJSON: `{"name":"Ada","reason":"x"}`}, verdictAccepted,
			&app.Decision{Accepted: true, By: "alice", Input: map[string]any{"name": "Ada"}}},
		{"a viewer", callQuestion{DeadlineMs: deadline}, now, &offer{Action: engine.Accept, By: "vic", Role: "viewer"}, verdictForbidden, nil},
		{"no role", callQuestion{DeadlineMs: deadline}, now, &offer{Action: engine.Accept, By: "x"}, verdictForbidden, nil},
		{"an unknown action", callQuestion{DeadlineMs: deadline}, now, &offer{Action: "approve", By: "alice", Role: "admin"}, verdictInvalid, nil},
	} {
		d, v := settleQuestion(tc.q, tc.at, tc.a, policy.Approvers("").MayDecide)
		if v != tc.want || !sameDecision(d, tc.d) {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, d, v, tc.d, tc.want)
		}
	}
}

func sameDecision(a, b *app.Decision) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Accepted != b.Accepted || a.Reason != b.Reason || a.By != b.By || len(a.Input) != len(b.Input) {
		return false
	}
	for k, v := range b.Input {
		if a.Input[k] != v {
			return false
		}
	}
	return true
}

// CallState reads the call and the question an Ask's requestState names;
// anything else is not one.
func TestCallState(t *testing.T) {
	for state, want := range map[string][2]string{
		callStatePrefix + "call_x.exec_1": {"call_x", "exec_1"},
		callStatePrefix + "call_x.":       {},
		callStatePrefix + ".exec_1":       {},
		callStatePrefix + "call_x":        {},
		"exec_1":                          {},
		"":                                {},
	} {
		c, e, ok := CallState(state)
		if ok != (want[0] != "") || c != want[0] || e != want[1] {
			t.Errorf("CallState(%q) = %q %q %v, want %q %q", state, c, e, ok, want[0], want[1])
		}
	}
}
