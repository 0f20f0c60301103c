package systemtest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// Code mode through the gateway, one node in this process, side by side:
//
//	echo      a plain tools/call (demo pack) — the baseline
//	read      execute: code that GETs the demo API (sandbox + one call of
//	          the demo API, in process: the node calls it with the owner)
//	approve   execute that pauses on a POST, the decision over the HTTP
//	          approval route, then the model's resume: three requests
//
//	go test ./internal/systemtest -run '^$' -bench CodeMode -benchtime 300x
func BenchmarkCodeMode(b *testing.B) {
	info := startCodeNode(b, func(c *app.Config) {
		c.MCP.RateLimit = 0
		c.MCP.Packs = []string{"code", "demo"}
	})
	cs := connectMode(b, info.HTTPAddr, aliceToken, "")
	run := func(b *testing.B, op func(b *testing.B)) {
		op(b) // warm up
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			s := time.Now()
			op(b)
			lat = append(lat, time.Since(s))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("echo", func(b *testing.B) {
		run(b, func(b *testing.B) {
			res, _ := callTool(b, cs, "echo", map[string]any{"text": "x"})
			if res.IsError {
				b.Fatal(mcpclient.Text(res))
			}
		})
	})
	b.Run("read", func(b *testing.B) {
		run(b, func(b *testing.B) {
			res, sc := callTool(b, cs, "execute", map[string]any{"code": `return (await tools.demo.listTodos({limit: 1})).length`})
			if res.IsError || sc["status"] != "completed" {
				b.Fatal(mcpclient.Text(res))
			}
		})
	})
	b.Run("pause-approve-resume", func(b *testing.B) {
		hc := &http.Client{}
		run(b, func(b *testing.B) {
			id := pause(b, cs, "waiting_for_interaction")
			req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://"+info.HTTPAddr+"/api/executions/"+id+"/resume", strings.NewReader(`{"action":"accept"}`))
			req.Header.Set("Authorization", "Bearer "+aliceToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("approve: %v %v", resp, err)
			}
			resp.Body.Close()
			res, sc := callTool(b, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
			if res.IsError || sc["status"] != "completed" {
				b.Fatal(mcpclient.Text(res))
			}
		})
	})
}
