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
