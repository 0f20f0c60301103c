package mcpgrain_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// Run with:
//
//	go test -run '^$' -bench UserToolVsGoSDK -benchtime 2000x -count 3 .
//
// BenchmarkUserToolVsGoSDK calls the same user tool (greet, the handler of
// ExampleMain and examples/hello) warm over Streamable HTTP with the go-sdk
// client on (a) a dev node run in the test process by mcpgrain.Run
// (--no-auth, --rate-limit 0: unlimited, SQLite in a temp dir) and (b) a plain go-sdk server with the
// same tool behind mcp.NewStreamableHTTPHandler. b.N is the number of calls
// per side; the sides alternate in rounds of benchRound calls (ABBA order)
// so that the machine's load drifts over both alike. It reports per side
// the p50 wall time per call and the process CPU time (getrusage: client
// and server) per call, and the mcpgrain/go-sdk ratios (issue 25's target:
// ≤ 1.1). ns/op is the time of one call on each side.

// benchRound is how many calls a side makes before the other's turn.
const benchRound = 100

// benchSide is one server under measurement and what its calls cost.
type benchSide struct {
	cs    *mcp.ClientSession
	walls []time.Duration
	cpu   time.Duration
}

// round makes n calls of greet and records their wall and CPU time.
func (s *benchSide) round(b *testing.B, n int) {
	args := map[string]any{"name": "bench"}
	cpu0 := cpuTime()
	for range n {
		t0 := time.Now()
		res, err := s.cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "greet", Arguments: args})
		s.walls = append(s.walls, time.Since(t0))
		if err != nil || res.IsError {
			b.Fatalf("greet: %v %+v", err, res)
		}
	}
	s.cpu += cpuTime() - cpu0
}

// p50 is the median of the recorded wall times.
func (s *benchSide) p50() time.Duration {
	w := slices.Clone(s.walls)
	slices.Sort(w)
	return w[len(w)/2]
}

// benchVersion is the protocol both clients ask for (a plain go-sdk
// server's latest; an mcpgrain node would otherwise negotiate 2026-07-28,
// whose standard-header checks cost its go-sdk server more per call).
const benchVersion = "2025-11-25"

// registerGreet adds the greet tool to a go-sdk server.
func registerGreet(s *mcp.Server) { mcp.AddTool(s, &mcp.Tool{Name: "greet"}, greet) }

// grainBenchSide connects to a dev node of greet run in the process.
func grainBenchSide(b *testing.B) *benchSide {
	return &benchSide{cs: connectBench(b, benchVersion, startDevBench(b, mcpgrain.Server{Name: "hello", Register: registerGreet}))}
}

// plainBenchSide connects to a plain go-sdk server of greet.
func plainBenchSide(b *testing.B) *benchSide { return plainSide(b, nil) }

// plainEventsBenchSide connects to a plain go-sdk server of greet that
// keeps its streams' events in go-sdk's memory event store, so its
// responses are resumable (a priming event, event ids) as a node's are.
func plainEventsBenchSide(b *testing.B) *benchSide {
	return plainSide(b, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
}

func plainSide(b *testing.B, opts *mcp.StreamableHTTPOptions) *benchSide {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hello"}, nil)
	registerGreet(srv)
	plain := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
	b.Cleanup(plain.Close)
	return &benchSide{cs: connectBench(b, benchVersion, plain.URL)}
}

// BenchmarkUserToolAlone runs one side of BenchmarkUserToolVsGoSDK alone
// (sub-benchmarks mcpgrain and gosdk; gosdk-events is the plain server
// with go-sdk's memory event store, resumable as the node is), so that a deterministic measure
// of one process's work — instructions under callgrind, runs of b.N and
// 2·b.N differenced — is that side's cost per call and nothing else's:
//
//	go test -c -o up.test .
//	GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind \
//	  ./up.test -test.run '^$' -test.bench 'UserToolAlone/mcpgrain' -test.benchtime 400x
func BenchmarkUserToolAlone(b *testing.B) {
	for _, side := range []struct {
		name  string
		start func(*testing.B) *benchSide
	}{{"mcpgrain", grainBenchSide}, {"gosdk", plainBenchSide}, {"gosdk-events", plainEventsBenchSide}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			s := side.start(b)
			s.round(b, 20) // warm: the session's first calls
			s.walls, s.cpu = nil, 0
			b.ResetTimer()
			s.round(b, b.N)
			b.StopTimer()
			b.ReportMetric(float64(s.p50().Microseconds()), "p50-µs")
			b.ReportMetric(float64(s.cpu.Microseconds())/float64(b.N), "cpu-µs/call")
		})
	}
}

func BenchmarkUserToolVsGoSDK(b *testing.B) {
	grain, sdk := grainBenchSide(b), plainBenchSide(b)
	for _, s := range []*benchSide{grain, sdk} { // warm both: the session's first calls
		s.round(b, 20)
		s.walls, s.cpu = nil, 0
	}
	b.ResetTimer()
	for done, i := 0, 0; done < b.N; i++ {
		n := min(benchRound, b.N-done)
		order := []*benchSide{grain, sdk}
		if i%2 == 1 {
			order[0], order[1] = sdk, grain
		}
		for _, s := range order {
			s.round(b, n)
		}
		done += n
	}
	b.StopTimer()
	g, p := float64(grain.p50().Microseconds()), float64(sdk.p50().Microseconds())
	gc, pc := float64(grain.cpu.Microseconds())/float64(b.N), float64(sdk.cpu.Microseconds())/float64(b.N)
	b.ReportMetric(g, "mcpgrain-p50-µs")
	b.ReportMetric(p, "gosdk-p50-µs")
	b.ReportMetric(g/p, "p50-ratio")
	b.ReportMetric(gc, "mcpgrain-cpu-µs/call")
	b.ReportMetric(pc, "gosdk-cpu-µs/call")
	b.ReportMetric(gc/pc, "cpu-ratio")
}

// connectBench connects a go-sdk client asking for protocol version to
// endpoint; it fails if the server negotiates another.
func connectBench(b *testing.B, version, endpoint string) *mcp.ClientSession {
	b.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
	cs, err := cl.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatalf("connect %s: %v", endpoint, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		b.Fatalf("%s negotiated protocol %s, not %s", endpoint, got, version)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// startDevBench runs a dev node of s in the process (mcpgrain.Run, as a
// user's program would) and returns its MCP endpoint once it serves.
func startDevBench(b *testing.B, s mcpgrain.Server) string {
	b.Helper()
	return runDev(b, s, io.Discard, "--rate-limit", "0")
}
