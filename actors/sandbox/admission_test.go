package sandbox

import (
	"maps"
	"slices"
	"testing"
)

// use builds a usage from running executions, given as claims.
func use(running ...claim) usage {
	u := newUsage()
	for _, c := range running {
		u.take(c)
	}
	return u
}

// times repeats c n times.
func times(n int, c claim) []claim {
	out := make([]claim, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func TestClaimOf(t *testing.T) {
	for _, tc := range []struct {
		lim  Limits
		want claim
	}{
		{Limits{Tenant: "acme/a1", Org: "acme"}, claim{tenant: "acme/a1", org: "acme"}},
		{Limits{Tenant: "/bob"}, claim{tenant: "/bob", org: "/bob"}}, // no organization: its own
		{Limits{}, claim{}}, // no owner: the node's cap only
	} {
		if got := claimOf(tc.lim); got != tc.want {
			t.Errorf("claimOf(%+v) = %+v, want %+v", tc.lim, got, tc.want)
		}
	}
}

func TestDefaultCaps(t *testing.T) {
	for node, want := range map[int]int{1: 1, 2: 1, 3: 2, 4: 3, 8: 6, 16: 12, 64: 48} {
		if got := DefaultMaxRunningPerOrg(node); got != want {
			t.Errorf("DefaultMaxRunningPerOrg(%d) = %d, want %d", node, got, want)
		}
	}
	for _, tc := range []struct {
		opts PoolOptions
		want caps
	}{
		{PoolOptions{MaxRunning: 8}, caps{node: 8, org: 6, tenant: 4}},
		{PoolOptions{MaxRunning: 8, MaxRunningPerOrg: 3, MaxRunningPerTenant: 2}, caps{node: 8, org: 3, tenant: 2}},
		{PoolOptions{MaxRunning: 8, MaxRunningPerOrg: -1}, caps{node: 8, org: 0, tenant: 4}}, // no org cap
		{PoolOptions{MaxRunning: 8, MaxRunningPerOrg: 8}, caps{node: 8, org: 0, tenant: 4}},  // the whole node: none
		{PoolOptions{MaxRunning: 1}, caps{node: 1, org: 0, tenant: 4}},
	} {
		if got := capsOf(tc.opts.withDefaults()); got != tc.want {
			t.Errorf("caps of %+v = %+v, want %+v", tc.opts, got, tc.want)
		}
	}
	if got := (PoolOptions{}).withDefaults().SlotWait; got != DefaultSlotWait {
		t.Errorf("default SlotWait = %v", got)
	}
}

func TestOverNamesTheCapThatIsFull(t *testing.T) {
	k := caps{node: 8, org: 6, tenant: 4}
	a1 := claim{tenant: "acme/a1", org: "acme"}
	a2 := claim{tenant: "acme/a2", org: "acme"}
	b := claim{tenant: "beta/b", org: "beta"}
	anon := claim{}
	for _, tc := range []struct {
		name    string
		running []claim
		c       claim
		want    string
	}{
		{"empty node", nil, a1, ""},
		{"own cap", times(4, a1), a1, capTenant},
		{"own cap is named before the node's", append(times(4, a1), times(4, b)...), a1, capTenant},
		{"organization's cap, other user", append(times(4, a1), times(2, a2)...), a2, capOrg},
		{"another organization beside a saturating one", append(times(4, a1), times(2, a2)...), b, ""},
		{"node full", append(append(times(4, a1), times(2, a2)...), times(2, b)...), b, capNode},
		{"no owner: node cap only", times(7, anon), anon, ""},
		{"no owner, node full", times(8, anon), anon, capNode},
	} {
		if got := k.over(use(tc.running...), tc.c); got != tc.want {
			t.Errorf("%s: over = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Without a per-organization cap one organization may take the whole node.
	if got := (caps{node: 8, tenant: 4}).over(use(append(times(4, a1), times(3, a2)...)...), a2); got != "" {
		t.Errorf("no org cap: over = %q", got)
	}
}

func TestPickGivesTheSlotToTheOrganizationRunningFewest(t *testing.T) {
	k := caps{node: 8, org: 6, tenant: 4}
	a1 := claim{tenant: "acme/a1", org: "acme"}
	a2 := claim{tenant: "acme/a2", org: "acme"}
	b := claim{tenant: "beta/b", org: "beta"}
	b2 := claim{tenant: "beta/b2", org: "beta"}
	c := claim{tenant: "gamma/c", org: "gamma"}
	for _, tc := range []struct {
		name    string
		running []claim
		waiting []claim
		want    int
	}{
		{"nobody waits", nil, nil, -1},
		{"first come on an empty node", nil, []claim{a1, b}, 0},
		{"newcomer before the saturating organization's earlier waiters",
			append(times(4, a1), times(1, a2)...), []claim{a2, a2, b}, 2},
		{"over its organization's cap: skipped",
			append(times(4, a1), times(2, a2)...), []claim{a2, b}, 1},
		{"over its own cap: skipped", times(4, a1), []claim{a1, a2}, 1},
		{"node full: nobody", append(times(6, a1), times(2, b)...), []claim{c}, -1},
		{"equal organizations: the user running fewer", append(times(2, b), times(1, b2)...), []claim{b, b2}, 1},
		{"equal all round: the earliest", []claim{a1, b}, []claim{b, a1}, 0},
		{"fewest wins over arrival", append(times(3, b), times(1, c)...), []claim{b, b, c}, 2},
	} {
		if got := k.pick(use(tc.running...), tc.waiting); got != tc.want {
			t.Errorf("%s: pick = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Carrying pick out slot by slot: as the saturating organization's executions finish, the freed
// slots go to the organizations running fewer, though its own waiters came first, until the node is
// shared evenly.
func TestFreedSlotsEvenOutTheOrganizations(t *testing.T) {
	k := caps{node: 6, org: 4, tenant: 4}
	a := claim{tenant: "acme/a", org: "acme"}
	b := claim{tenant: "beta/b", org: "beta"}
	c := claim{tenant: "gamma/c", org: "gamma"}
	u := use(a, a, a, a, b, b) // full
	waiting := []claim{a, a, a, a, b, b, c, c}
	var order []string
	for range 4 {
		u.give(a) // one of acme's executions finishes
		i := k.pick(u, waiting)
		if i < 0 {
			t.Fatalf("no pick with %d running", u.running)
		}
		u.take(waiting[i])
		order = append(order, waiting[i].org)
		waiting = append(waiting[:i], waiting[i+1:]...)
	}
	if want := []string{"gamma", "gamma", "acme", "acme"}; !slices.Equal(order, want) {
		t.Errorf("freed slots went to %v, want %v", order, want)
	}
	if want := map[string]int{"acme": 2, "beta": 2, "gamma": 2}; !maps.Equal(u.orgs, want) {
		t.Errorf("running per organization = %v, want %v", u.orgs, want)
	}
}
