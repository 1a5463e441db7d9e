package governor

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the governor's, per governed key. Each process reports its
// own calls; the fleet's are their sum. Tokens per minute used on a key
// are rate(governor_tokens_total[1m]) * 60.
type Metrics struct {
	waitingCalls *prometheus.GaugeVec
	wait         *prometheus.HistogramVec
	requests     *prometheus.CounterVec
	tokensUsed   *prometheus.CounterVec
	pauses       *prometheus.CounterVec
}

// Names of the governor's metrics, as /metrics shows them.
const (
	MetricWaitingCalls = "governor_waiting_calls"
	MetricWait         = "governor_wait_seconds"
	MetricRequests     = "governor_requests_total"
	MetricTokens       = "governor_tokens_total"
	MetricPauses       = "governor_pauses_total"
)

// NewMetrics registers the governor's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		waitingCalls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricWaitingCalls,
			Help: "Model calls of this process waiting for their provider's limits, by governed key.",
		}, []string{"key"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricWait,
			Help:    "Time from a model call's first admission request to its admission, by governed key.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"key"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Model calls admitted, by governed key.",
		}, []string{"key"}),
		tokensUsed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricTokens,
			Help: "Tokens of admitted model calls as their provider counted them, by governed key and kind (input, output).",
		}, []string{"key", "kind"}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPauses,
			Help: "Times a provider's refusal paused a governed key.",
		}, []string{"key"}),
	}
	reg.MustRegister(m.waitingCalls, m.wait, m.requests, m.tokensUsed, m.pauses)
	return m
}

func (m *Metrics) waiting(key string, delta float64) {
	if m != nil {
		m.waitingCalls.WithLabelValues(key).Add(delta)
	}
}

func (m *Metrics) admitted(key string, waited time.Duration) {
	if m != nil {
		m.wait.WithLabelValues(key).Observe(waited.Seconds())
		m.requests.WithLabelValues(key).Inc()
	}
}

func (m *Metrics) tokens(key string, input, output int64) {
	if m != nil {
		m.tokensUsed.WithLabelValues(key, "input").Add(float64(input))
		m.tokensUsed.WithLabelValues(key, "output").Add(float64(output))
	}
}

func (m *Metrics) paused(key string) {
	if m != nil {
		m.pauses.WithLabelValues(key).Inc()
	}
}
