package placement

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the placement layer's Prometheus instruments. Register them on
// a registry that adds the node label.
type Metrics struct {
	Activations      *prometheus.CounterVec
	ActivationErrors *prometheus.CounterVec
	Active           *prometheus.GaugeVec
	Deactivations    *prometheus.CounterVec
	ActivationTime   *prometheus.HistogramVec
	FencedWrites     *prometheus.CounterVec
	Forwards         *prometheus.CounterVec
	Held             *prometheus.CounterVec
}

// NewMetrics creates the instruments and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Activations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_grain_activations_total",
			Help: "Grain activations that took ownership (each increments the grain's epoch).",
		}, []string{"kind"}),
		ActivationErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_grain_activation_failures_total",
			Help: "Grain activations that failed to take ownership or restore.",
		}, []string{"kind"}),
		Active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgrain_grain_activations_active",
			Help: "Grain activations currently resident on this node.",
		}, []string{"kind"}),
		Deactivations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_grain_deactivations_total",
			Help: "Grain deactivations by reason (idle, requested, rebalance, ownership_lost, shutdown, activation_failed).",
		}, []string{"kind", "reason"}),
		ActivationTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgrain_grain_activation_seconds",
			Help:    "Time to activate a grain: take ownership in the store, read its record and run Activate.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"kind"}),
		FencedWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_grain_fenced_writes_total",
			Help: "Writes rejected because the activation's epoch was superseded (a stale duplicate was stopped).",
		}, []string{"kind"}),
		Forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_placement_forwards_total",
			Help: "Requests a placement actor forwarded or refused because another member owns the grain under its view.",
		}, []string{"outcome"}),
		Held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_placement_held_requests_total",
			Help: "Requests held while their grain was deactivating and then delivered to the next activation (passivation race).",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.Activations, m.ActivationErrors, m.Active, m.Deactivations, m.ActivationTime, m.FencedWrites, m.Forwards, m.Held)
	return m
}
