package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/internal/telemetry"
)

// TestReplayEmitsNoSpans replays every recorded history through the
// worker's tracing interceptor: a replay redoes work whose spans were
// emitted when it first ran, so it must end none. The SDK's interceptor
// alone ends each replayed workflow's RunWorkflow span again, which is
// why the worker's is wrapped (telemetry.NewTemporalInterceptor).
func TestReplayEmitsNoSpans(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no saved histories in testdata/")
	replay := func(t *testing.T, f string, i interceptor.Interceptor, rec *tracetest.SpanRecorder) []string {
		t.Helper()
		r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
			Interceptors: []interceptor.WorkerInterceptor{i},
		})
		require.NoError(t, err)
		Register(r)
		replayFile(t, r, f)
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name())
		}
		return names
	}
	sdkAlone := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			i, err := telemetry.NewTemporalInterceptor(tp)
			require.NoError(t, err)
			require.Empty(t, replay(t, f, i, rec), "spans ended on replay")

			// The same history through the SDK's interceptor alone, to
			// show the test would see a span replay emits.
			rec = tracetest.NewSpanRecorder()
			tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			i, err = temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("test")})
			require.NoError(t, err)
			sdkAlone += len(replay(t, f, i, rec))
		})
	}
	// Only the histories of workflows that returned end a RunWorkflow
	// span through the SDK's interceptor alone, but most of them did.
	require.Greater(t, sdkAlone, len(files)/2, "the SDK's interceptor alone ended too few spans on replay for this test to mean anything")
}
