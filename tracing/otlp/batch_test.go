package otlp

import (
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A Batcher holds ended spans until a batch is full (then its loop
// exports them), ForceFlush or Shutdown; a span that ends while the
// buffer is full is dropped and counted, and none is taken after
// Shutdown.
func TestBatcherExportsFlushesAndDropsOnOverflow(t *testing.T) {
	exp := &counting{}
	// An interval that does not come up during the test: exports happen
	// on a full batch, ForceFlush and Shutdown only.
	b := NewBatcher(exp, BatchOptions{QueueSize: 4, BatchSize: 2, Interval: 1 << 40})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	ctx := context.Background()
	end := func(n int) {
		for range n {
			_, s := tp.Tracer("t").Start(ctx, "s")
			s.End()
		}
	}
	end(1)
	if got := exp.spans(); got != 0 {
		t.Fatalf("%d spans exported before a batch was full or a flush", got)
	}
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := exp.spans(); got != 1 {
		t.Fatalf("%d spans exported after ForceFlush, want 1", got)
	}
	// Hold the export lock so that the full batch's export waits, and
	// fill the buffer past its size.
	b.exporting.Lock()
	end(6)
	b.exporting.Unlock()
	if got := b.Dropped(); got != 2 {
		t.Errorf("dropped %d spans, want 2 (6 ended into a buffer of 4)", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(DroppedSpans(b))
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "mcpgrain_trace_spans_dropped_total" {
		t.Fatalf("gather: %v %v", mfs, err)
	}
	if got := mfs[0].GetMetric()[0].GetCounter().GetValue(); got != 2 {
		t.Errorf("mcpgrain_trace_spans_dropped_total = %v, want 2", got)
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := exp.spans(); got != 5 || !exp.shut {
		t.Errorf("%d spans exported, exporter shut down %v; want 5 (1 + the 4 held), shut down", got, exp.shut)
	}
	late := tracetest.SpanStub{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1},
		SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})}.Snapshot()
	b.OnEnd(late)
	if n := len(b.buf); n != 0 {
		t.Errorf("%d spans held after Shutdown", n)
	}
}

// counting is an exporter that counts the spans it was given.
type counting struct {
	mu   sync.Mutex
	n    int
	shut bool
}

func (c *counting) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(s)
	return nil
}

func (c *counting) Shutdown(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shut = true
	return nil
}

func (c *counting) spans() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// The OTEL_BSP_* variables set a Batcher's options as they set the SDK's
// batch span processor's; what is unset or malformed keeps its default.
func TestBatchOptionsFromEnv(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "oops")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "250")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "-5")
	got := BatchOptionsFromEnv().withDefaults()
	want := BatchOptions{QueueSize: 100, BatchSize: 100, Interval: 250 * time.Millisecond, ExportTimeout: DefaultExportTimeout}
	if got != want {
		t.Errorf("options %+v, want %+v", got, want)
	}
}
