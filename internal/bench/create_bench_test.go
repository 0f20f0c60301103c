package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCreateSession creates b.N sessions one after the other with the
// raw Streamable HTTP client (initialize, then notifications/initialized:
// what the scale scenario's creation sends) on one target in this
// process: sub-benchmark mcpgrain is an in-process node (SQLite, every
// session resident: the soft cap above what a run creates), gosdk the
// plain go-sdk server the scale scenario compares with. One side per
// process and a run of N and one of 2N creations differenced give the
// instructions a created session costs that side, client included
// (docs/benchmarks.md, "Creation: instructions and objects per created
// session"):
//
//	GOGC=off tools/instr.sh -n 200 ./internal/bench '^BenchmarkCreateSession$/^mcpgrain$'
//	GOGC=off tools/instr.sh -n 200 ./internal/bench '^BenchmarkCreateSession$/^gosdk$'
//
// and with -benchmem (GOMAXPROCS=1) the allocations of one. Neither
// target is stopped: a stop ends or passivates every session it holds,
// work proportional to b.N that is no part of a creation; the stopped
// benchmark's node idles until the process exits (its store's directory
// removed under it), so run one side per process.
func BenchmarkCreateSession(b *testing.B) {
	for _, side := range []string{"mcpgrain", "gosdk"} {
		b.Run(side, func(b *testing.B) {
			ctx := context.Background()
			const warm = 50
			var t *target
			var err error
			if side == "mcpgrain" {
				t, err = startNode(ctx, NodeOptions{SoftCap: 1 << 20, Store: "sqlite:" + filepath.Join(b.TempDir(), "mcpgrain.db")}, 1)
			} else {
				t, err = startBaseline(ctx, false, 1)
			}
			if err != nil {
				b.Fatal(err)
			}
			c := &rawClient{hc: t.hc}
			create := func() {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
				defer cancel()
				if _, cold, err := c.create(cctx, t.endpoint); err != nil || cold {
					b.Fatalf("%s: create: cold %v, %v", side, cold, err)
				}
			}
			for range warm { // pools, maps and the first connection out of the count
				create()
			}
			b.ReportAllocs()
			for b.Loop() {
				create()
			}
		})
	}
}
