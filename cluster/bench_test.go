package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Baselines for later ratios (docs/benchmarks.md). Run with
//
//	go test ./cluster -run '^$' -bench . -benchtime 10000x
//
// Each reports p50/p99 besides ns/op. Two in-process nodes talk over real
// gRPC on loopback.

func benchNodes(b *testing.B, st store.Store, n int) []*cluster.Node {
	b.Helper()
	net := membership.NewNetwork()
	var nodes []*cluster.Node
	for range n {
		node, err := cluster.Start(context.Background(), cluster.Config{
			Kinds:      []grain.Kind{probe.Kind(probe.Options{})},
			Membership: net.Provider(),
			Store:      st,
			Logger:     testLogger(),
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = node.Stop(ctx)
		})
		nodes = append(nodes, node)
	}
	for _, node := range nodes {
		for len(node.View().Members) != n {
			time.Sleep(time.Millisecond)
		}
	}
	return nodes
}

func benchStore(b *testing.B) store.Store {
	b.Helper()
	s, err := store.Open(context.Background(), "sqlite:"+b.TempDir()+"/bench.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	slices.Sort(l)
	if len(l) == 0 {
		return
	}
	q := func(p float64) float64 { return float64(l[int(p*float64(len(l)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// identityOwnedBy returns an identity node owns.
func identityOwnedBy(node *cluster.Node, prefix string) string {
	for i := 0; ; i++ {
		id := fmt.Sprint(prefix, i)
		if o, _ := node.Owner(probe.KindName, id); o.ID == node.ID() {
			return id
		}
	}
}

func benchRequests(b *testing.B, caller *cluster.Node, id string) {
	ctx := context.Background()
	if _, err := caller.Request(ctx, probe.KindName, id, &pb.ProbeAdd{}); err != nil {
		b.Fatal(err) // activate outside the measurement
	}
	lat := make(latencies, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := caller.Request(ctx, probe.KindName, id, &pb.ProbeAdd{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	lat.report(b)
}

// Sequential read requests to an active grain on the calling node.
func BenchmarkRequestLocalGrain(b *testing.B) {
	nodes := benchNodes(b, benchStore(b), 2)
	benchRequests(b, nodes[0], identityOwnedBy(nodes[0], "local-"))
}

// Sequential read requests to an active grain on the other node (gRPC).
func BenchmarkRequestRemoteGrain(b *testing.B) {
	nodes := benchNodes(b, benchStore(b), 2)
	benchRequests(b, nodes[0], identityOwnedBy(nodes[1], "remote-"))
}

// Cold activation on the calling node: every request is for a new identity,
// so it takes ownership in the store and reads the record before replying.
func BenchmarkActivationColdSQLite(b *testing.B) {
	benchActivation(b, benchStore(b))
}

// The same against Postgres (needs MCPGRAIN_TEST_POSTGRES_URL).
func BenchmarkActivationColdPostgres(b *testing.B) {
	dsn := testenv.Postgres(b)
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	benchActivation(b, s)
}

func benchActivation(b *testing.B, st store.Store) {
	nodes := benchNodes(b, st, 1)
	ctx := context.Background()
	lat := make(latencies, 0, b.N)
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		t0 := time.Now()
		if _, err := nodes[0].Request(ctx, probe.KindName, fmt.Sprint("cold-", i), &pb.ProbeAdd{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	lat.report(b)
}

// Reminder throughput on one node: b.N reminders on 100 probe grains, all
// due at the same instant; measures how fast the node fires them (each
// delivery activates the grain if needed and saves its record) and their
// tardiness. Run with -benchtime 5000x.
func BenchmarkReminderBurstSQLite(b *testing.B) {
	benchReminderBurst(b, benchStore(b))
}

// The same against Postgres (needs MCPGRAIN_TEST_POSTGRES_URL).
func BenchmarkReminderBurstPostgres(b *testing.B) {
	s, err := store.Open(context.Background(), testenv.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	benchReminderBurst(b, s)
}

func benchReminderBurst(b *testing.B, st store.Store) {
	nodes := benchNodes(b, st, 1)
	ctx := context.Background()
	const grains = 100
	n := b.N
	due := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	for g := range grains {
		var rs []*pb.ProbeReminder
		for i := g; i < n; i += grains {
			rs = append(rs, &pb.ProbeReminder{Name: fmt.Sprint("r", i), DueAtMs: due.UnixMilli()})
		}
		if _, err := nodes[0].Request(ctx, probe.KindName, fmt.Sprint("burst-", g), &pb.ProbeRemind{Reminders: rs}); err != nil {
			b.Fatal(err)
		}
	}
	if time.Now().After(due) {
		b.Fatal("registration took longer than the lead time")
	}
	time.Sleep(time.Until(due))
	b.ResetTimer()
	var fired int
	for fired < n {
		fired = 0
		for g := range grains {
			o, err := st.Load(ctx, fmt.Sprint("probe/burst-", g))
			if err != nil {
				b.Fatal(err)
			}
			var rec pb.ProbeRecord
			_ = proto.Unmarshal(o.Record, &rec)
			fired += len(rec.GetFires())
		}
		if fired < n {
			time.Sleep(20 * time.Millisecond)
		}
	}
	elapsed := time.Since(due)
	b.StopTimer()
	var tardy latencies
	for g := range grains {
		o, _ := st.Load(ctx, fmt.Sprint("probe/burst-", g))
		var rec pb.ProbeRecord
		_ = proto.Unmarshal(o.Record, &rec)
		for _, f := range rec.GetFires() {
			tardy = append(tardy, time.Duration(f.GetReceivedAtMs()-f.GetDueAtMs())*time.Millisecond)
		}
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "fires/s")
	slices.Sort(tardy)
	b.ReportMetric(float64(tardy[len(tardy)/2].Milliseconds()), "tardy-p50-ms")
	b.ReportMetric(float64(tardy[len(tardy)*99/100].Milliseconds()), "tardy-p99-ms")
}
