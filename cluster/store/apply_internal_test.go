package store

import "testing"

// Only Writes that applyIn runs as one statement skip the transaction
// (Postgres: one round trip); anything more must commit together.
func TestApplyRunsOneStatementOnlyForARecordAlone(t *testing.T) {
	for _, c := range []struct {
		name string
		w    Writes
		want bool
	}{
		{"nothing (the fence check)", Writes{}, true},
		{"a record", Writes{Record: []byte("r")}, true},
		{"a record and a reminder", Writes{Record: []byte("r"), SetReminders: []Reminder{{Name: "x"}}}, false},
		{"a cancelled reminder", Writes{CancelReminders: []string{"x"}}, false},
		{"the other reminders cancelled", Writes{CancelOtherReminders: true}, false},
		{"a release", Writes{Record: []byte("r"), Release: true}, false},
	} {
		if got := c.w.oneStatement(); got != c.want {
			t.Errorf("%s: oneStatement %v, want %v", c.name, got, c.want)
		}
	}
}
