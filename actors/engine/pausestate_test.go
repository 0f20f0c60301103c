package engine

import (
	"encoding/json"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
)

// PauseStateOf reads a pause from its run's journal: awaiting, sent (in
// flight), done (a result, or the tool's own error: accepted), declined
// or cancelled by the engine's DeclinedError (with the reason, the
// window's approval_timeout among them), and a pause the journal does
// not hold.
func TestPauseStateOf(t *testing.T) {
	const addr = "demo.createTodo"
	done := func(c Call) string {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	declined := func(action, reason string) string {
		return done(Call{Path: addr, Failed: true, Error: (&DeclinedError{Address: addr, Action: action, Reason: reason}).Error()})
	}
	entry := func(state, data string) []runstore.JournalEntry {
		return []runstore.JournalEntry{
			{Seq: 0, State: stateDone, Data: done(Call{Path: "demo.listTodos", Result: json.RawMessage(`[]`)})},
			{Seq: 1, State: state, PauseID: "exec_p", Data: data},
		}
	}
	for _, tc := range []struct {
		name    string
		entries []runstore.JournalEntry
		want    PauseState
	}{
		{"not journaled", entry(stateAwaiting, "{}")[:1], PauseState{}},
		{"awaiting", entry(stateAwaiting, done(Call{Path: addr, Pause: &pauseRecord{ID: "exec_p"}})), PauseState{Found: true}},
		{"in flight", entry(stateInFlight, done(Call{Path: addr})), PauseState{Found: true, Decided: true, Action: Accept}},
		{"done", entry(stateDone, done(Call{Path: addr, Result: json.RawMessage(`{"id":1}`)})), PauseState{Found: true, Decided: true, Action: Accept}},
		{"the tool's error", entry(stateDone, done(Call{Path: addr, Failed: true, Error: "HTTP 500"})), PauseState{Found: true, Decided: true, Action: Accept}},
		{"declined", entry(stateDone, declined(Decline, "")), PauseState{Found: true, Decided: true, Action: Decline}},
		{"declined with a reason", entry(stateDone, declined(Decline, "not now (later)")), PauseState{Found: true, Decided: true, Action: Decline, Reason: "not now (later)"}},
		{"expired", entry(stateDone, declined(Decline, ReasonApprovalTimeout)), PauseState{Found: true, Decided: true, Action: Decline, Reason: ReasonApprovalTimeout}},
		{"cancelled", entry(stateDone, declined(Cancel, "session_closed")), PauseState{Found: true, Decided: true, Action: Cancel, Reason: "session_closed"}},
		{"another address's decline is the tool's error", entry(stateDone, done(Call{Path: addr, Failed: true,
			Error: (&DeclinedError{Address: "other.tool", Action: Decline}).Error()})), PauseState{Found: true, Decided: true, Action: Accept}},
	} {
		if got := PauseStateOf(tc.entries, "exec_p", addr); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := PauseStateOf(entry(stateAwaiting, "{}"), "", addr); got.Found {
		t.Errorf("an empty pause id found %+v", got)
	}
}
