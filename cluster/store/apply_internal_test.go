package store

import "testing"

// Only Writes that applyIn runs as one statement — the grain's row alone:
// its record, its release, both, or the fence check — skip the
// transaction (Postgres: one round trip); anything more must commit
// together.
func TestApplyRunsOneStatementOnlyForTheRowAlone(t *testing.T) {
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
		{"a record and its release", Writes{Record: []byte("r"), Release: true}, true},
		{"a release and a reminder", Writes{Release: true, SetReminders: []Reminder{{Name: "x"}}}, false},
	} {
		if got := rowOnly(c.w); got != c.want {
			t.Errorf("%s: rowOnly %v, want %v", c.name, got, c.want)
		}
	}
}
