package gateway_test

import (
	"context"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/tracing"
	"github.com/mcpgrain/mcpgrain/tracing/otlp"
)

// The cost of tracing on a warm tools/call, one node in this process, in
// one run: off (the default: no provider, one atomic check per hook) and on
// at sampling 1.0 (every span recorded and batched to an exporter that
// drops them, so the collector's side is not measured). Ratios go in
// docs/benchmarks.md.
//
//	go test ./gateway -run '^$' -bench ToolCallTracing -benchtime 3000x -benchmem
func BenchmarkToolCallTracing(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchTarget(b, singleNodeTarget) })
	b.Run("on", func(b *testing.B) {
		tp := benchProvider()
		uninstall := tracing.Install(tp)
		b.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
		benchTarget(b, singleNodeTarget)
	})
}

// benchProvider is the tracer provider of the benchmarks' "on": a node's
// (otlp.Setup: sampling 1.0, otlp.Batcher) with an exporter that drops
// the spans, so the collector's side is not measured.
func benchProvider() *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(otlp.NewBatcher(tracetest.NewNoopExporter(), otlp.BatchOptions{})))
}

// The allocations of a created session (initialize, one call, close) with
// tracing off and on at sampling 1.0, one node in this process: the
// allocation count is steady where CPU time on a shared machine is not,
// so it shows what a change to the spans of a session's creation saves
// (docs/benchmarks.md, "Tracing").
//
//	go test ./gateway -run '^$' -bench SessionTracing -benchtime 300x -benchmem
func BenchmarkSessionTracing(b *testing.B) {
	session := func(b *testing.B) {
		tg := singleNodeTarget(b)
		call(b, tg.connect(b))
		b.ReportAllocs()
		for b.Loop() {
			s := tg.connect(b)
			call(b, s)
			_ = s.Close()
		}
	}
	b.Run("off", session)
	b.Run("on", func(b *testing.B) {
		tp := benchProvider()
		uninstall := tracing.Install(tp)
		b.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
		session(b)
	})
}

// The same-run, alternating ratio of tracing's CPU cost (docs/benchmarks.md,
// "Tracing"): one node in this process, and rounds that alternate tracing
// off and on (sampling 1.0, spans batched to an exporter that drops them),
// each round timing the process's CPU (user + system, getrusage) over
// warm tools/calls on one session and over created sessions (initialize,
// one call, close). Alternating rounds in one process put both variants
// under the same load, which a busy shared machine otherwise skews by
// more than the effect. The CPU includes the go-sdk client's (untraced):
// the on−off difference is all tracing, and its ratio to the node's part
// alone is larger than to the whole process's.
//
//	go test ./gateway -run '^$' -bench ToolCallTracingCPU -benchtime 1x
func BenchmarkToolCallTracingCPU(b *testing.B) { benchTracingCPU(b, 1500, 60, false) }

// The same rounds with the collector stopped during each timed phase
// (and run, untimed, between them): the CPU of the code itself
// ("mutator"), without the garbage collector's, whose share on a loaded
// machine varies with how long its marking takes in wall time more than
// with the garbage; the bytes each phase allocated are reported beside
// it (what the collector's cost follows). Fewer calls per round: the heap
// grows unchecked within a phase (≈ 0.45 GB).
//
//	go test ./gateway -run '^$' -bench ToolCallTracingMutatorCPU -benchtime 1x
func BenchmarkToolCallTracingMutatorCPU(b *testing.B) { benchTracingCPU(b, 1000, 60, true) }

func benchTracingCPU(b *testing.B, calls, sessions int, gcOff bool) {
	const rounds = 6
	tg := singleNodeTarget(b)
	cs := tg.connect(b)
	call(b, cs)
	var callCPU, sessionCPU [2]time.Duration // [off, on]
	var callBytes, sessionBytes [2]uint64
	for b.Loop() {
		for r := range 2 * rounds {
			v := r % 2 // 1: tracing on
			uninstall := func() {}
			var tp *sdktrace.TracerProvider
			if v == 1 {
				tp = benchProvider()
				uninstall = tracing.Install(tp)
			}
			c, a := phaseCPU(tp, gcOff, func() {
				for range calls {
					call(b, cs)
				}
			})
			callCPU[v], callBytes[v] = callCPU[v]+c, callBytes[v]+a
			c, a = phaseCPU(tp, gcOff, func() {
				for range sessions {
					s := tg.connect(b)
					call(b, s)
					_ = s.Close()
				}
			})
			sessionCPU[v], sessionBytes[v] = sessionCPU[v]+c, sessionBytes[v]+a
			uninstall()
			if tp != nil {
				_ = tp.Shutdown(context.Background())
			}
		}
	}
	n := float64(b.N * rounds)
	for v, name := range []string{"off", "on"} {
		b.ReportMetric(float64(callCPU[v].Microseconds())/(n*float64(calls)), "call-cpu-µs-"+name)
		b.ReportMetric(float64(sessionCPU[v].Microseconds())/(n*float64(sessions)), "session-cpu-µs-"+name)
	}
	b.ReportMetric(100*(float64(callCPU[1])/float64(callCPU[0])-1), "call-cpu-%-on/off")
	b.ReportMetric(100*(float64(sessionCPU[1])/float64(sessionCPU[0])-1), "session-cpu-%-on/off")
	b.ReportMetric(100*(float64(callBytes[1])/float64(callBytes[0])-1), "call-bytes-%-on/off")
	b.ReportMetric(100*(float64(sessionBytes[1])/float64(sessionBytes[0])-1), "session-bytes-%-on/off")
}

// phaseCPU is the process's CPU time over run, and over the processing of
// the spans run made (tp's flush; tp nil: tracing off), and the bytes it
// allocated. A collection before it, not timed, keeps the garbage of what
// ran before out of the phase's figure, so the call and the session
// phases do not pay for each other; gcOff stops the collector while it
// runs (the CPU is then the code's alone).
func phaseCPU(tp *sdktrace.TracerProvider, gcOff bool, run func()) (time.Duration, uint64) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if gcOff {
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
	}
	c0 := processCPU()
	run()
	if tp != nil {
		_ = tp.ForceFlush(context.Background())
	}
	c := processCPU() - c0
	runtime.ReadMemStats(&m1)
	return c, m1.TotalAlloc - m0.TotalAlloc
}

// processCPU is the CPU time this process used so far (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
