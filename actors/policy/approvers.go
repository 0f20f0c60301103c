package policy

// Approvers says who of an execution's organization may decide it (the
// node's --approvers). Anyone of the organization may see a pause;
// deciding also takes a role Approvers allows, whichever way the decision
// comes: an approval surface, the model's resume, a native elicitation's
// answer, a 2026-07-28 retry.
type Approvers string

// The values of Approvers.
const (
	// ApproversMember lets admins and members decide, never viewers. The
	// default (also for "").
	ApproversMember Approvers = "member"
	// ApproversAdmin lets only admins decide.
	ApproversAdmin Approvers = "admin"
)

// Valid reports whether a is a known value ("" included).
func (a Approvers) Valid() bool {
	return a == "" || a == ApproversMember || a == ApproversAdmin
}

// MayDecide reports whether a principal with role may decide under a.
// Admins always may, members unless a is [ApproversAdmin]; any other role
// (a viewer) never decides, and neither does a principal without a role:
// every authenticated principal has one (a key that names none is a
// member's), so an empty role is a principal that lost its role on the
// way, and it fails closed.
func (a Approvers) MayDecide(role string) bool {
	switch role {
	case "admin":
		return true
	case "member":
		return a != ApproversAdmin
	}
	return false
}
