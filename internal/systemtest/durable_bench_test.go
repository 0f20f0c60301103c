package systemtest

import (
	"bufio"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// Memory a passivated session with a durable pause gives back: one node
// in the test process (SQLite), n sessions each paused on a write, heap
// after a GC while they are resident and again once every one passivated
// (docs/benchmarks.md):
//
//	go test ./internal/systemtest -run '^$' -bench DurablePausePassivation -benchtime 1x
func BenchmarkDurablePausePassivation(b *testing.B) {
	const n = 30 // below the default soft cap (32): none is cap-evicted while pausing
	info := startCodeNode(b, func(c *app.Config) {
		c.MCP.Policy = alarm.DefaultPolicy()
		c.MCP.Policy.SessionTimeout = time.Second
	})
	for b.Loop() {
		var ids []string
		for range n {
			cl := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
			cs, err := cl.Connect(b.Context(), &mcp.StreamableClientTransport{
				Endpoint: "http://" + info.HTTPAddr + "/mcp", DisableStandaloneSSE: true,
				HTTPClient: &http.Client{Transport: mcpclient.Bearer(aliceToken, http.DefaultTransport)},
			}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, pause(b, cs, "waiting_for_interaction"))
		}
		resident := nodeMetric(b, info.HTTPAddr, "mcpgrain_resident_runtimes{")
		held := heapAfterGC()
		deadline := time.Now().Add(60 * time.Second)
		for nodeMetric(b, info.HTTPAddr, "mcpgrain_resident_runtimes{") != 0 {
			if time.Now().After(deadline) {
				b.Fatal("sessions did not passivate")
			}
			time.Sleep(50 * time.Millisecond)
		}
		released := heapAfterGC()
		b.ReportMetric(resident, "resident-before")
		b.ReportMetric(float64(int64(held)-int64(released))/n/1024, "KiB-released/paused-session")
		if len(ids) != n {
			b.Fatal("pauses missing")
		}
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// nodeMetric sums the samples of a /metrics line prefix.
func nodeMetric(b *testing.B, addr, prefix string) float64 {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, prefix) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
