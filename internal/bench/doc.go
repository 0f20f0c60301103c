// Package bench is the load generator behind `mcpgrain bench`: it drives an
// MCP endpoint with the official go-sdk client (the scale scenario with a
// minimal raw HTTP client) and reports latency percentiles, throughput and
// errors per scenario.
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
//   - scale (only when named; "all" leaves it out): sizing a cluster.
//     ScaleOptions.Sessions sessions (100,000 by default) are created
//     over raw Streamable HTTP — plain net/http POSTs of initialize and
//     notifications/initialized, no go-sdk client, so the client costs
//     little per session — round robin over one or several URLs. Then
//     sessions are revisited (echo or ping) through random URLs, picked
//     uniformly or by a seeded Zipf distribution (a few hot sessions, a
//     long cold tail; [DistZipf]), and each answer is warm or cold by its
//     Mcpgrain-Restored header ([Restored]). Each node's /metrics
//     (memory, residency, counters) and optionally the store (bytes per
//     session, reminder backlog) are sampled before creation, after it
//     and after the revisits, and the nodes' RSS and resident runtimes
//     periodically meanwhile ([ScaleReport]).
//   - overload (only when named; "all" leaves it out): overload
//     shedding. Sessions are created over raw Streamable HTTP; the
//     closed-loop capacity is measured first (Options.Concurrency workers
//     calling echo back to back for Options.Duration), then echo calls
//     arrive open-loop — each sent at its time whatever the answers
//     before it — at [OverloadMultiples] of that capacity, Options.Duration
//     each. Per load: offered, served and shed ([Classify]: 503 or 429
//     with Retry-After) rates, p50/p99 of the admitted requests, the time
//     to each shed answer, and the node's highest RSS and heap sampled
//     from its /metrics ([OverloadReport]).
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
// request budget ([Budget]), the round robin ([RoundRobin]), the metrics
// scrape parser ([SumMetric]), the answer parser of the raw client
// ([ParseAnswer], [SSEData]) and the warm/cold and error classification
// ([Restored], [ErrorKind]), the overload classification and arrival
// schedule ([Classify], [Due]) — take their inputs as values and are
// table-tested; [Run] does the I/O.
//
// The package examples show a baseline comparison and sizing a cluster.
package bench
