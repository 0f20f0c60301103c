package consul

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// recorder collects the events a provider delivers and lets a test await
// one with a deadline.
type recorder struct {
	mu      sync.Mutex
	events  []membership.Event
	changed chan struct{} // closed and replaced on every event
	calls   atomic.Int32  // notify calls in progress, to catch overlaps
	overlap atomic.Bool
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) notify(e membership.Event) {
	if r.calls.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.calls.Add(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) snapshot() ([]membership.Event, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]membership.Event(nil), r.events...), r.changed
}

// lastView returns the newest view delivered.
func lastView(events []membership.Event) (membership.View, bool) {
	for i := len(events) - 1; i >= 0; i-- {
		if !events[i].Suspect {
			return events[i].View, true
		}
	}
	return membership.View{}, false
}

func suspects(events []membership.Event) int {
	n := 0
	for _, e := range events {
		if e.Suspect {
			n++
		}
	}
	return n
}

// await waits until cond holds on the delivered events, failing t after
// timeout. It returns the events that satisfied cond.
func (r *recorder) await(t *testing.T, timeout time.Duration, what string, cond func([]membership.Event) bool) []membership.Event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		events, changed := r.snapshot()
		if cond(events) {
			return events
		}
		select {
		case <-changed:
		case <-deadline.C:
			v, _ := lastView(events)
			t.Fatalf("timed out after %s waiting for %s; %d events, last view %v", timeout, what, len(events), ids(v))
		}
	}
}

// awaitView waits until the newest view equals want.
func (r *recorder) awaitView(t *testing.T, timeout time.Duration, want membership.View) []membership.Event {
	t.Helper()
	return r.await(t, timeout, fmt.Sprintf("view %v", ids(want)), func(ev []membership.Event) bool {
		v, ok := lastView(ev)
		return ok && v.Equal(want)
	})
}

func ids(v membership.View) []string {
	out := make([]string, len(v.Members))
	for i, m := range v.Members {
		out[i] = m.ID
	}
	return out
}

func testMember(i int) membership.Member {
	return membership.Member{
		ID:      fmt.Sprintf("node-%d", i),
		Address: fmt.Sprintf("127.0.0.1:%d", 17000+i),
		Kinds:   []string{"tool", "mcp"}, // deliberately unsorted: order must survive
		Meta:    map[string]string{"http": fmt.Sprintf("127.0.0.1:%d", 18000+i), "zone": "z-1"},
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newTestProvider makes a provider for the agent at addr; mod may adjust
// the config. The provider is stopped when t ends.
func newTestProvider(t *testing.T, addr, cluster string, mod func(*Config)) *Provider {
	t.Helper()
	cfg := Config{Address: addr, ClusterName: cluster, TTL: time.Second, WatchWait: 5 * time.Second, Logger: testLogger(t)}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	return p
}

func start(t *testing.T, p *Provider, m membership.Member) *recorder {
	t.Helper()
	r := newRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx, m, r.notify); err != nil {
		t.Fatalf("Start(%s): %v", m.ID, err)
	}
	return r
}

// kill simulates the process dying (SIGKILL): the goroutines stop, nothing
// is deregistered, the registration is left to expire.
func (p *Provider) kill() {
	p.cancel()
	p.wg.Wait()
}

type cluster struct {
	agent   *testenv.ConsulAgent
	name    string
	members []membership.Member
	provs   []*Provider
	recs    []*recorder
}

func startCluster(t *testing.T, n int, mod func(*Config)) *cluster {
	t.Helper()
	c := &cluster{agent: testenv.StartConsul(t), name: "mcpgrain-" + testenv.RandomSuffix(4)}
	for i := range n {
		m := testMember(i + 1)
		p := newTestProvider(t, c.agent.Addr(), c.name, mod)
		c.members = append(c.members, m)
		c.provs = append(c.provs, p)
		c.recs = append(c.recs, start(t, p, m))
	}
	return c
}

func (c *cluster) awaitAll(t *testing.T, timeout time.Duration, want membership.View, recs ...int) {
	t.Helper()
	if len(recs) == 0 {
		for i := range c.recs {
			recs = append(recs, i)
		}
	}
	for _, i := range recs {
		c.recs[i].awaitView(t, timeout, want)
	}
}

func catalogIDs(t *testing.T, addr, service string, passingOnly bool) []string {
	t.Helper()
	client, err := api.NewClient(&api.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	entries, _, err := client.Health().Service(service, "", passingOnly, nil)
	if err != nil {
		t.Fatalf("health query: %v", err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Service.ID)
	}
	return out
}

func TestThreeMembersConverge(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	want := membership.NewView(c.members...)
	c.awaitAll(t, 10*time.Second, want)
	for i, r := range c.recs {
		events, _ := r.snapshot()
		v, _ := lastView(events)
		// Exact fields, not only View.Equal: nil vs empty, kind order.
		if !reflect.DeepEqual(v.Members, want.Members) {
			t.Errorf("member %d view = %+v\nwant %+v", i, v.Members, want.Members)
		}
		if !events[0].Suspect && !events[0].View.Contains(c.members[i].ID) {
			t.Errorf("member %d: first event does not contain self: %v", i, ids(events[0].View))
		}
		for j := 1; j < len(events); j++ {
			if events[j].View.Equal(events[j-1].View) {
				t.Errorf("member %d: event %d repeats an unchanged view", i, j)
			}
		}
		if suspects(events) != 0 || r.overlap.Load() {
			t.Errorf("member %d: suspects %d, overlapping notify %v", i, suspects(events), r.overlap.Load())
		}
	}
}

func TestStopDeregisters(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	c.awaitAll(t, 10*time.Second, membership.NewView(c.members...))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.provs[2].Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.provs[2].Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	c.awaitAll(t, 5*time.Second, membership.NewView(c.members[:2]...), 0, 1)
	if got := catalogIDs(t, c.agent.Addr(), c.name, false); len(got) != 2 || strings.Contains(strings.Join(got, ","), c.members[2].ID) {
		t.Fatalf("catalog after Stop (any health) = %v; want only the two running members", got)
	}
	if err := c.provs[2].Start(ctx, c.members[2], func(membership.Event) {}); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}

func TestStopWithoutStart(t *testing.T) {
	p, err := New(Config{ClusterName: "c", Address: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestKilledMemberDisappears(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	c := startCluster(t, 3, func(c *Config) { c.TTL = ttl })
	c.awaitAll(t, 10*time.Second, membership.NewView(c.members...))
	killed := time.Now()
	c.provs[2].kill()
	// The bound is the TTL plus slack for two loaded cores that also run
	// this package's other parallel Consul tests (a 1 s slack flaked there);
	// failure detection that waited for Consul's garbage collection
	// (DeregisterCriticalAfter, a minute) would still fail it by far.
	const bound = ttl + 3*time.Second
	c.awaitAll(t, bound+2*time.Second, membership.NewView(c.members[:2]...), 0, 1)
	took := time.Since(killed)
	t.Logf("killed member disappeared from the others' views after %s (TTL %s)", took.Round(time.Millisecond), ttl)
	if took > bound {
		t.Errorf("killed member took %s to disappear; want within %s (TTL %s)", took, bound, ttl)
	}
	for i := range 2 {
		if ev, _ := c.recs[i].snapshot(); suspects(ev) != 0 {
			t.Errorf("survivor %d got a Suspect event", i)
		}
	}
	// Still registered (critical) until DeregisterCriticalAfter: that is
	// Consul's garbage collection, not our failure detection.
	if got := catalogIDs(t, c.agent.Addr(), c.name, true); len(got) != 2 {
		t.Errorf("passing instances = %v; want 2", got)
	}
}

func TestAgentRestart(t *testing.T) {
	t.Parallel()
	// TTL 2 s, hold-down 4 s: members re-register within a refresh interval
	// or two of the agent coming back.
	c := startCluster(t, 3, func(c *Config) { c.TTL = 2 * time.Second })
	all := membership.NewView(c.members...)
	c.awaitAll(t, 10*time.Second, all)
	before := make([]int, len(c.recs))
	for i, r := range c.recs {
		ev, _ := r.snapshot()
		before[i] = len(ev)
	}

	restarted := time.Now()
	c.agent.Restart(t)
	t.Logf("agent restarted in %s", time.Since(restarted).Round(time.Millisecond))

	// Every member re-registers on its own: wait until Consul itself lists
	// all three as passing (polling: there is no event to await).
	deadline := time.Now().Add(10 * time.Second)
	for len(catalogIDs(t, c.agent.Addr(), c.name, true)) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("members did not re-register after the agent restart: %v", catalogIDs(t, c.agent.Addr(), c.name, true))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("all members re-registered %s after the restart began", time.Since(restarted).Round(time.Millisecond))
	c.awaitAll(t, 10*time.Second, all)

	// No view published during the restart window dropped anyone.
	for i, r := range c.recs {
		ev, _ := r.snapshot()
		for _, e := range ev[before[i]:] {
			if !e.Suspect && !e.View.Equal(all) {
				t.Errorf("member %d published %v during the restart window", i, ids(e.View))
			}
		}
	}

	// And the cluster still works afterwards: a stop is still seen.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.provs[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	c.awaitAll(t, 10*time.Second, membership.NewView(c.members[1:]...), 1, 2)
}

// TestAgentDownLongerThanTTL stops the agent for longer than the lease: the
// member must keep its last view (an unreachable agent says nothing about
// the members), report Suspect once the lease has lapsed, and re-register
// when the agent is back.
func TestAgentDownLongerThanTTL(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	c := startCluster(t, 2, func(c *Config) { c.TTL = ttl })
	both := membership.NewView(c.members...)
	c.awaitAll(t, 10*time.Second, both)
	before := make([]int, len(c.recs))
	for i, r := range c.recs {
		ev, _ := r.snapshot()
		before[i] = len(ev)
	}

	c.agent.Stop()
	stopped := time.Now()
	for _, r := range c.recs {
		r.await(t, 3*ttl, "Suspect while the agent is down", func(ev []membership.Event) bool { return suspects(ev) == 1 })
	}
	t.Logf("Suspect delivered %s after the agent stopped (TTL %s)", time.Since(stopped).Round(time.Millisecond), ttl)
	for i, r := range c.recs {
		if ev, _ := r.snapshot(); len(ev) != before[i]+1 {
			t.Fatalf("member %d: events while the agent was down: %+v; want only the Suspect", i, ev[before[i]:])
		}
	}

	c.agent.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for len(catalogIDs(t, c.agent.Addr(), c.name, true)) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("members did not re-register after the agent came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.awaitAll(t, 10*time.Second, both)
	for i, r := range c.recs {
		ev, _ := r.snapshot()
		for _, e := range ev[before[i]:] {
			if !e.Suspect && !e.View.Equal(both) {
				t.Errorf("member %d published %v after the agent stopped", i, ids(e.View))
			}
		}
		if suspects(ev) != 1 {
			t.Errorf("member %d: %d Suspect events; want 1 (once per lapse)", i, suspects(ev))
		}
	}
}

func TestStartUnreachable(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) // nothing listens
	p := newTestProvider(t, addr, "c", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err := p.Start(ctx, testMember(1), func(membership.Event) { t.Error("event delivered after failed Start") })
	took := time.Since(begin)
	if err == nil {
		t.Fatal("Start succeeded without an agent")
	}
	t.Logf("Start error after %s: %v", took.Round(time.Millisecond), err)
	// Slack for two loaded cores running the other parallel tests: the
	// check is that Start gives up at its deadline instead of retrying on.
	if took > 5*time.Second {
		t.Errorf("Start took %s with a 1.5 s deadline", took)
	}
	for _, s := range []string{"cannot reach consul agent at " + addr, "node-1", "connection refused", "is the agent running"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after failed Start: %v", err)
	}
}

func TestStartRejectsBadMember(t *testing.T) {
	p := newTestProvider(t, "127.0.0.1:1", "c", nil)
	err := p.Start(context.Background(), membership.Member{ID: "a", Address: "nohost"}, func(membership.Event) {})
	if err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("Start with a bad address: %v", err)
	}
}

// TestSuspectOnClockJump injects a clock that jumps 2×TTL ahead at the start
// of a refresher iteration. To the refresher that is exactly what a process
// frozen by SIGSTOP sees when it resumes: far more than TTL has passed since
// its last successful pass. (The jump is made inside the iteration hook: a
// jump landing between the lapse check and the pass would be a clock
// anomaly, not a freeze.)
func TestSuspectOnClockJump(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	var skew atomic.Int64
	iterations := make(chan struct{}, 100)
	agent := testenv.StartConsul(t)
	p := newTestProvider(t, agent.Addr(), "c-"+testenv.RandomSuffix(4), func(c *Config) {
		c.TTL = ttl
		c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	var jump atomic.Bool
	p.beforeRefresh = func(context.Context) {
		if jump.CompareAndSwap(true, false) {
			skew.Add(int64(2 * ttl))
		}
		select {
		case iterations <- struct{}{}:
		default:
		}
	}
	self := testMember(1)
	r := start(t, p, self)
	r.awaitView(t, 10*time.Second, membership.NewView(self))
	awaitIterations := func(n int) {
		t.Helper()
		timeout := time.After(time.Duration(n+2) * ttl)
		for range n {
			select {
			case <-iterations:
			case <-timeout:
				t.Fatalf("refresher did not run %d times", n)
			}
		}
	}

	awaitIterations(5) // normal operation: five passes, no suspicion
	if ev, _ := r.snapshot(); suspects(ev) != 0 {
		t.Fatalf("Suspect in normal operation: %+v", ev)
	}

	jump.Store(true)
	r.await(t, 3*ttl, "a Suspect event", func(ev []membership.Event) bool { return suspects(ev) == 1 })
	awaitIterations(4) // once per lapse: later passes succeed, no more Suspect
	if ev, _ := r.snapshot(); suspects(ev) != 1 {
		t.Fatalf("suspects = %d after the lapse; want exactly 1", suspects(ev))
	}
}

// TestSuspectAfterFreeze holds the refresher of member 1 still for 3×TTL,
// as SIGSTOP would (its watcher keeps running, which a real SIGSTOP would
// also freeze; that does not matter here). Consul expires its check, the
// other member drops it; when it resumes it reports Suspect, passes the
// check again and the other member sees it back.
func TestSuspectAfterFreeze(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	agent := testenv.StartConsul(t)
	name := "c-" + testenv.RandomSuffix(4)
	var frozen atomic.Bool
	resume := make(chan struct{})
	p1 := newTestProvider(t, agent.Addr(), name, func(c *Config) { c.TTL = ttl })
	p1.beforeRefresh = func(ctx context.Context) {
		if frozen.Load() {
			select {
			case <-resume:
			case <-ctx.Done():
			}
		}
	}
	p2 := newTestProvider(t, agent.Addr(), name, func(c *Config) { c.TTL = ttl })
	m1, m2 := testMember(1), testMember(2)
	r1 := start(t, p1, m1)
	r2 := start(t, p2, m2)
	both := membership.NewView(m1, m2)
	r1.awaitView(t, 10*time.Second, both)
	r2.awaitView(t, 10*time.Second, both)

	frozen.Store(true)
	r2.awaitView(t, 3*ttl, membership.NewView(m2))
	if ev, _ := r1.snapshot(); suspects(ev) != 0 {
		t.Fatal("Suspect delivered while frozen")
	}
	frozen.Store(false)
	close(resume)
	r1.await(t, 3*ttl, "Suspect after resume", func(ev []membership.Event) bool { return suspects(ev) == 1 })
	r2.awaitView(t, 5*time.Second, both)
	if ev, _ := r2.snapshot(); suspects(ev) != 0 {
		t.Fatal("the member that was not frozen got a Suspect event")
	}
}
