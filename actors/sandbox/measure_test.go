package sandbox

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMeasureNoisyNeighbours measures what busy loops of one tenant cost another tenant's short
// execution, with and without the CPU-heavy workers lowering their priority. It is a measurement for
// docs/benchmarks.md, not a check: it runs only with MCPGRAIN_SANDBOX_MEASURE=1.
func TestMeasureNoisyNeighbours(t *testing.T) {
	if os.Getenv("MCPGRAIN_SANDBOX_MEASURE") != "1" {
		t.Skip("set MCPGRAIN_SANDBOX_MEASURE=1 to measure")
	}
	const small = `let s = 0; for (let i = 0; i < 3e6; i++) s += i; return s`
	measure := func(p *Pool) time.Duration {
		var runs []time.Duration
		for range 7 {
			start := time.Now()
			if _, err := p.Run(t.Context(), small, nil, Limits{Tenant: "org/b"}); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, time.Since(start))
		}
		slices.Sort(runs)
		return runs[len(runs)/2]
	}
	alone := func() time.Duration {
		p, _ := newTestPool(t, PoolOptions{})
		return measure(p)
	}
	t.Logf("alone: %v", alone())
	for _, busy := range []int{4, 16} {
		for _, nice := range []time.Duration{time.Second, -1} {
			p, log := newTestPool(t, PoolOptions{MaxRunning: 64, MaxRunningPerTenant: busy, NiceAfterCPU: nice})
			ctx, cancel := context.WithCancel(t.Context())
			started := make(chan struct{}, busy)
			host := HostFunc(func(context.Context, string, any) (any, error) { started <- struct{}{}; return nil, nil })
			done := make(chan struct{}, busy)
			for range busy {
				go func() {
					_, _ = p.Run(ctx, `await tools.started(); while (true) {}`, host, Limits{Tenant: "org/a", WallTime: time.Hour})
					done <- struct{}{}
				}()
			}
			var pids []int
			for range busy {
				<-started
				pids = append(pids, (<-log.lent).pid())
			}
			// Wait (by polling /proc, not by sleeping) until every loop has used 1.2s of CPU: past
			// the point where a niced worker lowers its priority.
			for tick := time.NewTicker(50 * time.Millisecond); ; <-tick.C {
				if minCPU(t, pids) > 1200*time.Millisecond {
					tick.Stop()
					break
				}
			}
			got := measure(p)
			t.Logf("%d busy loops of another tenant, nice after %v: %v (busy workers' nice: %v)", busy, nice, got, niceValues(pids))
			cancel()
			for range busy {
				<-done
			}
		}
	}
}

// procStat returns the fields of /proc/pid/stat after the command name.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

func minCPU(t *testing.T, pids []int) time.Duration {
	least := time.Duration(1 << 62)
	for _, pid := range pids {
		f := procStat(pid)
		if len(f) < 13 {
			t.Fatalf("no stat for %d", pid)
		}
		utime, _ := strconv.Atoi(f[11])
		stime, _ := strconv.Atoi(f[12])
		least = min(least, time.Duration(utime+stime)*10*time.Millisecond) // USER_HZ = 100
	}
	return least
}

func niceValues(pids []int) []string {
	var out []string
	for _, pid := range pids {
		if f := procStat(pid); len(f) > 16 {
			out = append(out, f[16])
		}
	}
	return out
}

// TestMeasureWorkerFootprint measures a worker's start-up time and resident memory (for
// docs/benchmarks.md). It runs only with MCPGRAIN_SANDBOX_MEASURE=1.
func TestMeasureWorkerFootprint(t *testing.T) {
	if os.Getenv("MCPGRAIN_SANDBOX_MEASURE") != "1" {
		t.Skip("set MCPGRAIN_SANDBOX_MEASURE=1 to measure")
	}
	var starts []time.Duration
	for range 7 {
		start := time.Now()
		w, err := startProc()
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, time.Since(start))
		w.kill()
		<-w.exited
	}
	slices.Sort(starts)
	t.Logf("worker start to ready: median %v, min %v, max %v", starts[len(starts)/2], starts[0], starts[len(starts)-1])

	p, log := newTestPool(t, PoolOptions{Spares: -1})
	rss := func(pid int) string {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				return strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:"))
			}
		}
		return "?"
	}
	for i := range 100 {
		if _, err := p.Run(t.Context(), `const todos = []; for (let i = 0; i < 100; i++) todos.push({id: i}); return todos.length`, nil, Limits{}); err != nil {
			t.Fatal(err)
		}
		w := <-log.lent
		if i == 0 || i == 99 {
			t.Logf("worker RSS after %d small executions: %s", i+1, rss(w.pid()))
		}
	}
}
