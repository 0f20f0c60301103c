package sandbox

// The pool's admission decisions, kept pure: who is over which cap, and which waiting execution
// gets the next free slot. The Pool holds the state and carries the decisions out.

// Caps, as metric labels and in the order they are named (the caller's own first).
const (
	capTenant = "tenant"
	capOrg    = "org"
	capNode   = "node"
)

// claim is who an execution runs for, as the caps see it.
type claim struct {
	tenant string // Limits.Tenant; "": no per-tenant cap
	org    string // Limits.Org, else Limits.Tenant; "" (neither): no per-organization cap
}

// claimOf returns the claim of an execution with these limits.
func claimOf(lim Limits) claim {
	switch {
	case lim.Org != "":
		return claim{tenant: lim.Tenant, org: lim.Org}
	case lim.Tenant != "":
		return claim{tenant: lim.Tenant, org: lim.Tenant} // a principal without an organization is its own
	default:
		return claim{}
	}
}

// usage is what the running (admitted, not parked) executions hold.
type usage struct {
	running int
	tenants map[string]int
	orgs    map[string]int
}

func newUsage() usage { return usage{tenants: map[string]int{}, orgs: map[string]int{}} }

// take counts one more running execution of c.
func (u *usage) take(c claim) {
	u.running++
	if c.tenant != "" {
		u.tenants[c.tenant]++
	}
	u.orgs[c.org]++
}

// give counts one running execution of c less.
func (u *usage) give(c claim) {
	u.running--
	if c.tenant != "" {
		if u.tenants[c.tenant]--; u.tenants[c.tenant] <= 0 {
			delete(u.tenants, c.tenant)
		}
	}
	if u.orgs[c.org]--; u.orgs[c.org] <= 0 {
		delete(u.orgs, c.org)
	}
}

// caps are the running caps: the node's, each organization's (0: none) and each tenant's.
type caps struct{ node, org, tenant int }

// capsOf returns the caps of pool options with their defaults applied.
func capsOf(o PoolOptions) caps {
	k := caps{node: o.MaxRunning, org: o.MaxRunningPerOrg, tenant: o.MaxRunningPerTenant}
	if k.org < 0 || k.org >= k.node {
		k.org = 0 // the whole node
	}
	return k
}

// over returns the cap a new running execution of c would go over — the tenant's, its
// organization's or the node's, named in that order — or "" when it may run.
func (k caps) over(u usage, c claim) string {
	switch {
	case c.tenant != "" && u.tenants[c.tenant] >= k.tenant:
		return capTenant
	case c.org != "" && k.org > 0 && u.orgs[c.org] >= k.org:
		return capOrg
	case u.running >= k.node:
		return capNode
	}
	return ""
}

// pick returns the index of the waiting execution that gets the next free slot, or -1 when none of
// them may run now. Among those under every cap, the one whose organization runs the fewest
// executions goes first (a newcomer organization before one that holds many slots), then the one
// whose tenant runs the fewest, then the one that waited longest (waiting is in arrival order).
func (k caps) pick(u usage, waiting []claim) int {
	best := -1
	for i, c := range waiting {
		if k.over(u, c) != "" {
			continue
		}
		if best < 0 || ahead(u, c, waiting[best]) {
			best = i
		}
	}
	return best
}

// ahead reports whether c goes before d: its organization, or else its tenant, runs fewer
// executions.
func ahead(u usage, c, d claim) bool {
	if co, do := u.orgs[c.org], u.orgs[d.org]; co != do {
		return co < do
	}
	return u.tenants[c.tenant] < u.tenants[d.tenant]
}
