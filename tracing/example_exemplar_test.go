package tracing_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// Observe records a latency in a histogram; with tracing on and a sampled
// span in ctx the observation carries the span's trace id as its exemplar
// (shown to OpenMetrics scrapers), off it is a plain Observe.
func ExampleObserve() {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "request_seconds"})
	tracing.Observe(context.Background(), h, 0.042)
	var m dto.Metric
	_ = h.Write(&m)
	fmt.Println(m.GetHistogram().GetSampleCount())
	// Output: 1
}
