package app

import (
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/policy"
)

// InBandFor: a question that does not let its client decide is closed
// whatever the role; one that does is open to a role --approvers allows
// and refused to any other (a viewer, an unknown or empty role; a member
// under "admin").
func TestInBandFor(t *testing.T) {
	for _, tc := range []struct {
		clientMayDecide bool
		role            string
		approvers       policy.Approvers
		want            InBand
	}{
		{false, "admin", "", InBandClosed},
		{false, "viewer", policy.ApproversAdmin, InBandClosed},
		{true, "admin", "", InBandOpen},
		{true, "member", "", InBandOpen},
		{true, "member", policy.ApproversMember, InBandOpen},
		{true, "viewer", "", InBandRefused},
		{true, "", "", InBandRefused},
		{true, "owner", "", InBandRefused},
		{true, "admin", policy.ApproversAdmin, InBandOpen},
		{true, "member", policy.ApproversAdmin, InBandRefused},
		{true, "viewer", policy.ApproversAdmin, InBandRefused},
	} {
		if got := InBandFor(tc.clientMayDecide, tc.role, tc.approvers); got != tc.want {
			t.Errorf("InBandFor(%v, %q, %q) = %v, want %v", tc.clientMayDecide, tc.role, tc.approvers, got, tc.want)
		}
	}
}
