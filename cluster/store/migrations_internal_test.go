package store

import (
	"slices"
	"testing"
)

// A version registered twice — by another owner, or twice in one call —
// panics and registers none of the call's steps.
func TestRegisterMigrationsRefusesATakenVersion(t *testing.T) {
	before := migrations()
	for name, ms := range map[string][]Migration{
		"taken by the cluster": {{Version: 1000, Name: "new"}, {Version: 1, Name: "again"}},
		"twice in one call":    {{Version: 1001, Name: "a"}, {Version: 1001, Name: "b"}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
				if got := migrations(); !slices.EqualFunc(got, before, func(a, b Migration) bool { return a.Version == b.Version && a.Name == b.Name }) {
					t.Fatalf("registered %v after the panic, want %v", got, before)
				}
			}()
			RegisterMigrations("test", ms...)
		})
	}
}

// Registered steps apply in version order, whatever order their owners
// registered them in.
func TestMigrationsAreInVersionOrder(t *testing.T) {
	ms := migrations()
	if len(ms) < 2 || ms[0].Version != 1 || ms[1].Version != 2 {
		t.Fatalf("migrations %v, want the cluster's 1 and 2 first", ms)
	}
	if !slices.IsSortedFunc(ms, func(a, b Migration) int { return a.Version - b.Version }) {
		t.Fatalf("migrations out of order: %v", ms)
	}
}
