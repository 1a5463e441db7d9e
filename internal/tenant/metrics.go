package tenant

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the cache (the metric names keep the registry_ prefix the
// dashboards know) and of routing.
type Metrics struct {
	nodes     *prometheus.GaugeVec
	reload    prometheus.Histogram
	decisions *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "registry_nodes_total",
			Help: "Catalog entries of a tenant by kind (agent, tool, rule), as last loaded.",
		}, []string{"tenant", "kind"}),
		reload: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "registry_reload_duration_seconds",
			Help:    "Time to load and compile a tenant's catalog snapshot after a change.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "routing_decisions_total",
			Help: "Routing decisions by tenant and rule (default, or the matching rule's name).",
		}, []string{"tenant", "rule"}),
	}
	reg.MustRegister(m.nodes, m.reload, m.decisions)
	return m
}

// Decided counts a routing decision.
func (m *Metrics) Decided(tenant, rule string) {
	if m != nil {
		m.decisions.WithLabelValues(tenant, rule).Inc()
	}
}
