package cluster

import "github.com/prometheus/client_golang/prometheus"

type nodeMetrics struct {
	members      prometheus.Gauge
	viewChanges  prometheus.Counter
	suspects     prometheus.Counter
	requests     *prometheus.CounterVec
	retries      *prometheus.CounterVec
	requestTimes *prometheus.HistogramVec
}

func newNodeMetrics(reg prometheus.Registerer) *nodeMetrics {
	m := &nodeMetrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgrain_cluster_members",
			Help: "Members in this node's current membership view.",
		}),
		viewChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_cluster_view_changes_total",
			Help: "Membership views this node received.",
		}),
		suspects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_cluster_membership_lapses_total",
			Help: "Times this node's membership lease lapsed and it dropped its activations.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_grain_requests_total",
			Help: "Grain requests made by this node, by kind and outcome (ok, rejected, error, timeout, store_unavailable, canceled).",
		}, []string{"kind", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_grain_request_retries_total",
			Help: "Grain request attempts retried, by reason (not_owner, deactivating, ownership_lost, unavailable, store_unavailable, overloaded, unknown_kind, dead_letter, timeout).",
		}, []string{"reason"}),
		requestTimes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgrain_grain_request_seconds",
			Help:    "Grain request latency as seen by the caller, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
		}, []string{"kind"}),
	}
	reg.MustRegister(m.members, m.viewChanges, m.suspects, m.requests, m.retries, m.requestTimes)
	return m
}
