// Package bench is the load generator behind `mcpgrain bench`: it drives an
// MCP endpoint with the official go-sdk client and reports latency
// percentiles, throughput and errors per scenario.
//
// Scenarios:
//
//   - call: N sessions initialized up front; M workers issue tools/call
//     round trips (the demo pack's echo) round-robin over the sessions.
//   - churn: each request is a whole session life: initialize +
//     initialized, one echo call, DELETE.
//   - restore: like call, against a node whose residency soft cap is below
//     N, so the round robin keeps passivating sessions and restoring them
//     cold (a cap eviction, then a rebuild from the record). How many
//     restores happened is read from the node's /metrics.
//   - approve: code mode. execute pauses on a demo API write, the decision
//     goes through the HTTP approval route, and the model's resume returns
//     the result; one request is the whole cycle.
//
// With Options.Baseline the same scenario also runs against a plain go-sdk
// server in this process (mcp.NewServer with the same demo tools behind
// mcp.NewStreamableHTTPHandler; for approve, the same code-mode engine and
// tools behind a minimal approval route), and the report holds the
// mcpgrain/baseline ratios.
//
// Besides latency percentiles and throughput, each result has the CPU
// time this process used per request: on a shared machine, where other
// processes take the CPU and throughput with it, that cost is the steadier
// comparison.
//
// The pure parts — percentiles ([Summarize]), ratios ([Ratio]), the
// request budget ([Budget]), the round robin ([RoundRobin]) and the
// metrics scrape parser ([SumMetric]) — take their inputs as values and
// are table-tested; [Run] does the I/O.
//
// Usage:
//
//	reports, err := bench.Run(ctx, bench.Options{
//		Scenarios: []bench.Scenario{bench.Call}, Sessions: 50, Concurrency: 8,
//		Duration: 10 * time.Second, Baseline: true,
//	})
//	bench.WriteText(os.Stdout, reports)
package bench
