package sandbox

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// gateHost blocks each tools.hold(name) call until gate name opens: an execution calling it runs
// (it holds a slot) without using the CPU.
type gateHost struct {
	entered chan string
	mu      sync.Mutex
	gates   map[string]chan struct{}
}

func newGateHost() *gateHost {
	return &gateHost{entered: make(chan string, 64), gates: map[string]chan struct{}{}}
}

func (h *gateHost) gate(name string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.gates[name]
	if !ok {
		g = make(chan struct{})
		h.gates[name] = g
	}
	return g
}

func (h *gateHost) open(name string) { close(h.gate(name)) }

func (h *gateHost) Call(ctx context.Context, _ string, args any) (any, error) {
	name := fmt.Sprint(args)
	g := h.gate(name)
	h.entered <- name
	select {
	case <-g:
		return "ok", nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fairPool is a pool whose SlotWait is timed by a fake clock, so a wait ends only when the test
// says, and whose waits are reported on a channel.
func fairPool(t *testing.T, opts PoolOptions) (*Pool, *clock.Fake, chan struct{}) {
	t.Helper()
	p, err := NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	clk := clock.NewFake(time.Unix(0, 0))
	p.clock = clk
	waits := make(chan struct{}, 64)
	p.onWait = func() { waits <- struct{}{} }
	return p, clk, waits
}

// holding starts a run of tenant (of org) that holds its slot until gate opens; its result goes to
// results.
func holding(t *testing.T, p *Pool, h *gateHost, org, tenant, gate string, results chan<- error) {
	go func() {
		res, err := p.Run(t.Context(), `return await tools.hold("`+gate+`")`, h, Limits{Tenant: tenant, Org: org})
		if err == nil && res.Value != "ok" {
			err = fmt.Errorf("value %v", res.Value)
		}
		results <- err
	}()
}

// Issue 23, finding 3: two users of one organization, each at their own cap, took every slot of the
// node, and every execution of another organization was refused as busy. Now the organization
// holds at most its share, the other organization's executions run at once, and the executions
// beyond the share wait for a slot (they run when one frees) instead of failing.
func TestOneOrganizationCannotTakeEverySlot(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p, _, waits := fairPool(t, PoolOptions{MaxRunning: 8, MaxRunningPerTenant: 4, Spares: -1, Registerer: reg})
	h := newGateHost()
	held := make(chan error, 8)
	for _, user := range []string{"a1", "a2"} {
		for range 4 {
			holding(t, p, h, "acme", "acme/"+user, "acme", held)
		}
	}
	for range 6 { // acme's share: 8 less a quarter
		<-h.entered
	}
	for range 2 {
		<-waits
	}
	if s := p.Stats(); s.Running != 6 || s.Waiting != 2 {
		t.Fatalf("stats with acme saturating = %+v, want 6 running and 2 waiting", s)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // generous: they should not wait
	defer cancel()
	for i := range 20 {
		res, err := p.Run(ctx, `return 1`, nil, Limits{Tenant: "beta/b", Org: "beta"})
		if err != nil || res.Value != 1.0 {
			t.Fatalf("beta's execution %d beside a saturating acme: %v %v", i, res.Value, err)
		}
	}
	h.open("acme")
	for range 8 {
		if err := <-held; err != nil {
			t.Fatalf("acme's execution: %v", err)
		}
	}
	if got := metricValue(t, p.m.waited.WithLabelValues(capOrg)); got != 2 {
		t.Errorf("waited{cap=org} = %v, want 2", got)
	}
	if got := metricValue(t, p.m.refused.WithLabelValues(capOrg)); got != 0 {
		t.Errorf("refused{cap=org} = %v, want 0", got)
	}
}

// When every slot is taken, a freed slot goes to the waiting organization that runs the fewest,
// though the saturating one's executions waited longer; a wait longer than SlotWait is refused as
// busy, naming the cap.
func TestFreedSlotGoesToTheOrganizationRunningFewest(t *testing.T) {
	t.Parallel()
	p, clk, waits := fairPool(t, PoolOptions{MaxRunning: 4, MaxRunningPerOrg: 3, MaxRunningPerTenant: 4, Spares: -1})
	h := newGateHost()
	held := make(chan error, 8)
	for i := range 3 {
		holding(t, p, h, "acme", "acme/a", fmt.Sprint("acme", i), held)
	}
	holding(t, p, h, "beta", "beta/b", "beta", held)
	for range 4 {
		<-h.entered
	}
	// The node is full and nobody finishes: another organization's execution is refused after
	// SlotWait, naming the node's cap.
	refused := make(chan error, 1)
	go func() {
		_, err := p.Run(t.Context(), `return 1`, nil, Limits{Tenant: "delta/d", Org: "delta"})
		refused <- err
	}()
	<-waits
	clk.Advance(DefaultSlotWait)
	wantBusy(t, <-refused, "this node is already running its maximum of 4")
	// acme's fourth waits (its organization's cap), then gamma's (the node's).
	holding(t, p, h, "acme", "acme/a", "acme-late", held)
	<-waits
	holding(t, p, h, "gamma", "gamma/c", "gamma", held)
	<-waits
	h.open("acme0")
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if got := <-h.entered; got != "gamma" {
		t.Fatalf("the freed slot went to %q, want gamma's waiting execution", got)
	}
	for _, g := range []string{"acme1", "acme2", "beta", "gamma"} {
		h.open(g)
	}
	if got := <-h.entered; got != "acme-late" {
		t.Fatalf("entered %q, want acme's late execution", got)
	}
	h.open("acme-late")
	for range 5 {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
	if s := p.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("stats after = %+v", s)
	}
}

// An execution that waits over its organization's cap is refused after SlotWait with the
// organization named; with SlotWait negative at once.
func TestOrganizationCapRefusesAfterTheWait(t *testing.T) {
	t.Parallel()
	for _, wait := range []time.Duration{0, -1} {
		p, clk, waits := fairPool(t, PoolOptions{MaxRunning: 4, MaxRunningPerOrg: 2, SlotWait: wait, Spares: -1})
		h := newGateHost()
		held := make(chan error, 2)
		holding(t, p, h, "acme", "acme/a1", "acme", held)
		holding(t, p, h, "acme", "acme/a2", "acme", held)
		<-h.entered
		<-h.entered
		refused := make(chan error, 1)
		go func() {
			_, err := p.Run(t.Context(), `return 1`, nil, Limits{Tenant: "acme/a3", Org: "acme"})
			refused <- err
		}()
		if wait == 0 {
			<-waits
			clk.Advance(DefaultSlotWait)
		}
		wantBusy(t, <-refused, "organization acme is already running its maximum of 2")
		h.open("acme")
		for range 2 {
			if err := <-held; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Work-conserving where the operator says so: with no per-organization cap (a node that serves one
// organization) one organization's users take every slot of the node.
func TestOneOrganizationMayUseTheWholeNodeWithoutAnOrgCap(t *testing.T) {
	t.Parallel()
	p, _, _ := fairPool(t, PoolOptions{MaxRunning: 8, MaxRunningPerOrg: -1, MaxRunningPerTenant: 4, Spares: -1})
	h := newGateHost()
	held := make(chan error, 8)
	for _, user := range []string{"a1", "a2"} {
		for range 4 {
			holding(t, p, h, "acme", "acme/"+user, "acme", held)
		}
	}
	for range 8 {
		<-h.entered
	}
	if s := p.Stats(); s.Running != 8 || s.Waiting != 0 {
		t.Fatalf("stats = %+v, want all 8 slots running", s)
	}
	h.open("acme")
	for range 8 {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
}
