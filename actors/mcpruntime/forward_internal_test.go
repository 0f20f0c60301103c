package mcpruntime

import (
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/codemode"
)

// A forwarded resume of an execution the directory shows settled never
// reports a miss that advises running the code again (issue 23, finding
// 7): its owner's session may be closed or its runtime gone, but what the
// execution did already happened.
func TestForwardMissOfASettledExecution(t *testing.T) {
	for _, tc := range []struct {
		settled bool
		miss    codemode.Miss
		want    codemode.Miss
	}{
		{false, codemode.Expired, codemode.Expired},
		{false, codemode.NotFound, codemode.NotFound},
		{false, codemode.Forbidden, codemode.Forbidden},
		{false, codemode.AlreadySettled, codemode.AlreadySettled},
		{true, codemode.Expired, codemode.AlreadySettled},
		{true, codemode.NotFound, codemode.AlreadySettled},
		{true, codemode.Forbidden, codemode.Forbidden},
		{true, codemode.AlreadySettled, codemode.AlreadySettled},
	} {
		if got := forwardMiss(tc.settled)(tc.miss); got != tc.want {
			t.Errorf("settled %v, miss %s: got %s, want %s", tc.settled, tc.miss, got, tc.want)
		}
	}
}
