package pglive

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the live path and of followers' reads of the log.
type Metrics struct {
	lag   prometheus.Histogram
	reads *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer, buckets []float64) *Metrics {
	m := &Metrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stream_lag_seconds",
			Help:    "Time from an activity publishing a batch of a turn's events to this process receiving it for its followers.",
			Buckets: buckets,
		}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stream_log_reads_total",
			Help: "Reads of a turn's event log by followers, by reason: start (a follower of a running turn), gap (a lost or late notification, a wake-up), idle (no news for a while), close (the turn ended).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.lag, m.reads)
	return m
}

func (m *Metrics) published(at int64, now time.Time) {
	if m != nil && at > 0 {
		m.lag.Observe(max(0, now.Sub(time.UnixMicro(at)).Seconds()))
	}
}

// LogRead counts a follower's read of a log (eventlog.ReadCounter).
func (m *Metrics) LogRead(reason string) {
	if m != nil {
		m.reads.WithLabelValues(reason).Inc()
	}
}
