package store_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// Run with (MCPGRAIN_TEST_POSTGRES_URL set for the Postgres case):
//
//	go test -run '^$' -bench ApplyRecord -benchtime 2000x -count 3 ./cluster/store/
//
// BenchmarkApplyRecord is an activation saving a changed record of ≈ 1 KiB
// (a session's changed state: two records alternate) with Apply, fenced
// by its epoch. cpu-µs/op is the process's CPU time (getrusage: the
// driver's side; the database server's is not in it) per save.
func BenchmarkApplyRecord(b *testing.B) {
	for name, dsn := range map[string]func(testing.TB) string{
		"sqlite":   func(tb testing.TB) string { return "sqlite:" + tb.TempDir() + "/mcpgrain.db" },
		"postgres": func(tb testing.TB) string { return testenv.Postgres(tb) },
	} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, err := store.Open(ctx, dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			o, err := s.Acquire(ctx, "session/bench", "n1")
			if err != nil {
				b.Fatal(err)
			}
			recs := [][]byte{[]byte(strings.Repeat("a", 1000)), []byte(strings.Repeat("b", 1000))}
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Apply(ctx, "session/bench", o.Epoch, store.Writes{Record: recs[i%2]}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
