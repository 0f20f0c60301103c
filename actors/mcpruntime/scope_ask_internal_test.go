package mcpruntime

import (
	"encoding/json"
	"testing"
)

// A tool call's identity is its tool's name and its arguments as JSON
// values: the order of object keys and white space do not matter, any
// other difference does.
func TestCallIdentity(t *testing.T) {
	base := identity("deploy", json.RawMessage(`{"service":"api","version":"1"}`))
	for _, tc := range []struct {
		name, tool, args string
		same             bool
	}{
		{"the same call", "deploy", `{"service":"api","version":"1"}`, true},
		{"keys in another order, other spacing", "deploy", `{ "version": "1", "service": "api" }`, true},
		{"another argument value", "deploy", `{"service":"api","version":"2"}`, false},
		{"an extra argument", "deploy", `{"service":"api","version":"1","force":true}`, false},
		{"another tool", "rollback", `{"service":"api","version":"1"}`, false},
		{"no arguments", "deploy", ``, false},
	} {
		if got := identity(tc.tool, json.RawMessage(tc.args)) == base; got != tc.same {
			t.Errorf("%s: same identity %v, want %v", tc.name, got, tc.same)
		}
	}
	if identity("a", json.RawMessage(`"b"`)) == identity("a\x00", json.RawMessage(`b"`)) {
		t.Error("the tool name and the arguments run together")
	}
}

// The channel a waiting call selects on is closed by close whether it was
// made before (a call waiting) or after (a call starting to wait on a
// closed runtime); closing twice is harmless; the maps of open calls and
// pauses exist only while they hold something.
func TestAsksClosingAndLazyMaps(t *testing.T) {
	var a asks
	if a.closed != nil || a.open != nil || a.pauses != nil {
		t.Fatal("a fresh asks made a channel or a map")
	}
	before := a.closing()
	select {
	case <-before:
		t.Fatal("closed before close")
	default:
	}
	a.close()
	a.close()
	for i, ch := range []<-chan struct{}{before, a.closing()} {
		select {
		case <-ch:
		default:
			t.Fatalf("channel %d not closed after close", i)
		}
	}
	var late asks
	late.close()
	select {
	case <-late.closing():
	default:
		t.Fatal("a channel made after close is not closed")
	}
	c := &durableCall{}
	a.setOpen("id", c)
	a.setPause("e1", &askPause{c: c})
	if a.open["id"] != c || a.pauses["e1"] == nil {
		t.Fatal("setOpen/setPause did not record")
	}
	a.dropOpen("id")
	a.dropPause("e1")
	if a.open != nil || a.pauses != nil {
		t.Fatal("an emptied map is kept")
	}
}
