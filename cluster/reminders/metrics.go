package reminders

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	fired      *prometheus.CounterVec
	tardiness  prometheus.Histogram
	failures   prometheus.Counter
	pollErrors prometheus.Counter
	scheduled  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		fired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_reminders_fired_total",
			Help: "Reminders delivered to their grain and acknowledged, by grain kind (executor: Durable Object alarms run).",
		}, []string{"kind"}),
		tardiness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcpgrain_reminder_tardiness_seconds",
			Help:    "How late reminders fire: fire time minus due time (never negative).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_reminder_delivery_failures_total",
			Help: "Reminder deliveries that failed and will be retried at the next scan.",
		}),
		pollErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_reminder_poll_errors_total",
			Help: "Reminder store scans that failed.",
		}),
		scheduled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgrain_reminders_scheduled",
			Help: "Reminders armed in memory on this node (due within the lookahead window).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.fired, m.tardiness, m.failures, m.pollErrors, m.scheduled)
	}
	return m
}
