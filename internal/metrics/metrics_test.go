package metrics_test

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/metrics"
)

// TestWorkflowMetricsExported: what a workflow reports under the contract's
// names reaches /metrics under the names operators query
// (docs/reference/observability.md's table): counters with _total, timers as
// histograms in seconds with LatencyBuckets.
func TestWorkflowMetricsExported(t *testing.T) {
	m, err := metrics.New(zap.NewNop())
	require.NoError(t, err)
	h := m.Handler.WithTags(map[string]string{"tenant": "t1"})
	counters := map[string]string{
		contract.MetricTurns:           "turns_total",
		contract.MetricModelTokens:     "model_tokens_total",
		contract.MetricToolInvocations: "tool_invocations_total",
		contract.MetricApprovals:       "approvals_total",
		contract.MetricRoutingMismatch: "routing_mismatch_total",
	}
	timers := map[string]string{
		contract.MetricAgentLatency: "agent_latency_seconds",
		contract.MetricApprovalWait: "approval_wait_seconds",
	}
	for name := range counters {
		h.Counter(name).Inc(2)
	}
	for name := range timers {
		h.Timer(name).Record(1500 * time.Millisecond)
	}

	families, err := m.Registry.Gather()
	require.NoError(t, err)
	exported := map[string]*dto.MetricFamily{}
	for _, f := range families {
		exported[f.GetName()] = f
	}
	for _, want := range counters {
		require.Contains(t, exported, want)
		require.Equal(t, 2.0, exported[want].GetMetric()[0].GetCounter().GetValue(), want)
	}
	for _, want := range timers {
		require.Contains(t, exported, want)
		hist := exported[want].GetMetric()[0].GetHistogram()
		require.Equal(t, uint64(1), hist.GetSampleCount(), want)
		require.InDelta(t, 1.5, hist.GetSampleSum(), 1e-9, "%s is in seconds", want)
		var bounds []float64
		for _, b := range hist.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		require.Equal(t, metrics.LatencyBuckets, bounds, want)
	}
}
