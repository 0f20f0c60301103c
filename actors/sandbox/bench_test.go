package sandbox

import (
	"context"
	"io"
	"testing"
	"time"
)

// BenchmarkRunTrivial measures a fresh runtime plus a tiny program (the compiled program is cached).
func BenchmarkRunTrivial(b *testing.B) {
	ctx := context.Background()
	host := &fakeHost{}
	b.ReportAllocs()
	for b.Loop() {
		res, err := Run(ctx, `return 1 + 1`, host, Limits{})
		if err != nil || res.Value != 2.0 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkRun100ToolCalls measures 100 sequential awaited tool calls with small JSON arguments and
// results.
func BenchmarkRun100ToolCalls(b *testing.B) {
	ctx := context.Background()
	host := HostFunc(func(_ context.Context, path string, args any) (any, error) {
		return map[string]any{"id": args.(map[string]any)["i"], "ok": true}, nil
	})
	const code = `
		let sum = 0;
		for (let i = 0; i < 100; i++) {
			const r = await tools.demo.get({i});
			sum += r.id;
		}
		return sum;`
	b.ReportAllocs()
	for b.Loop() {
		res, err := Run(ctx, code, host, Limits{})
		if err != nil || res.Value != 4950.0 || res.ToolCalls != 100 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkCompile measures esbuild plus sobek compilation of a small program, bypassing the cache.
func BenchmarkCompile(b *testing.B) {
	const code = `
		interface Todo { id: number; title: string }
		const todos: Todo[] = await tools.demo.listTodos({limit: 10});
		const open = todos.filter(t => !t.title.startsWith("done"));
		for (const t of open) emit({id: t.id});
		return open.length;`
	b.ReportAllocs()
	for b.Loop() {
		if c := compileUncached(code); c.err != nil {
			b.Fatal(c.err)
		}
	}
}

// BenchmarkWorkerExecution measures the worker's side of one execution alone: a fresh runtime and a
// tiny cached program, without the pipes.
func BenchmarkWorkerExecution(b *testing.B) {
	link := &workerLink{out: newFrameWriter(io.Discard)}
	b.ReportAllocs()
	for b.Loop() {
		ex, err := newExecution(link, wireLimits{MaxToolCalls: 10, MaxOutput: 1000, MaxHeapGrowth: 1 << 29}, 0)
		if err != nil {
			b.Fatal(err)
		}
		if out := ex.run("return 1 + 1"); out.err != nil {
			b.Fatal(out.err)
		}
	}
}

// BenchmarkWatchdogArm measures arming and disarming a worker's memory bounds (soft limit, stack
// bound, RLIMIT_DATA, watchdog goroutine), done once per execution.
func BenchmarkWatchdogArm(b *testing.B) {
	w := &workerSide{link: &workerLink{out: newFrameWriter(io.Discard)}, heap: newHeapGauge()}
	for b.Loop() {
		w.startWatchdog(512<<20, time.Second).stop()
	}
}
