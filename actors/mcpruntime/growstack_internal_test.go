package mcpruntime

import "testing"

// The requests whose handler grows its stack once, up front: a tool call
// and an initialize (whose state is encoded and stored before the
// answer); the others start on go-sdk's small stack as before.
func TestGrowsStack(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   bool
	}{
		{"tools/call", true},
		{"initialize", true},
		{"notifications/initialized", false},
		{"ping", false},
		{"tools/list", false},
		{"resources/read", false},
		{"", false},
	} {
		if got := growsStack(tc.method); got != tc.want {
			t.Errorf("growsStack(%q) = %v, want %v", tc.method, got, tc.want)
		}
	}
}
