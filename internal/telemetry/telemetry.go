package telemetry

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/interceptor"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Default service names (OTEL_SERVICE_NAME overrides them).
const (
	ServiceWorker  = "agentflow-worker"
	ServiceGateway = "agentflow-gateway"
	ServiceStarter = "agentflow-starter"
)

// ScopeName names the tracers agentflow's own spans come from.
const ScopeName = "github.com/agentflow/agentflow"

// Propagator carries trace context across processes: W3C trace-context
// only (no baggage, which could carry what a caller put in it into every
// activity).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Tracing is a process's tracing: a provider, or nothing when it is off.
type Tracing struct {
	provider trace.TracerProvider // nil when off
	shutdown func(context.Context) error
}

// New is tracing with the given provider; nil or a no-op provider means
// off. The caller owns the provider: Shutdown leaves it alone. Tests pass
// one with an in-memory exporter.
func New(tp trace.TracerProvider) *Tracing {
	if _, ok := tp.(noop.TracerProvider); ok {
		return &Tracing{}
	}
	return &Tracing{provider: tp}
}

// FromEnv builds tracing from the process environment's standard
// variables. It is on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set, and then exports over OTLP/gRPC
// (the exporter reads the other OTEL_EXPORTER_OTLP_* variables:
// headers, TLS, timeout, compression); OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn it off. The service is named by
// OTEL_SERVICE_NAME, else service; OTEL_RESOURCE_ATTRIBUTES adds to the
// resource and OTEL_TRACES_SAMPLER picks the sampler. Off, no exporter is
// built and every span is a no-op. Nothing is dialled here: a collector
// that is down costs dropped spans, not a failed start.
func FromEnv(ctx context.Context, service string) (*Tracing, error) {
	on, err := enabled(os.Getenv)
	if err != nil || !on {
		return &Tracing{}, err
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	// resource.WithFromEnv comes after the default name so that
	// OTEL_SERVICE_NAME wins over it.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{provider: tp, shutdown: tp.Shutdown}, nil
}

// enabled says whether the variables ask for OTLP trace export, and
// refuses what this process cannot do rather than ignore it.
func enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return false, nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp (or none) is supported", exp)
	}
	if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return false, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "grpc" {
		return false, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: only grpc is supported (a collector's port 4317)", proto)
	}
	return true, nil
}

// Enabled says whether spans are recorded.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Shutdown flushes the spans not yet exported and stops the exporter.
// Call it once, when the process ends.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// TemporalInterceptors are the interceptors for a Temporal client's
// options: none when tracing is off. On a client they serve the workers
// built from it too.
func (t *Tracing) TemporalInterceptors() ([]interceptor.ClientInterceptor, error) {
	if !t.Enabled() {
		return nil, nil
	}
	i, err := NewTemporalInterceptor(t.provider)
	if err != nil {
		return nil, err
	}
	return []interceptor.ClientInterceptor{i}, nil
}

// GRPCServerOptions give a gRPC server one stats handler: a span per call,
// continuing the caller's trace when its metadata carries one, while
// tracing is on; and the calls' metrics on meters (nil: none).
func (t *Tracing) GRPCServerOptions(meters metric.MeterProvider) []grpc.ServerOption {
	if !t.Enabled() && meters == nil {
		return nil
	}
	opts := []otelgrpc.Option{otelgrpc.WithPropagators(Propagator), otelgrpc.WithTracerProvider(noop.NewTracerProvider()),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider())}
	if t.Enabled() {
		opts = append(opts, otelgrpc.WithTracerProvider(t.provider))
	}
	if meters != nil {
		opts = append(opts, otelgrpc.WithMeterProvider(meters))
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(opts...))}
}

// LogFields are the fields of a log line about ctx's work: those
// WithLogFields gave it, and the trace_id and span_id of its span when
// one is recording.
func LogFields(ctx context.Context) []zap.Field {
	fields, _ := ctx.Value(logFieldsKey{}).([]zap.Field)
	sc := trace.SpanFromContext(ctx).SpanContext()
	if !sc.IsValid() || !trace.SpanFromContext(ctx).IsRecording() {
		return fields
	}
	return append(slices.Clip(fields), zap.String("trace_id", sc.TraceID().String()), zap.String("span_id", sc.SpanID().String()))
}

type logFieldsKey struct{}

// WithLogFields is ctx whose log lines (Logger) carry fields too, after
// those it had: what the work is about (a tool call's agent, version and
// tool), said once where the work starts, not on every line.
func WithLogFields(ctx context.Context, fields ...zap.Field) context.Context {
	prior, _ := ctx.Value(logFieldsKey{}).([]zap.Field)
	return context.WithValue(ctx, logFieldsKey{}, append(slices.Clip(prior), fields...))
}

// Logger is logger with ctx's LogFields.
func Logger(ctx context.Context, logger *zap.Logger) *zap.Logger {
	if f := LogFields(ctx); f != nil {
		return logger.With(f...)
	}
	return logger
}
