package mcpruntime

import (
	"net/textproto"
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

// The exchange token's header name is canonical: serve sets it and
// exchangeOf reads it by that name, not through Header.Set and Get.
func TestExchangeTokenHeaderIsCanonical(t *testing.T) {
	if textproto.CanonicalMIMEHeaderKey(headerExchange) != headerExchange {
		t.Errorf("%s is not canonical", headerExchange)
	}
}
