package session

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	disposals   *prometheus.CounterVec
	overflow    prometheus.Counter
	activations prometheus.Counter
	restore     prometheus.Histogram
	approvals   *prometheus.CounterVec
	evictReqs   *prometheus.CounterVec
	idleAlarms  prometheus.Counter
	schedules   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, h *Host) *metrics {
	m := &metrics{
		disposals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_runtime_disposals_total",
			Help: "Session runtimes disposed, by reason: idle (the idle alarm, executor: destroy_idle_session), cap (residency cap eviction), delete, expired, ownership_lost, rebalance, shutdown.",
		}, []string{"reason"}),
		overflow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_cap_overflow_total",
			Help: "Cold builds that proceeded over the residency soft cap because nothing was evictable (executor: mcp.isolate.cap_overflow).",
		}),
		activations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_session_activations_total",
			Help: "Session runtimes built (first use or cold restore after passivation).",
		}),
		restore: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcpgrain_session_restore_seconds",
			Help:    "Time to build a session runtime from its record (cold restore).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_approvals_total",
			Help: "Approval decisions applied, by outcome (accept, decline, cancel, timeout).",
		}, []string{"outcome"}),
		idleAlarms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_session_idle_alarms_total",
			Help: "Idle alarms of resident session runtimes handled (executor's alarm: keep, extend a lease, or dispose).",
		}),
		evictReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_cap_eviction_requests_total",
			Help: "RequestCapEviction messages sent to least-recently-active sessions, by result (evicted, declined, failed).",
		}, []string{"result"}),
		schedules: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_sdk_schedules_total",
			Help: "Runs of the SDK's schedule callbacks, by outcome: completed, failed (retried with backoff), dropped (failed its last attempt).",
		}, []string{"outcome"}),
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	reg.MustRegister(newCountGauges(h.counts, []countGauge{
		{"mcpgrain_resident_runtimes", "Session runtimes resident on this node (executor: mcp.isolate.resident_runtimes).", func(c countsView) float64 { return float64(c.Resident) }},
		{"mcpgrain_resident_soft_cap", "The residency soft cap in force: fixed (--resident-soft-cap) or derived from the memory budget.", func(c countsView) float64 { return float64(c.SoftCap) }},
		{"mcpgrain_resident_runtimes_peak", "Peak resident session runtimes since the node started.", func(c countsView) float64 { return float64(c.Peak) }},
		{"mcpgrain_resident_evictable", "Resident runtimes that could be evicted now (no streams, nothing paused or running).", func(c countsView) float64 { return float64(c.Evictable) }},
		{"mcpgrain_resident_pinned", "Resident runtimes pinned by open streams or executions.", func(c countsView) float64 { return float64(c.Pinned) }},
		{"mcpgrain_resident_eviction_pending", "Resident runtimes asked to evict within the grace window.", func(c countsView) float64 { return float64(c.EvictionPending) }},
		{"mcpgrain_in_flight_cold_builds", "Session runtimes being built now (reserved build slots).", func(c countsView) float64 { return float64(c.InFlightBuilds) }},
		{"mcpgrain_active_streams", "Open response streams across resident sessions.", func(c countsView) float64 { return float64(c.Streams) }},
		{"mcpgrain_paused_executions", "Executions paused for approval in resident sessions (durable ones included; a passivated session's durable pauses live in the store).", func(c countsView) float64 { return float64(c.Paused) }},
		{"mcpgrain_running_executions", "Executions running across resident sessions.", func(c countsView) float64 { return float64(c.Running) }},
		{"mcpgrain_approval_leases", "Pending approval leases: non-durable pauses keeping their session resident (durable pauses take none).", func(c countsView) float64 { return float64(c.Leases) }},
	}), m.disposals, m.overflow, m.activations, m.restore, m.approvals, m.evictReqs, m.idleAlarms, m.schedules,
		gauge("mcpgrain_resident_memory_budget_bytes", "The memory budget of resident session runtimes (--resident-memory; 0: the soft cap is fixed).", func() float64 { return float64(h.cfg.Memory.Budget) }),
		gauge("mcpgrain_resident_runtime_bytes", "The measured memory of one resident session runtime (live heap beyond the node's baseline per runtime, with the collector's headroom), from which the soft cap is derived; 0 with a fixed cap.", func() float64 {
			if h.sizing == nil {
				return 0
			}
			return float64(h.sizing.perRuntime())
		}),
		gauge("mcpgrain_parked_streams", "Standalone GET streams held open on hibernated sessions (no runtime resident); they end when the session restores, ends or moves.", func() float64 { return float64(h.parked.Load()) }),
	)
	return m
}

// countGauge is one gauge read from the residency counts.
type countGauge struct {
	name, help string
	value      func(countsView) float64
}

// countGauges is the gauges read from the residency counts, as one
// collector: a scrape takes the counts once — they visit every resident
// runtime, under the registry's lock that every build takes — instead of
// once per gauge (eleven passes over a quarter of a million runtimes per
// scrape stalled the builds of a node behind its /metrics).
type countGauges struct {
	counts func() countsView
	gauges []countGauge
	descs  []*prometheus.Desc
}

func newCountGauges(counts func() countsView, gauges []countGauge) *countGauges {
	g := &countGauges{counts: counts, gauges: gauges}
	for _, x := range gauges {
		g.descs = append(g.descs, prometheus.NewDesc(x.name, x.help, nil, nil))
	}
	return g
}

// Describe sends the gauges' descriptions.
func (g *countGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range g.descs {
		ch <- d
	}
}

// Collect takes the counts once and sends every gauge from them.
func (g *countGauges) Collect(ch chan<- prometheus.Metric) {
	c := g.counts()
	for i, x := range g.gauges {
		ch <- prometheus.MustNewConstMetric(g.descs[i], prometheus.GaugeValue, x.value(c))
	}
}
