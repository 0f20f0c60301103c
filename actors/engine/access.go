package engine

// Access is the right a caller claims over an execution. The engine checks
// it against the execution's owner (the principal that ran it) on every
// path that reads or decides an execution: a resume with or without a
// decision, the replay of a settled outcome (in memory or from the
// journal), a restore on demand, a look at a pause. An execution the
// caller may not touch is reported exactly like an unknown one, so its id
// reveals nothing: a grain shared by many principals (a continuation
// grain serves every client of its node) never lets one principal read,
// decide or replay another's work, whatever id it sends.
//
// The zero Access allows nothing.
type Access struct {
	who  Principal
	kind accessKind
}

type accessKind uint8

const (
	accessNone   accessKind = iota // the zero Access: nothing
	accessOwner                    // the owner: same user and organization
	accessOrg                      // an approver: same organization
	accessSystem                   // the owning grain itself
)

// AsOwner is the access of p acting as the execution's owner: the model's
// resume, a 2026-07-28 retry, a resume forwarded from another session. Only
// the principal that ran the execution (same user and organization) may.
func AsOwner(p Principal) Access { return Access{who: p, kind: accessOwner} }

// AsApprover is the access of p deciding as an approver: anyone of the
// owner's organization (an approval surface checks the role first).
func AsApprover(p Principal) Access { return Access{who: p, kind: accessOrg} }

// System is the owning grain's own access: the decline at a pause's
// deadline, a decision the grain checked and recorded, its own inspection
// of pauses, a shutdown. Never for a request's caller.
var System = Access{kind: accessSystem}

// Allows reports whether a may act on an execution run by owner.
func (a Access) Allows(owner Principal) bool {
	switch a.kind {
	case accessSystem:
		return true
	case accessOwner:
		return a.who.User == owner.User && a.who.Org == owner.Org
	case accessOrg:
		return a.who.Org == owner.Org
	}
	return false
}
