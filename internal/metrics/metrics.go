// Package metrics is the process's metrics: the Temporal SDK's and
// agentflow's own, on one Prometheus registry served at /metrics.
//
// The SDK reports through an OpenTelemetry meter whose Prometheus exporter
// writes to the registry; workflows report through the same meter (with
// workflow.GetMetricsHandler, which drops what a replay would report
// again), and the rest of the process registers Prometheus collectors
// directly. The names workflows report under are part of the Temporal
// contract (internal/contract's Metric* constants), declared there so
// that the workflow package links none of this package's dependencies.
//
// Of agentflow's it imports only internal/telemetry; the workflows must
// not import it.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/telemetry"
)

// LatencyBuckets are the bounds, in seconds, of every latency histogram:
// from a millisecond (a workflow task) to ten minutes (a long turn).
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Metrics holds the registry and the SDK's handler.
type Metrics struct {
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// Handler is the Temporal client's (and so its workers' and
	// workflows') metrics handler.
	Handler client.MetricsHandler
	// MeterProvider reports to Registry, for instrumented libraries.
	MeterProvider metric.MeterProvider
}

// New builds a registry with the Go runtime's and the process's
// collectors and an OpenTelemetry meter exporting to it.
func New(logger *zap.Logger) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	seconds := sdkmetric.NewView(
		sdkmetric.Instrument{Name: "*", Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: LatencyBuckets}},
	)
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(seconds))
	handler := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                provider.Meter(telemetry.ScopeName),
		UseMonotonicCounters: true,
		// An instrument the meter refuses is a bug, not a reason to stop
		// the worker.
		OnError: func(err error) { logger.Error("metric instrument refused", zap.Error(err)) },
	})
	return &Metrics{Registry: reg, Handler: handler, MeterProvider: provider}, nil
}
