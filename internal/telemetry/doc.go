// Package telemetry gives agentflow's processes OpenTelemetry tracing: a
// tracer provider built from the standard OTEL_* variables (OTLP over
// gRPC when an endpoint is set, nothing at all otherwise), the W3C
// trace-context propagator, Temporal's tracing interceptor made safe for
// replay (a replayed workflow emits no span a second time), the gRPC
// server's stats handler, and trace ids for log lines.
//
// It imports nothing of agentflow's, so that every process and package can
// use it without a cycle.
//
// One trace runs from a gRPC call through the workflow it starts to every
// activity of that workflow: the gateway's server span is the parent of
// the client's StartWorkflow span, whose context travels in the
// workflow's header to RunWorkflow, StartActivity and RunActivity; model
// and tool calls inside activities are children of RunActivity (see
// package activities).
package telemetry
