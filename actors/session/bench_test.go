package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// Run with:
//
//	go test ./actors/session -run '^$' -bench . -benchtime 2000x
//
// The Postgres variants need MCPGRAIN_TEST_POSTGRES_URL.

func benchEnv(b *testing.B, dsn string) *env {
	b.Helper()
	e := &env{builds: map[string][]*fakeRuntime{}, fail: map[string]bool{}, gate: map[string]chan struct{}{}, reg: prometheus.NewRegistry()}
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	e.st = st
	return e
}

func startBenchNode(b *testing.B, dsn string) *env {
	b.Helper()
	e := benchEnv(b, dsn)
	var err error
	e.host, err = newBenchHost(e)
	if err != nil {
		b.Fatal(err)
	}
	e.node, err = cluster.Start(context.Background(), cluster.Config{
		Kinds: []grain.Kind{e.host.Kind()}, Store: e.st, Logger: logger(), Registerer: e.reg,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.node.Stop(ctx)
	})
	return e
}

func request(b *testing.B, e *env, id string, m any) any {
	ctx := context.Background()
	var (
		r   any
		err error
	)
	switch m := m.(type) {
	case *pb.SessionCreate:
		r, err = e.node.Request(ctx, "session", id, m)
	case *pb.SessionAccess:
		r, err = e.node.Request(ctx, "session", id, m)
	case *pb.RequestCapEviction:
		r, err = e.node.Request(ctx, "session", id, m)
	}
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// Passivate → restore: each iteration evicts the session (runtime disposed,
// grain passivated, record kept) and then measures the next request, which
// re-activates the grain (takes ownership, reads the record) and rebuilds
// the runtime.
func benchRestore(b *testing.B, dsn string) {
	e := startBenchNode(b, dsn)
	request(b, e, "r", &pb.SessionCreate{Principal: alice})
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		if !request(b, e, "r", &pb.RequestCapEviction{}).(*pb.CapEvictionReply).GetEvicted() {
			b.Fatal("not evicted")
		}
		b.StartTimer()
		t0 := time.Now()
		if !request(b, e, "r", &pb.SessionAccess{Principal: alice}).(*pb.SessionReply).GetRestored() {
			b.Fatal("not restored")
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkPassivateRestoreSQLite(b *testing.B) {
	benchRestore(b, "sqlite:"+filepath.Join(b.TempDir(), "s.db"))
}

func BenchmarkPassivateRestorePostgres(b *testing.B) {
	benchRestore(b, testenv.Postgres(b))
}

// Memory per resident session (fake runtime: the session's own overhead)
// and per passivated session, plus the store bytes a passivated session
// keeps.
func BenchmarkSessionFootprint(b *testing.B) {
	const n = 2000
	if os.Getenv("MCPGRAIN_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 64
	}
	e := startBenchNode(b, "sqlite:"+filepath.Join(b.TempDir(), "s.db"))
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// Measured once, whatever b.N is. Several rounds of n sessions: the last
	// round's growth after passivation is what a passivated session really
	// keeps. Earlier rounds also grow maps to their peak size, which Go
	// does not shrink; notably protoactor's process registry is 32,768 Go
	// maps that each allocate their first bucket only when an actor or
	// future id first hashes to them (about 10 MB, once per process).
	cycle := func(round int) (resident, passivated uint64) {
		for i := range n {
			request(b, e, fmt.Sprint("f", round, "-", i), &pb.SessionCreate{Principal: alice})
		}
		resident = heap()
		for i := range n {
			request(b, e, fmt.Sprint("f", round, "-", i), &pb.RequestCapEviction{})
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, _ := e.node.Activations(context.Background())
			if len(st.Active)+len(st.Stopping) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		e.mu.Lock()
		clear(e.builds) // the fake runtimes the test keeps for inspection
		e.mu.Unlock()
		return resident, heap()
	}
	base := heap()
	resident1, _ := cycle(1)
	var passivated1, passivated2 uint64
	for round := 2; round <= 6; round++ {
		passivated1 = passivated2
		_, passivated2 = cycle(round)
		if f := os.Getenv("MCPGRAIN_HEAP_PROFILE"); f != "" && round >= 5 {
			out, _ := os.Create(fmt.Sprint(f, round))
			_ = pprof.WriteHeapProfile(out)
			_ = out.Close()
		}
	}
	var bytes int
	for i := range n {
		g := "session/" + fmt.Sprint("f1-", i)
		o, _ := e.st.Load(context.Background(), g)
		rs, _ := e.st.Reminders(context.Background(), g)
		bytes += len(o.Record) + len(o.Grain) + len(o.Owner) + 16
		for _, r := range rs {
			bytes += len(r.Grain) + len(r.Name) + 24
		}
	}
	for b.Loop() {
	}
	b.ReportMetric(float64(int64(resident1)-int64(base))/n, "B/resident-session")
	b.ReportMetric(float64(int64(passivated2)-int64(passivated1))/n, "B/passivated-session")
	b.ReportMetric(float64(bytes)/n, "store-B/session")
}

// The tracing cost of a session's lifecycle in one run: a cap eviction
// and a restore (the spans McpSessionDO.requestCapEviction,
// mcp.session.idle_runtime_dispose and McpSessionDO.init with their
// residency attributes), tracing off and on at sampling 1.0 (batched to
// an exporter that drops them). Fake runtime, SQLite store.
//
//	go test ./actors/session -run '^$' -bench LifecycleTracing -benchtime 2000x -benchmem
func BenchmarkLifecycleTracing(b *testing.B) {
	run := func(b *testing.B) { benchRestore(b, "sqlite:"+filepath.Join(b.TempDir(), "s.db")) }
	b.Run("off", run)
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		uninstall := tracing.Install(tp)
		b.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
		run(b)
	})
}
