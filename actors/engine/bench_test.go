package engine_test

import (
	"context"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"runtime"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
)

// Execution costs, side by side (docs/benchmarks.md):
//
//	go test ./actors/engine -run '^$' -bench . -benchtime 200x
//
// complete: an execution that returns at once (sandbox start-up included);
// read: one GET of the demo API over HTTP; paused: the heap an execution
// holds while it waits for approval (its goroutine and runtime stay).
func BenchmarkExecution(b *testing.B) {
	f := newFixtureLimits(b, nil, sandbox.Limits{WallTime: 10 * time.Second})
	b.Run("complete", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if out := f.e.ExecuteWithPause(context.Background(), `return 1 + 1`, alice); out.Status != engine.StatusCompleted {
				b.Fatalf("%+v", out)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if out := f.e.ExecuteWithPause(context.Background(), `return (await tools.demo.listTodos({})).length`, alice); out.Status != engine.StatusCompleted {
				b.Fatalf("%+v", out)
			}
		}
	})
	b.Run("paused", func(b *testing.B) {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		var ids []string
		for b.Loop() {
			out := f.e.ExecuteWithPause(context.Background(), `return await tools.demo.createTodo({title: "x"})`, alice)
			if out.Status != engine.StatusPaused {
				b.Fatalf("%+v", out)
			}
			ids = append(ids, out.Pause.ID)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(len(ids))/1024, "KiB-held/paused")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(len(ids)), "goroutines/paused")
		for _, id := range ids {
			f.e.Resume(context.Background(), id, engine.System, engine.Response{Action: engine.Decline})
		}
	})
}

// Restoring a paused durable execution whose journal holds 1,000 calls
// (real demo API reads over HTTP when recorded, answered from the journal
// on replay) and a pause (docs/benchmarks.md):
//
//	go test ./actors/engine -run '^$' -bench Replay -benchtime 50x
func BenchmarkReplay1000Calls(b *testing.B) {
	f := newDurableFixture(b)
	lim := sandbox.Limits{WallTime: 60 * time.Second, MaxToolCalls: 2000}
	e := f.activateWith(&hookLog{}, lim)
	out := e.ExecuteWithPause(context.Background(), `
		let n = 0;
		for (let i = 0; i < 1000; i++) n += (await tools.demo.listTodos({limit: 1 + (i % 50)})).length;
		return await tools.demo.createTodo({title: "after " + n});`, alice)
	if out.Status != engine.StatusPaused {
		b.Fatalf("%+v", out)
	}
	e.Shutdown()
	runs, err := runstore.New(f.st).PausedRuns(context.Background(), "s1")
	if err != nil || len(runs) != 1 {
		b.Fatalf("%v %v", runs, err)
	}
	run, entries, err := runstore.New(f.st).GetRun(context.Background(), runs[0].ID)
	if err != nil || len(entries) != 1001 {
		b.Fatalf("%d entries %v", len(entries), err)
	}
	gets := f.gets.Load()
	b.ResetTimer()
	for b.Loop() {
		r := f.activateWith(&hookLog{}, lim)
		if out := r.Restore(run, entries); out.Status != engine.StatusPaused || out.Pause.ID != run.PauseID {
			b.Fatalf("%+v", out)
		}
		r.Shutdown()
	}
	b.StopTimer()
	if f.gets.Load() != gets {
		b.Fatal("replay sent calls")
	}
}
