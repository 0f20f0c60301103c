package mcpruntime

import (
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
)

// codeStatus reads a code-mode pause as a question: the journal's
// decision first (the window's decline is expired, whoever the directory
// says approved; the directory's decider of the same action is By), a
// surface's recorded decision the engine has not journaled yet, the
// deadline, an execution that ended without a decision, else pending.
func TestCodeStatus(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	row := directory.Execution{ID: "exec_c", Session: "s1", User: "alice", Org: "acme", Address: "demo.createTodo",
		Message: "Approve demo.createTodo?", ArgsJSON: `{"title":"ship it"}`, Deadline: now.Add(time.Minute)}
	with := func(f func(*directory.Execution)) directory.Execution { e := row; f(&e); return e }
	surface := func(action, reason string) directory.Execution {
		return with(func(e *directory.Execution) {
			e.Decision, e.DecidedBy, e.Reason, e.Settled = action, "ada", reason, now
		})
	}
	journaled := func(action, reason string) engine.PauseState {
		return engine.PauseState{Found: true, Decided: true, Action: action, Reason: reason}
	}
	awaiting := engine.PauseState{Found: true}
	for _, tc := range []struct {
		name       string
		e          directory.Execution
		ps         engine.PauseState
		runSettled bool
		state      app.AskState
		d          app.Decision
	}{
		{"pending", row, awaiting, false, app.AskWaiting, app.Decision{}},
		{"approved on a surface, applied", surface("accept", ""), journaled(engine.Accept, ""), false, app.AskDecided, app.Decision{Accepted: true, By: "ada"}},
		{"approved on a surface, being applied", surface("accept", ""), awaiting, false, app.AskDecided, app.Decision{Accepted: true, By: "ada"}},
		{"declined on a surface", surface("decline", "no"), journaled(engine.Decline, "no"), false, app.AskDecided, app.Decision{Reason: "no", By: "ada"}},
		{"accepted by the model", row, journaled(engine.Accept, ""), false, app.AskDecided, app.Decision{Accepted: true}},
		{"declined by the model", with(func(e *directory.Execution) { e.Settled = now }), journaled(engine.Decline, ""), true, app.AskDecided, app.Decision{}},
		{"cancelled", row, journaled(engine.Cancel, "session_closed"), false, app.AskDecided, app.Decision{Reason: "session_closed"}},
		{"the window's decline", row, journaled(engine.Decline, engine.ReasonApprovalTimeout), false, app.AskExpired, app.Decision{Reason: session.ReasonApprovalTimeout}},
		{"approved too late: the engine declined it", surface("accept", ""), journaled(engine.Decline, engine.ReasonApprovalTimeout), false, app.AskExpired, app.Decision{Reason: session.ReasonApprovalTimeout}},
		{"deadline passed, nobody recorded it", with(func(e *directory.Execution) { e.Deadline = now }), awaiting, false, app.AskExpired, app.Decision{Reason: session.ReasonApprovalTimeout}},
		{"ended without a decision", row, awaiting, true, app.AskDecided, app.Decision{Reason: ReasonCodeSettled}},
	} {
		s := codeStatus(codePause{e: tc.e, ps: tc.ps, runSettled: tc.runSettled}, now)
		if s.State != tc.state || s.Decision.Accepted != tc.d.Accepted || s.Decision.By != tc.d.By || s.Decision.Reason != tc.d.Reason {
			t.Errorf("%s: %s %+v, want %s %+v", tc.name, s.State, s.Decision, tc.state, tc.d)
		}
		if s.ID != "exec_c" || s.Summary != row.Message || !s.Deadline.Equal(tc.e.Deadline) || s.Details["address"] != "demo.createTodo" {
			t.Errorf("%s: status %+v lacks the pause's id, summary, deadline or address", tc.name, s)
		}
	}
}
