package bench_test

import (
	"context"
	"os"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/bench"
)

// Compare mcpgrain with a plain go-sdk server on the same machine, in the
// same run. (No Output: it starts servers and measures time, so it is
// compiled but not run.)
func ExampleRun() {
	reports, err := bench.Run(context.Background(), bench.Options{
		Scenarios: []bench.Scenario{bench.Call}, Sessions: 50, Concurrency: 8,
		Duration: 10 * time.Second, Baseline: true,
	})
	if err != nil {
		panic(err)
	}
	_ = bench.WriteText(os.Stdout, reports)
}

// Size a three-node cluster: create 100,000 sessions, then revisit them for
// a minute. (No Output: it needs the running cluster.)
func ExampleRun_scale() {
	reports, err := bench.Run(context.Background(), bench.Options{
		Scenarios: []bench.Scenario{bench.Scale}, Concurrency: 32, Duration: time.Minute,
		URL:   "http://127.0.0.1:8081/mcp,http://127.0.0.1:8082/mcp,http://127.0.0.1:8083/mcp",
		Token: os.Getenv("MCPGRAIN_TOKEN"),
		Scale: bench.ScaleOptions{Sessions: 100_000, Store: "postgres://postgres@127.0.0.1:5432/test?search_path=scale1"},
	})
	if err != nil {
		panic(err)
	}
	_ = bench.WriteText(os.Stdout, reports)
}
