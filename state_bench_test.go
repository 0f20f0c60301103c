package mcpgrain_test

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// Run with:
//
//	go test -run '^$' -bench 'ToolCall|StateUpdate' -benchtime 2000x .
//
// Each benchmark is a go-sdk client's tools/call to a real in-process node
// (the dev node: SQLite; the Postgres variants need
// MCPGRAIN_TEST_POSTGRES_URL) whose handler does nothing, or Updates a
// State to a changed 1 KiB value, or to the value it has (which writes
// nothing). cpu-µs/op is the process's CPU time (client, node and, for
// SQLite, the store) per call: the difference to the no-state call is
// what a save adds.

var benchBlob = mcpgrain.NewState[string]("bench-blob", mcpgrain.StateOptions[string]{})

type blobArgs struct {
	Fill string `json:"fill"`
}

// benchServer's tools: noop, and set (benchBlob := 1000 × args.Fill).
func benchServer() mcpgrain.Server {
	return mcpgrain.Server{Name: "bench", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "noop"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "set"}, func(ctx context.Context, _ *mcp.CallToolRequest, a blobArgs) (*mcp.CallToolResult, any, error) {
			if _, err := benchBlob.Update(ctx, func(v *string) error { *v = strings.Repeat(a.Fill, 1000); return nil }); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	}}
}

func benchSession(b *testing.B, postgres bool) *mcp.ClientSession {
	b.Helper()
	p, err := benchServer().Pack()
	if err != nil {
		b.Fatal(err)
	}
	info, _ := testcluster.StartLocal(b, func(c *app.Config) {
		c.MCP.ExtraPacks, c.MCP.Packs = []mcpgrain.Pack{p}, []string{"bench"}
		c.MCP.RateLimit, c.MCP.RateBurst = 1e9, 1e9
		if postgres {
			c.Store = testenv.Postgres(b)
		}
	})
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
	cs, err := cl.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: "http://" + info.HTTPAddr + "/mcp",
		HTTPClient: &http.Client{Transport: mcpclient.Bearer(testcluster.AliceToken, http.DefaultTransport)}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCalls calls tool with the arguments args(i) per iteration.
func benchCalls(b *testing.B, postgres bool, tool string, args func(i int) map[string]any) {
	cs := benchSession(b, postgres)
	call := func(i int) {
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: tool, Arguments: args(i)})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", tool, err, res)
		}
	}
	call(-1) // warm: the first save of a new value
	i, cpu0 := 0, cpuTime()
	for b.Loop() {
		call(i)
		i++
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

func noArgs(int) map[string]any { return nil }
func changed(i int) map[string]any {
	return map[string]any{"fill": string(rune('a' + (i+2)%2))} // alternates: every call changes the value
}
func unchanged(int) map[string]any { return map[string]any{"fill": "a"} }

func BenchmarkToolCallNoState(b *testing.B)            { benchCalls(b, false, "noop", noArgs) }
func BenchmarkStateUpdateChanged(b *testing.B)         { benchCalls(b, false, "set", changed) }
func BenchmarkStateUpdateUnchanged(b *testing.B)       { benchCalls(b, false, "set", unchanged) }
func BenchmarkToolCallNoStatePostgres(b *testing.B)    { benchCalls(b, true, "noop", noArgs) }
func BenchmarkStateUpdateChangedPostgres(b *testing.B) { benchCalls(b, true, "set", changed) }
func BenchmarkStateUpdateUnchangedPostgres(b *testing.B) {
	benchCalls(b, true, "set", unchanged)
}
