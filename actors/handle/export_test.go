package handle

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// NewLiveCollectorForTest is mcpgrain_live_handles' collector over count.
func NewLiveCollectorForTest(count func(ctx context.Context) (int64, error), clk clock.Clock) prometheus.Collector {
	return newLiveCollector(count, clk, slog.Default())
}
