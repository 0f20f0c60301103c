package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// tools/call latency and throughput, side by side in one run:
//
//	(a) plain go-sdk StreamableHTTPHandler in this process (baseline)
//	(b) mcpgrain, one node in this process
//	(c) mcpgrain, 3 node processes, session owned by another node than the
//	    gateway the client talks to (needs Consul and Postgres: integration tier)
//	(d) mcpgrain, 3 node processes, --session-placement local (the default):
//	    the gateway the client talks to mints an id its node owns
//
//	go test ./gateway -run '^$' -bench ToolCall -benchtime 3000x
//
// Each reports p50/p99 of sequential calls and calls/s with 8 concurrent
// sessions; ratios against (a) go in docs/benchmarks.md.
//
// To keep the servers off the client's cores (docs/benchmarks.md, "The
// remote hop, pinned"): BENCH_NODE_CPUS runs the node processes of (c) and
// (d) under taskset -c with that list, and BENCH_PLAIN_URL makes (a) a
// plain server started elsewhere (mcpgrain bench --serve-baseline, pinned
// the same way); run the test binary itself under taskset too.

type target struct {
	endpoint string
	token    string
	// session, if set, connects a session the way the target needs it.
	session func(b *testing.B) *mcp.ClientSession
}

func plainTarget(b *testing.B) target {
	if u := os.Getenv("BENCH_PLAIN_URL"); u != "" {
		return target{endpoint: u}
	}
	srv, stop, err := toolpacks.NewServer(&mcp.Implementation{Name: "plain"}, []string{"demo"}, toolpacks.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(ts.Close)
	return target{endpoint: ts.URL}
}

func singleNodeTarget(b *testing.B) target {
	addr := startNode(b, func(c *app.Config) { c.MCP.RateLimit = 0 })
	return target{endpoint: "http://" + addr + "/mcp", token: aliceToken}
}

func localPlacementTarget(b *testing.B) target {
	c := testcluster.Start(b, testcluster.Options{Nodes: 3, SQLite: os.Getenv("BENCH_SQLITE") == "1", Wrap: pinNodes(),
		ExtraArgs: []string{"--rate-limit", "0", "--log-level", "warn", "--session-placement", "local"}})
	return target{endpoint: "http://" + c.Node(0).HTTP + "/mcp", token: testcluster.Token}
}

func clusterTarget(b *testing.B) target {
	c := testcluster.Start(b, testcluster.Options{Nodes: 3, SQLite: os.Getenv("BENCH_SQLITE") == "1", Wrap: pinNodes(),
		ExtraArgs: []string{"--rate-limit", "0", "--log-level", "warn", "--enable-pprof"}})
	if dir := os.Getenv("BENCH_PROFILE_DIR"); dir != "" {
		// Profile the gateway node and the owner node during the run.
		for _, i := range []int{0, 1} {
			go func() {
				time.Sleep(2 * time.Second)
				req, err := http.NewRequest(http.MethodGet, "http://"+c.Node(i).HTTP+"/debug/pprof/profile?seconds=5", nil)
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer "+testcluster.Token) // the profiler needs the admin role
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				f, _ := os.Create(fmt.Sprintf("%s/node%d.prof", dir, i))
				defer f.Close()
				_, _ = io.Copy(f, resp.Body)
			}()
		}
	}
	return target{endpoint: "http://" + c.Node(0).HTTP + "/mcp", token: testcluster.Token, session: func(b *testing.B) *mcp.ClientSession {
		return connectOwnedBy(b, c, 0, 1, nil)
	}}
}

// pinNodes is the node processes' command prefix: taskset -c
// $BENCH_NODE_CPUS when that is set.
func pinNodes() func(int) []string {
	cpus := os.Getenv("BENCH_NODE_CPUS")
	if cpus == "" {
		return nil
	}
	return func(int) []string { return []string{"taskset", "-c", cpus} }
}

func (tg target) connect(b *testing.B) *mcp.ClientSession {
	if tg.session != nil {
		return tg.session(b)
	}
	hc := &http.Client{}
	if tg.token != "" {
		hc.Transport = mcpclient.Bearer(tg.token, http.DefaultTransport)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: tg.endpoint, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(b *testing.B, cs *mcp.ClientSession) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}})
	if err != nil || res.IsError {
		b.Fatalf("echo: %+v %v", res, err)
	}
}

func benchTarget(b *testing.B, mk func(*testing.B) target) {
	tg := mk(b)
	b.Run("sequential", func(b *testing.B) {
		t0 := time.Now()
		cs := tg.connect(b)
		call(b, cs)
		firstCall := time.Since(t0)
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			s := time.Now()
			call(b, cs)
			lat = append(lat, time.Since(s))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(firstCall.Microseconds()), "init+first-call-µs")
	})
	b.Run("8-sessions", func(b *testing.B) {
		const n = 8
		sessions := make([]*mcp.ClientSession, n)
		for i := range sessions {
			sessions[i] = tg.connect(b)
		}
		var next sync.Mutex
		left := 0
		b.ResetTimer()
		t0 := time.Now()
		left = b.N
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					next.Lock()
					if left == 0 {
						next.Unlock()
						return
					}
					left--
					next.Unlock()
					call(b, sessions[i])
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "calls/s")
	})
}

func BenchmarkToolCall(b *testing.B) {
	b.Run("a-plain-go-sdk", func(b *testing.B) { benchTarget(b, plainTarget) })
	b.Run("b-mcpgrain-1-node", func(b *testing.B) { benchTarget(b, singleNodeTarget) })
	b.Run("c-mcpgrain-3-nodes-remote-session", func(b *testing.B) { benchTarget(b, clusterTarget) })
	b.Run("d-mcpgrain-3-nodes-local-placement", func(b *testing.B) { benchTarget(b, localPlacementTarget) })
}

// Memory per resident MCP session on one node: heap after opening 200
// sessions (each with its go-sdk server, handler and event log).
func BenchmarkResidentSessionMemory(b *testing.B) {
	tg := singleNodeTarget(b)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const n = 200
	warm := tg.connect(b) // first-use costs (pools, caches) out of the measurement
	call(b, warm)
	base := heap()
	for i := range n {
		cs := tg.connect(b)
		call(b, cs)
		_ = i
	}
	perSession := float64(int64(heap())-int64(base)) / n
	for b.Loop() {
	}
	b.ReportMetric(perSession, "B/resident-session")
	b.ReportMetric(0, "ns/op")
	_ = fmt.Sprint
}
