package membership

import (
	"context"
	"slices"
	"strings"
)

// Member is one node of the cluster as membership sees it.
type Member struct {
	// ID names the node. It must be unique among live members; a node that
	// restarts may reuse its ID (it then simply re-registers).
	ID string
	// Address is the host:port other members use to reach this node's actor
	// remote (gRPC). Placement hashes the address, not the ID, so a node that
	// restarts on the same address gets its grains back.
	Address string
	// Kinds lists the grain kinds this member hosts.
	Kinds []string
	// Meta carries small operator-facing attributes such as the HTTP address.
	Meta map[string]string
}

// HostsKind reports whether m hosts grains of kind.
func (m Member) HostsKind(kind string) bool {
	return slices.Contains(m.Kinds, kind)
}

// View is one snapshot of the cluster's membership: the members a provider
// currently considers alive, sorted by ID. Views are values; a provider
// publishes a new View on every change.
type View struct {
	// Members are the live members, sorted by ID.
	Members []Member
}

// NewView returns a View over members, sorted by ID, without duplicate IDs
// (the last occurrence wins).
func NewView(members ...Member) View {
	byID := make(map[string]Member, len(members))
	for _, m := range members {
		byID[m.ID] = m
	}
	out := make([]Member, 0, len(byID))
	for _, m := range byID {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return View{Members: out}
}

// Contains reports whether the view has a member with id.
func (v View) Contains(id string) bool {
	_, ok := v.Member(id)
	return ok
}

// Member returns the member with id.
func (v View) Member(id string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(v.Members, id, func(m Member, id string) int { return strings.Compare(m.ID, id) })
	if !ok {
		return Member{}, false
	}
	return v.Members[i], true
}

// Equal reports whether v and o hold the same members with the same
// addresses, kinds and meta.
func (v View) Equal(o View) bool {
	return slices.EqualFunc(v.Members, o.Members, func(a, b Member) bool {
		if a.ID != b.ID || a.Address != b.Address || !slices.Equal(a.Kinds, b.Kinds) || len(a.Meta) != len(b.Meta) {
			return false
		}
		for k, va := range a.Meta {
			if vb, ok := b.Meta[k]; !ok || va != vb {
				return false
			}
		}
		return true
	})
}

// Event is what a provider reports to the node: either a new view, or a
// warning that this member may have been declared dead by the others.
type Event struct {
	// View is the new membership view. Zero when Suspect is set.
	View View
	// Suspect is set when this member cannot be sure the others still count
	// it as alive: its liveness lease lapsed (for example the process was
	// frozen, or the membership service was unreachable for longer than the
	// lease). Other members may have taken over its grains, so the node must
	// drop every activation it holds; fencing epochs make that safe but this
	// makes it prompt.
	Suspect bool
}

// Provider discovers the members of a cluster and keeps this member
// registered. Implementations: [github.com/mcpgrain/mcpgrain/cluster/membership/consul]
// (a real Consul agent), [Single] (one embedded node, no external service)
// and [Network] (several in-process members, for tests).
type Provider interface {
	// Start registers self and begins delivering events to notify, in order,
	// from one goroutine at a time. The first event is delivered as soon as
	// a view that contains self is known. Start returns once registration
	// succeeded or ctx ended; afterwards the provider keeps itself registered
	// and retries every failure on its own until Stop.
	Start(ctx context.Context, self Member, notify func(Event)) error
	// Stop deregisters self (best effort, bounded by ctx) and stops
	// delivering events. It is safe to call more than once.
	Stop(ctx context.Context) error
}
