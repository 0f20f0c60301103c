package engine

import (
	"encoding/json"
	"strings"

	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
)

// PauseState is what a durable run's journal says of one of its pauses:
// read by a question reader (the SDK's AskStatus of a code-mode
// execution id) from the stored journal, without the engine that runs it
// and without writing anything.
type PauseState struct {
	// Found: the journal has the call that paused.
	Found bool
	// Decided: the call moved past its pause (sent, done, or declined);
	// Action (Accept, Decline or Cancel) and Reason (a decline's, e.g.
	// ReasonApprovalTimeout for the approval window's) say how.
	Decided bool
	Action  string
	Reason  string
}

// PauseStateOf reads pause pauseID from entries, the journal of the run
// that paused with it (runstore.Store.GetRun). address is the pause's
// address (the execution directory's row of it): a declined call's
// outcome is the engine's DeclinedError of it, which is how a decline is
// told from a tool's own error once the call is done.
func PauseStateOf(entries []runstore.JournalEntry, pauseID, address string) PauseState {
	var en *runstore.JournalEntry
	for i := range entries {
		if entries[i].PauseID == pauseID && pauseID != "" {
			en = &entries[i]
		}
	}
	switch {
	case en == nil:
		return PauseState{}
	case en.State == stateAwaiting:
		return PauseState{Found: true}
	case en.State != stateDone: // in flight: accepted and sent
		return PauseState{Found: true, Decided: true, Action: Accept}
	}
	var c Call
	if err := json.Unmarshal([]byte(en.Data), &c); err != nil || !c.Failed {
		return PauseState{Found: true, Decided: true, Action: Accept}
	}
	for _, action := range []string{Decline, Cancel} {
		if reason, ok := declinedAs(c.Error, address, action); ok {
			return PauseState{Found: true, Decided: true, Action: action, Reason: reason}
		}
	}
	return PauseState{Found: true, Decided: true, Action: Accept} // the tool's own error, after an accept
}

// declinedAs reports whether msg is the DeclinedError of a call to
// address not approved with action, and its reason.
func declinedAs(msg, address, action string) (reason string, ok bool) {
	base := (&DeclinedError{Address: address, Action: action}).Error()
	switch {
	case msg == base:
		return "", true
	case strings.HasPrefix(msg, base+" (") && strings.HasSuffix(msg, ")"):
		return msg[len(base)+2 : len(msg)-1], true
	}
	return "", false
}
