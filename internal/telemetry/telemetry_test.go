package telemetry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentflow/agentflow/internal/telemetry/otlptest"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    bool
		wantErr string
	}{
		{"nothing set", nil, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, true, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, true, ""},
		{"grpc protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, ""},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_SDK_DISABLED": "true"}, false, ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_TRACES_EXPORTER": "none"}, false, ""},
		{"exporter otlp without endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, false, ""},
		{"exporter zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, `OTEL_TRACES_EXPORTER="zipkin": only otlp`},
		{"http protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, false,
			`OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf": only grpc`},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := enabled(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestFromEnvOff: without an endpoint nothing is built and every part
// is left out.
func TestFromEnvOff(t *testing.T) {
	otlptest.ClearEnv(t)
	tr, err := FromEnv(context.Background(), ServiceWorker)
	require.NoError(t, err)
	require.False(t, tr.Enabled())
	require.IsType(t, noop.TracerProvider{}, tr.Provider())
	i, err := tr.TemporalInterceptors()
	require.NoError(t, err)
	require.Nil(t, i)
	require.Nil(t, tr.GRPCServerOptions(nil))
	require.NoError(t, tr.Shutdown(context.Background()))

	require.False(t, New(nil).Enabled())
	require.False(t, New(noop.NewTracerProvider()).Enabled())
}

// TestFromEnvExports: with an endpoint, spans reach the OTLP receiver by
// Shutdown at the latest, under the role's service name or
// OTEL_SERVICE_NAME.
func TestFromEnvExports(t *testing.T) {
	for _, tc := range []struct {
		name, serviceEnv, want string
	}{
		{"default name", "", ServiceGateway},
		{"OTEL_SERVICE_NAME", "agentflow-eu", "agentflow-eu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			otlptest.ClearEnv(t)
			r := otlptest.Start(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+r.Addr)
			if tc.serviceEnv != "" {
				t.Setenv("OTEL_SERVICE_NAME", tc.serviceEnv)
			}
			tr, err := FromEnv(context.Background(), ServiceGateway)
			require.NoError(t, err)
			require.True(t, tr.Enabled())
			i, err := tr.TemporalInterceptors()
			require.NoError(t, err)
			require.Len(t, i, 1)
			require.Len(t, tr.GRPCServerOptions(nil), 1)

			_, span := tr.Provider().Tracer("test").Start(context.Background(), "work")
			span.End()
			require.NoError(t, tr.Shutdown(context.Background()))
			require.Equal(t, []otlptest.Span{{Service: tc.want, Name: "work"}}, names(r.Spans()))
		})
	}
}

// TestLogger: a log line written in a recording span's context carries
// its trace and span ids; one without a span carries none.
func TestLogger(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	logger := zap.New(core)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	Logger(ctx, logger).Info("in a span")
	span.End()
	Logger(context.Background(), logger).Info("no span")
	_, unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("test").Start(context.Background(), "x")
	Logger(trace.ContextWithSpan(context.Background(), unsampled), logger).Info("unsampled")

	entries := logs.All()
	require.Len(t, entries, 3)
	require.Equal(t, map[string]any{
		"trace_id": span.SpanContext().TraceID().String(),
		"span_id":  span.SpanContext().SpanID().String(),
	}, entries[0].ContextMap())
	require.Empty(t, entries[1].ContextMap())
	require.Empty(t, entries[2].ContextMap())
}

// names keeps the service and name of each span.
func names(spans []otlptest.Span) []otlptest.Span {
	out := make([]otlptest.Span, len(spans))
	for i, s := range spans {
		out[i] = otlptest.Span{Service: s.Service, Name: s.Name}
	}
	return out
}
