package placement

import (
	"hash/fnv"

	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

// Table answers "which member owns this grain?" for one membership view,
// using rendezvous (highest-random-weight) hashing over the members that host
// the grain's kind. It is immutable and safe for concurrent use; build a new
// Table for every view.
//
// Rendezvous hashing moves only the grains of a member that joins or leaves
// (about 1/N of them), needs no ring or virtual nodes, and every node that
// holds the same view computes the same owner without talking to anyone.
// Members are scored by their address, not their ID, so a node restarted on
// the same address gets the same grains back.
type Table struct {
	view   membership.View
	byKind map[string][]scored
}

type scored struct {
	member membership.Member
	seed   uint64 // hash of the member address
}

// NewTable builds the lookup table for view.
func NewTable(view membership.View) *Table {
	t := &Table{view: view, byKind: map[string][]scored{}}
	for _, m := range view.Members {
		s := scored{member: m, seed: hashString(m.Address)}
		for _, k := range m.Kinds {
			t.byKind[k] = append(t.byKind[k], s)
		}
	}
	return t
}

// View returns the view the table was built from.
func (t *Table) View() membership.View { return t.view }

// Owner returns the member that owns (kind, identity), or false if no member
// hosts kind.
func (t *Table) Owner(kind, identity string) (membership.Member, bool) {
	cands := t.byKind[kind]
	if len(cands) == 0 {
		return membership.Member{}, false
	}
	h := hashString(identity)
	best, bestScore := 0, score(h, cands[0].seed)
	for i := 1; i < len(cands); i++ {
		s := score(h, cands[i].seed)
		// Ties (practically impossible with 64-bit scores) go to the lower
		// member ID, which is the earlier one: members are sorted by ID.
		if s > bestScore {
			best, bestScore = i, s
		}
	}
	return cands[best].member, true
}

// Hosts reports whether any member hosts kind.
func (t *Table) Hosts(kind string) bool { return len(t.byKind[kind]) > 0 }

func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// score mixes the identity and member hashes with the splitmix64 finalizer so
// that every member's score for an identity is an independent, uniform draw.
func score(identity, member uint64) uint64 {
	x := identity ^ (member * 0x9e3779b97f4a7c15)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
