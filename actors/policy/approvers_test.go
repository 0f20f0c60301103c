package policy

import "testing"

func TestApproversMayDecide(t *testing.T) {
	for _, tc := range []struct {
		approvers Approvers
		role      string
		want      bool
	}{
		{"", "admin", true}, {"", "member", true}, {"", "", false}, {"", "viewer", false}, {"", "owner", false},
		{ApproversMember, "", false}, {ApproversMember, "viewer", false},
		{ApproversMember, "member", true}, {ApproversAdmin, "admin", true}, {ApproversAdmin, "member", false},
		{ApproversAdmin, "", false}, {ApproversAdmin, "viewer", false},
	} {
		if got := tc.approvers.MayDecide(tc.role); got != tc.want {
			t.Errorf("Approvers(%q).MayDecide(%q) = %v, want %v", tc.approvers, tc.role, got, tc.want)
		}
	}
	for a, want := range map[Approvers]bool{"": true, ApproversMember: true, ApproversAdmin: true, "owner": false} {
		if a.Valid() != want {
			t.Errorf("Approvers(%q).Valid() = %v", a, !want)
		}
	}
}
