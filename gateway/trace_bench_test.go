package gateway_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/tracing"
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
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		uninstall := tracing.Install(tp)
		b.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
		benchTarget(b, singleNodeTarget)
	})
}
