package tasks

import "github.com/prometheus/client_golang/prometheus"

// metrics are the task grains' counters on one node.
type metrics struct {
	created prometheus.Counter
	settled *prometheus.CounterVec
	lost    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_tasks_created_total",
			Help: "Tasks (MCP tasks extension) created by task grains on this node.",
		}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_tasks_settled_total",
			Help: "Tasks that reached a terminal status on this node, by status.",
		}, []string{"status"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_tasks_lost_total",
			Help: "Working tasks found without their work (lost with their node or grain activation), by what became of them.",
		}, []string{"outcome"}),
	}
	for _, s := range []Status{Completed, Failed, Cancelled} {
		m.settled.WithLabelValues(string(s))
	}
	for _, o := range []string{"rerun", "failed"} {
		m.lost.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.created, m.settled, m.lost)
	}
	return m
}
