package exchange

import (
	"crypto/rand"
	"testing"
)

func TestOwnerKindTellsTasksFromSessions(t *testing.T) {
	for owner, want := range map[string]string{
		TaskIDPrefix + "0123abcd": KindTask,
		"c-node-1-17":             KindContinuation, // a sessionless execution's grain
		"C-NODE-1":                KindSession,
		rand.Text():               KindSession, // how session ids are minted
		"TASK-0123":               KindSession,
		"":                        KindSession,
	} {
		if got := OwnerKind(owner); got != want {
			t.Errorf("OwnerKind(%q) = %s, want %s", owner, got, want)
		}
	}
}
