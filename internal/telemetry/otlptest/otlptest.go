// Package otlptest is an OTLP/gRPC trace receiver, as a collector runs
// one, and the OTEL_* variables cleared, for tests of what processes
// export. Only tests import it.
//
// It imports nothing of agentflow's.
package otlptest

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// Vars are the OTEL_* variables agentflow's tracing reads.
var Vars = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
}

// ClearEnv unsets Vars for the test (they are restored after it). Unset,
// not empty: an empty OTEL_TRACES_EXPORTER is an error to some readers.
func ClearEnv(t testing.TB) {
	t.Helper()
	for _, v := range Vars {
		t.Setenv(v, "")
		if err := os.Unsetenv(v); err != nil {
			t.Fatalf("otlptest: %v", err)
		}
	}
}

// Span is a span the receiver got.
type Span struct {
	Service, Name   string
	TraceID, SpanID []byte
}

// Receiver receives spans until the test ends.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	// Addr is the receiver's host:port.
	Addr  string
	mu    sync.Mutex
	spans []Span
}

// Start serves a Receiver on a free port until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: %v", err)
	}
	srv := grpc.NewServer()
	r := &Receiver{Addr: ln.Addr().String()}
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

// Export takes an exporter's batch.
func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
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
				r.spans = append(r.spans, Span{Service: service, Name: s.GetName(), TraceID: s.GetTraceId(), SpanID: s.GetSpanId()})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Spans are the spans received so far, in order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}
