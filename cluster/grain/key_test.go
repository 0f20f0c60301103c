package grain_test

import (
	"testing"
	"unsafe"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
)

// named is a Context that only knows its kind and identity.
type named struct {
	grain.Context
	kind, identity string
}

func (n named) Kind() string     { return n.kind }
func (n named) Identity() string { return n.identity }

// keyed is a named Context that keeps its key.
type keyed struct {
	named
	key string
}

func (k keyed) Key() string { return k.key }

// KeyOf is the key a Keyed context keeps (the same string, not a copy:
// a resident session shares its activation's), else Key of its kind and
// identity.
func TestKeyOf(t *testing.T) {
	n := named{kind: "session", identity: "s1"}
	if got := grain.KeyOf(n); got != "session/s1" {
		t.Errorf("KeyOf(named) = %q", got)
	}
	kept := grain.Key("session", "s1")
	got := grain.KeyOf(keyed{named: n, key: kept})
	if got != kept || unsafe.StringData(got) != unsafe.StringData(kept) {
		t.Errorf("KeyOf(keyed) = %q, not the kept string", got)
	}
}
