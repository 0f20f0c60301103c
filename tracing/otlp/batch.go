package otlp

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The defaults of BatchOptions: the OpenTelemetry batch span processor's.
const (
	DefaultQueueSize     = 2048
	DefaultBatchSize     = 512
	DefaultBatchInterval = 5 * time.Second
	DefaultExportTimeout = 30 * time.Second
)

// BatchOptions configures a Batcher. The zero value is the default: the
// Default* constants.
type BatchOptions struct {
	// QueueSize is the most ended spans held for export; a span that ends
	// while it is full is dropped (and counted: Batcher.Dropped).
	QueueSize int
	// BatchSize is the most spans of one export, and the number held that
	// starts one before the interval is up.
	BatchSize int
	// Interval is the longest a span waits for its export.
	Interval time.Duration
	// ExportTimeout bounds one export of the background loop.
	ExportTimeout time.Duration
}

// BatchOptionsFromEnv is the BatchOptions the OpenTelemetry environment
// sets, as the SDK's batch span processor reads them:
// OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
// OTEL_BSP_SCHEDULE_DELAY and OTEL_BSP_EXPORT_TIMEOUT (milliseconds). An
// unset, malformed or non-positive value leaves its default.
func BatchOptionsFromEnv() BatchOptions {
	num := func(name string) int {
		n, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name)))
		if err != nil || n <= 0 {
			return 0
		}
		return n
	}
	ms := func(name string) time.Duration { return time.Duration(num(name)) * time.Millisecond }
	return BatchOptions{QueueSize: num("OTEL_BSP_MAX_QUEUE_SIZE"), BatchSize: num("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
		Interval: ms("OTEL_BSP_SCHEDULE_DELAY"), ExportTimeout: ms("OTEL_BSP_EXPORT_TIMEOUT")}
}

func (o BatchOptions) withDefaults() BatchOptions {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	o.BatchSize = min(o.BatchSize, o.QueueSize)
	if o.Interval <= 0 {
		o.Interval = DefaultBatchInterval
	}
	if o.ExportTimeout <= 0 {
		o.ExportTimeout = DefaultExportTimeout
	}
	return o
}

// Batcher is a span processor that hands ended spans to an exporter in
// batches, like the SDK's batch span processor (sdktrace.WithBatcher) but
// without its per-span cost: the SDK's sends every span on a channel to
// its goroutine, which wakes for each one (a scheduler round and a select
// per span: ≈ 6 K instructions, a fifth of what tracing adds to a warm
// tools/call); a Batcher appends the span to a buffer under a mutex, and
// its goroutine wakes only when a batch is full or the interval is up.
// Spans that end while the buffer is full are dropped and counted.
type Batcher struct {
	exp sdktrace.SpanExporter
	o   BatchOptions

	mu      sync.Mutex
	buf     []sdktrace.ReadOnlySpan
	stopped bool

	exporting sync.Mutex // one export at a time, in order
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	shutdown  sync.Once
	dropped   atomic.Uint64
}

var _ sdktrace.SpanProcessor = (*Batcher)(nil)

// NewBatcher returns a Batcher exporting to exp, its loop started (Shutdown
// stops it).
func NewBatcher(exp sdktrace.SpanExporter, o BatchOptions) *Batcher {
	o = o.withDefaults()
	b := &Batcher{exp: exp, o: o, buf: make([]sdktrace.ReadOnlySpan, 0, o.BatchSize),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// OnStart implements sdktrace.SpanProcessor (nothing to do).
func (*Batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: it holds s for the next export.
func (b *Batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	switch {
	case b.stopped:
		b.mu.Unlock()
		return
	case len(b.buf) >= b.o.QueueSize:
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	b.buf = append(b.buf, s)
	full := len(b.buf) == b.o.BatchSize
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default: // a kick is pending already
		}
	}
}

// Dropped is the number of spans dropped because the buffer was full.
func (b *Batcher) Dropped() uint64 { return b.dropped.Load() }

// DroppedSpans is the counter mcpgrain_trace_spans_dropped_total of b: the
// ended spans b dropped because its buffer was full (the collector too
// slow or away), read from b at each scrape.
func DroppedSpans(b *Batcher) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "mcpgrain_trace_spans_dropped_total",
		Help: "Ended spans dropped because the export buffer was full (the trace collector too slow or unreachable).",
	}, func() float64 { return float64(b.Dropped()) })
}

// loop exports a batch when one is full or the interval is up, until Shutdown.
func (b *Batcher) loop() {
	defer close(b.done)
	t := time.NewTicker(b.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-b.kick:
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.o.ExportTimeout)
		if err := b.export(ctx); err != nil {
			otel.Handle(err)
		}
		cancel()
	}
}

// export hands every span held to the exporter, BatchSize at a time.
func (b *Batcher) export(ctx context.Context) error {
	b.exporting.Lock()
	defer b.exporting.Unlock()
	b.mu.Lock()
	held := b.buf
	b.buf = make([]sdktrace.ReadOnlySpan, 0, b.o.BatchSize)
	b.mu.Unlock()
	for len(held) > 0 {
		n := min(len(held), b.o.BatchSize)
		if err := b.exp.ExportSpans(ctx, held[:n]); err != nil {
			return fmt.Errorf("tracing: export of %d spans: %w", n, err)
		}
		held = held[n:]
	}
	return nil
}

// ForceFlush implements sdktrace.SpanProcessor: it exports every span
// held, returning when the exporter has them (or ctx ends).
func (b *Batcher) ForceFlush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tracing: flush: %w", err)
	}
	return b.export(ctx)
}

// Shutdown implements sdktrace.SpanProcessor: it stops taking spans,
// exports those held and shuts the exporter down. Only the first call does
// anything.
func (b *Batcher) Shutdown(ctx context.Context) error {
	var err error
	b.shutdown.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			err = fmt.Errorf("tracing: shutdown: %w", ctx.Err())
			return
		}
		if err = b.export(ctx); err != nil {
			_ = b.exp.Shutdown(ctx)
			return
		}
		if e := b.exp.Shutdown(ctx); e != nil {
			err = fmt.Errorf("tracing: exporter shutdown: %w", e)
		}
		if n := b.Dropped(); n > 0 {
			otel.Handle(fmt.Errorf("tracing: %d spans dropped, the export buffer (%d) was full", n, b.o.QueueSize))
		}
	})
	return err
}
