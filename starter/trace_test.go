package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
)

// otlpReceiver is an OTLP/gRPC trace receiver, as a collector runs one:
// it keeps the spans' trace and span ids by name and service.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service, name   string
	traceID, spanID []byte
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{service: service, name: s.GetName(), traceID: s.GetTraceId(), spanID: s.GetSpanId()})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestRunTraced: with OTEL_EXPORTER_OTLP_ENDPOINT set, `starter run`
// exports its StartWorkflow span as agentflow-starter before it exits, and
// the worker's workflow span continues the starter's trace.
func TestRunTraced(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	rec := &otlpReceiver{}
	coltracepb.RegisterTraceServiceServer(srv, rec)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

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
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k))
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"run", "--tenant", "demo", "--address", ts.Address, "--namespace", ts.Namespace,
		"--task-queue", ts.TaskQueue, "What is 6 * 7?"}, &out), out.String())
	require.Contains(t, out.String(), "Forty-two.")

	// run returned: its spans are exported.
	rec.mu.Lock()
	var start *receivedSpan
	for i, s := range rec.spans {
		if s.name == "StartWorkflow:"+contract.AgentTurn {
			start = &rec.spans[i]
		}
	}
	rec.mu.Unlock()
	require.NotNil(t, start, "the starter exported no StartWorkflow span")
	require.Equal(t, "agentflow-starter", start.service)

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
	require.Equal(t, trace.TraceID(start.traceID), wf.SpanContext.TraceID())
	require.Equal(t, trace.SpanID(start.spanID), wf.Parent.SpanID())
}
