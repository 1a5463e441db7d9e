package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/telemetry/otlptest"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestRunTraced: with OTEL_EXPORTER_OTLP_ENDPOINT set, `starter run`
// exports its StartWorkflow span as agentflow-starter before it exits, and
// the worker's workflow span continues the starter's trace.
func TestRunTraced(t *testing.T) {
	rec := otlptest.Start(t)

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ts := testserver.Start(t, testserver.Options{Script: `
rules:
  - when: {user: 'What is'}
    reply: {text: 'Forty-two.'}
`, Catalogs: []string{`
tenant: demo
default_agent: assistant
agents:
  - id: assistant
    model: openai:gpt-4o-mini
`}, TracerProvider: tp})

	// Set after the test server started: the Temporal dev server the test
	// binary starts reads OTEL_* variables too.
	otlptest.ClearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+rec.Addr)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"run", "--tenant", "demo", "--address", ts.Address, "--namespace", ts.Namespace,
		"--task-queue", ts.TaskQueue, "What is 6 * 7?"}, &out), out.String())
	require.Contains(t, out.String(), "Forty-two.")

	// run returned: its spans are exported.
	var start *otlptest.Span
	for _, s := range rec.Spans() {
		if s.Name == "StartWorkflow:"+contract.AgentTurn {
			start = &s
		}
	}
	require.NotNil(t, start, "the starter exported no StartWorkflow span")
	require.Equal(t, "agentflow-starter", start.Service)

	var wf tracetest.SpanStub
	require.Eventually(t, func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "RunWorkflow:"+contract.AgentTurn {
				wf = s
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, trace.TraceID(start.TraceID), wf.SpanContext.TraceID())
	require.Equal(t, trace.SpanID(start.SpanID), wf.Parent.SpanID())
}
