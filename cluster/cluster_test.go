package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func testLogger() *slog.Logger {
	if os.Getenv("MCPGRAIN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "grains.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// ledger records probe activations so a test can check that activations of
// one identity never overlap (single activation) on a stable membership.
type ledger struct {
	mu       sync.Mutex
	live     map[string]string // identity -> node:epoch of the live activation
	overlaps []string
	count    atomic.Int64
}

func newLedger() *ledger { return &ledger{live: map[string]string{}} }

func (l *ledger) observe(e probe.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	who := fmt.Sprintf("%s@%d", e.Node, e.Epoch)
	if e.Activated {
		l.count.Add(1)
		if prev, ok := l.live[e.Identity]; ok {
			l.overlaps = append(l.overlaps, fmt.Sprintf("%s: %s activated while %s live", e.Identity, who, prev))
		}
		l.live[e.Identity] = who
		return
	}
	if l.live[e.Identity] == who {
		delete(l.live, e.Identity)
	}
}

type testCluster struct {
	net   *membership.Network
	store store.Store
	nodes []*cluster.Node
	regs  []*prometheus.Registry // each node's metrics, by index
}

// startCluster starts n in-process nodes sharing a memory membership
// network and one SQLite store.
//
// Under the race detector a test that needs several nodes in one process is
// skipped: protoactor's remote.Start writes grpc's global logger
// (grpclog.SetLoggerV2) while the previous node's gRPC goroutines read it,
// a library race we cannot fix from outside. The multi-node scenarios run
// race-checked in the multi-process tests instead (CI's race step sets
// MCPGRAIN_TEST_RACE=1, so internal/testcluster builds the node binary
// with -race and fails on any race a node reports), where each process has
// one remote: placement across nodes in multiprocess_test.go, the
// passivation race in TestPassivationRaceAcrossProcessesLosesNothing.
func startCluster(t *testing.T, n int, opts probe.Options) *testCluster {
	t.Helper()
	if raceDetector && n > 1 {
		t.Skip("several protoactor remotes in one process trip a race inside grpclog.SetLoggerV2; covered race-checked by the multi-process tests (MCPGRAIN_TEST_RACE=1)")
	}
	tc := &testCluster{net: membership.NewNetwork(), store: openStore(t)}
	for range n {
		tc.add(t, opts)
	}
	tc.awaitConverged(t)
	return tc
}

// Bounds of the in-process clusters' requests: generous, because they are not what these tests check
// and a loaded machine breaks tight ones. With the default 3 s attempt timeout, the first request
// through a new connection (a survivor after a graceful stop) timed out on a starved test process, and
// ProbeAdd, not idempotent, is not retried: the test failed with an unknown outcome.
const (
	attemptTimeout = 30 * time.Second
	requestTimeout = time.Minute
	slowRequest    = 3 * time.Second  // a request slower than this logs its figure
	conditionWait  = 30 * time.Second // how long a view or activation count may take to settle
)

func (tc *testCluster) add(t *testing.T, opts probe.Options) *cluster.Node {
	t.Helper()
	reg := prometheus.NewRegistry()
	node := startNode(t, cluster.Config{
		Kinds:          []grain.Kind{probe.Kind(opts)},
		Membership:     tc.net.Provider(),
		Store:          tc.store,
		Registerer:     reg,
		AttemptTimeout: attemptTimeout,
	})
	tc.nodes = append(tc.nodes, node)
	tc.regs = append(tc.regs, reg)
	return node
}

// startNode starts a node (with the test logger unless cfg has one) and
// stops it when t ends.
func startNode(t *testing.T, cfg cluster.Config) *cluster.Node {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	node, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = node.Stop(ctx)
	})
	return node
}

// awaitConverged waits until every node's view holds every member.
func (tc *testCluster) awaitConverged(t *testing.T) {
	t.Helper()
	want := len(tc.net.View().Members)
	deadline := time.Now().Add(conditionWait)
	for _, n := range tc.nodes {
		for len(n.View().Members) != want {
			if time.Now().After(deadline) {
				t.Fatalf("node %s sees %d members, want %d", n.ID(), len(n.View().Members), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func add(t *testing.T, n *cluster.Node, id string, delta int64) *pb.ProbeState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	began := time.Now()
	r, err := n.Request(ctx, probe.KindName, id, &pb.ProbeAdd{Delta: delta})
	if took := time.Since(began); took > slowRequest {
		t.Logf("probe %s via %s took %v", id, n.ID(), took.Round(time.Millisecond))
	}
	if err != nil {
		t.Fatalf("probe %s via %s: %v", id, n.ID(), err)
	}
	return r.(*pb.ProbeState)
}

func TestEveryIdentityIsActivatedOnItsRendezvousOwnerFromAnyNode(t *testing.T) {
	l := newLedger()
	tc := startCluster(t, 3, probe.Options{Observer: l.observe})
	for i := range 300 {
		id := fmt.Sprintf("id-%d", i)
		want, _ := tc.nodes[0].Owner(probe.KindName, id)
		for j, via := range tc.nodes {
			st := add(t, via, id, 1)
			if st.Node != want.ID {
				t.Fatalf("%s served by %s via %s, want owner %s", id, st.Node, via.ID(), want.ID)
			}
			if st.Count != int64(j+1) || st.Epoch != 1 {
				t.Fatalf("%s via %s: count %d epoch %d, want %d and 1", id, via.ID(), st.Count, st.Epoch, j+1)
			}
		}
	}
	if got := l.count.Load(); got != 300 {
		t.Fatalf("%d activations, want exactly one per identity (300)", got)
	}
	if len(l.overlaps) > 0 {
		t.Fatalf("overlapping activations: %v", l.overlaps)
	}
}

// The acceptance scenario for passivation races: requests keep arriving
// while grains passivate after 1 ms idle. No request may be lost, none may
// wait for a timeout, and activations of one identity never overlap.
func TestPassivationRaceLosesNothing(t *testing.T) {
	l := newLedger()
	nodes, requests := 3, int64(10000)
	if raceDetector {
		// One node (see startCluster); the race detector slows everything
		// about tenfold. Across nodes, race-checked:
		// TestPassivationRaceAcrossProcessesLosesNothing.
		nodes, requests = 1, 3000
	}
	// ProbeAdd is not idempotent, so a request dropped in the passivation
	// race and left to time out surfaces as a failed request (unknown
	// outcome), not as latency: the failure count below is the check. The
	// slowest request is logged, not asserted (2-core shared CI machines
	// stall for seconds; latency is measured in docs/benchmarks.md). Each
	// request may take requestTimeout: with 5 s, 79 of 10000 requests of a
	// starved test process ran out (unknown outcome) without being dropped.
	tc := startCluster(t, nodes, probe.Options{IdleTimeout: time.Millisecond, Observer: l.observe})
	const (
		identities = 100
		workers    = 32
	)
	var (
		next    atomic.Int64
		slowest atomic.Int64
		failed  atomic.Int64
		wg      sync.WaitGroup
		firstMu sync.Mutex
		first   error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			via := tc.nodes[w%len(tc.nodes)]
			for {
				i := next.Add(1) - 1
				if i >= requests {
					return
				}
				id := fmt.Sprintf("race-%d", i%identities)
				began := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
				_, err := via.Request(ctx, probe.KindName, id, &pb.ProbeAdd{Delta: 1})
				cancel()
				d := time.Since(began)
				for {
					cur := slowest.Load()
					if int64(d) <= cur || slowest.CompareAndSwap(cur, int64(d)) {
						break
					}
				}
				if err != nil {
					failed.Add(1)
					firstMu.Lock()
					if first == nil {
						first = err
					}
					firstMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed; first: %v", n, requests, first)
	}
	var total int64
	for i := range identities {
		total += add(t, tc.nodes[0], fmt.Sprintf("race-%d", i), 0).Count
	}
	if total != requests {
		t.Fatalf("durable counts sum to %d, want %d (lost or doubled writes)", total, requests)
	}
	if len(l.overlaps) > 0 {
		t.Fatalf("overlapping activations: %v", l.overlaps[:min(5, len(l.overlaps))])
	}
	if a := l.count.Load(); a <= identities {
		t.Fatalf("only %d activations: grains did not passivate, the race was not exercised", a)
	}
	t.Logf("%d requests, %d activations (passivations exercised), slowest %s", requests, l.count.Load(), time.Duration(slowest.Load()))
}

// Two nodes that disagree on membership both activate one identity. The
// older activation's next write is fenced: it is rejected, the activation
// stops, and the caller's retry lands on the current owner with the right
// state.
func TestStaleDuplicateActivationIsFenced(t *testing.T) {
	tc := startCluster(t, 2, probe.Options{})
	a, b := tc.nodes[0], tc.nodes[1]
	id := "dup"
	// Find an identity owned by a under the full view.
	for i := 0; ; i++ {
		id = fmt.Sprintf("dup-%d", i)
		if o, _ := a.Owner(probe.KindName, id); o.ID == a.ID() {
			break
		}
	}
	first := add(t, a, id, 5)
	if first.Node != a.ID() || first.Epoch != 1 {
		t.Fatalf("first activation %+v, want on %s epoch 1", first, a.ID())
	}
	// b believes it is alone, so it activates its own duplicate (epoch 2).
	onlyB := membership.NewView(b.Self())
	tc.net.SetView(b.ID(), onlyB)
	waitView(t, b, onlyB)
	dup := add(t, b, id, 1)
	if dup.Node != b.ID() || dup.Epoch != 2 || dup.Count != 6 {
		t.Fatalf("duplicate activation %+v, want on %s epoch 2 count 6 (restored from store)", dup, b.ID())
	}
	// a's activation is now stale. Its write must be rejected; the retry
	// re-activates on a (epoch 3) from the durable state written by b.
	st := add(t, a, id, 1)
	if st.Node != a.ID() || st.Epoch != 3 || st.Count != 7 {
		t.Fatalf("after fencing: %+v, want on %s epoch 3 count 7", st, a.ID())
	}
	rec, err := tc.store.Load(context.Background(), "probe/"+id)
	if err != nil || rec.Epoch != 3 {
		t.Fatalf("store row %+v %v, want epoch 3", rec, err)
	}
	// And b's duplicate is fenced the same way when it writes again.
	if _, err := b.Request(context.Background(), probe.KindName, id, &pb.ProbeAdd{Delta: 1}); err != nil {
		t.Fatalf("b retry: %v", err)
	}
	if rec, _ := tc.store.Load(context.Background(), "probe/"+id); rec.Epoch != 4 {
		t.Fatalf("b's retry should have re-activated at epoch 4, store says %d", rec.Epoch)
	}
	// Each node had one write fenced.
	for i, reg := range tc.regs {
		if v := metricSum(t, reg, "mcpgrain_grain_fenced_writes_total", probe.KindName); v != 1 {
			t.Errorf("%s: mcpgrain_grain_fenced_writes_total %v, want 1", tc.nodes[i].ID(), v)
		}
	}
}

func waitView(t *testing.T, n *cluster.Node, v membership.View) {
	t.Helper()
	deadline := time.Now().Add(conditionWait)
	for !n.View().Equal(v) {
		if time.Now().After(deadline) {
			t.Fatalf("node %s never saw view %v", n.ID(), v)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitActive(t *testing.T, n *cluster.Node, want int) {
	t.Helper()
	deadline := time.Now().Add(conditionWait)
	for {
		st, err := n.Activations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Active)+len(st.Stopping) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s has %d active, %d stopping; want %d in all", n.ID(), len(st.Active), len(st.Stopping), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSuspectDropsEveryActivation(t *testing.T) {
	tc := startCluster(t, 1, probe.Options{})
	n := tc.nodes[0]
	for i := range 10 {
		add(t, n, fmt.Sprint("s", i), 1)
	}
	waitActive(t, n, 10)
	tc.net.Suspect(n.ID())
	waitActive(t, n, 0)
	// The grains come back on the next request, restored.
	if st := add(t, n, "s3", 1); st.Count != 2 || st.Epoch != 2 {
		t.Fatalf("after suspect: %+v, want count 2 at epoch 2", st)
	}
}

func TestGracefulStopHandsGrainsToSurvivors(t *testing.T) {
	tc := startCluster(t, 3, probe.Options{})
	leaving := tc.nodes[2]
	var owned []string
	for i := 0; len(owned) < 20; i++ {
		id := fmt.Sprint("g", i)
		if o, _ := leaving.Owner(probe.KindName, id); o.ID == leaving.ID() {
			owned = append(owned, id)
			add(t, tc.nodes[0], id, 10)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	began := time.Now()
	if err := leaving.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("graceful stop with %d grains took %v", len(owned), time.Since(began).Round(time.Millisecond))
	for _, id := range owned {
		rec, err := tc.store.Load(context.Background(), "probe/"+id)
		if err != nil || rec.Owner != "" {
			t.Fatalf("%s after graceful stop: %+v %v, want ownership released", id, rec, err)
		}
		st := add(t, tc.nodes[0], id, 1)
		if st.Node == leaving.ID() || st.Count != 11 || st.Epoch != 2 {
			t.Fatalf("%s after graceful stop: %+v, want served by a survivor, count 11, epoch 2", id, st)
		}
	}
}

func TestRequestErrors(t *testing.T) {
	tc := startCluster(t, 2, probe.Options{})
	n := tc.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := n.Request(ctx, "no-such-kind", "x", &pb.ProbeAdd{})
	var ge *grain.Error
	if !errors.As(err, &ge) || ge.Code != pb.GrainError_CODE_UNKNOWN_KIND {
		t.Fatalf("unknown kind: %v, want UNKNOWN_KIND", err)
	}
	// A Deadline option ends the retries as a context deadline does: here
	// the context has none, and the node's RequestTimeout (10 s) would
	// otherwise bound them.
	began := time.Now()
	_, err = n.Request(context.Background(), "no-such-kind", "x", &pb.ProbeAdd{}, cluster.Deadline(began.Add(200*time.Millisecond)))
	if !errors.As(err, &ge) || ge.Code != pb.GrainError_CODE_UNKNOWN_KIND {
		t.Fatalf("unknown kind with a deadline option: %v, want UNKNOWN_KIND", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("a request with a 200 ms deadline option retried for %v", took)
	} else {
		t.Logf("a request with a 200 ms deadline option gave up after %v", took)
	}
	// A request type the grain does not handle is rejected, not retried,
	// both locally and across nodes.
	for _, via := range tc.nodes {
		_, err = via.Request(context.Background(), probe.KindName, "x", &pb.ProbeState{})
		if !errors.As(err, &ge) || ge.Code != pb.GrainError_CODE_REJECTED || ge.Retryable() {
			t.Fatalf("unsupported request via %s: %v, want non-retryable REJECTED", via.ID(), err)
		}
	}
}
