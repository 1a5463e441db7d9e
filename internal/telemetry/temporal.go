package telemetry

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// NewTemporalInterceptor is Temporal's OpenTelemetry tracing interceptor
// on tp's tracer, with the W3C propagator, made safe for replay. Signals
// and queries are not traced; updates (approvals) are.
//
// The SDK's interceptor leaves out the workflow spans it starts while
// replaying, except the two that wrap a whole handler: RunWorkflow and
// HandleUpdate. Those it starts whenever the handler runs, so a worker
// that replays a history (after a restart, when its cache evicted the
// workflow, or to answer a query on a closed workflow) would end them a
// second time. Here such a span is ended only when the handler returned
// outside replay; one that returned while replaying, or never returned
// (its coroutine torn down on eviction), is dropped.
func NewTemporalInterceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:            tp.Tracer(ScopeName + "/temporal"),
		TextMapPropagator: Propagator,
		DisableBaggage:    true,
		// A streamed reply signals its turn a token batch several times a
		// second, and queries only read: a turn's trace is its work.
		DisableSignalTracing: true,
		DisableQueryTracing:  true,
		SpanStarter:          startSpan,
	})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	return &replaySafe{Interceptor: i}, nil
}

// startSpan starts the SDK interceptor's spans, those of whole workflow
// handlers as handlerSpans.
func startSpan(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
	_, span := t.Start(ctx, name, opts...)
	if strings.HasPrefix(name, "RunWorkflow:") || strings.HasPrefix(name, "HandleUpdate:") {
		return &handlerSpan{Span: span}
	}
	return span
}

// handlerSpan is the span of a workflow handler; guard tells it how the
// handler ended.
type handlerSpan struct {
	trace.Span
	replaying func() bool // nil until guard ran
	abandoned bool        // the handler did not return
}

// End ends the span unless it belongs to a replay or a torn down
// handler. An unended span is never exported.
func (s *handlerSpan) End(opts ...trace.SpanEndOption) {
	if s.abandoned || (s.replaying != nil && s.replaying()) {
		return
	}
	s.Span.End(opts...)
}

// replaySafe is the SDK's tracing interceptor with a guard inside each
// workflow's tracing inbound interceptor, where the handler's span is in
// the context.
type replaySafe struct {
	interceptor.Interceptor
}

func (r *replaySafe) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return r.Interceptor.InterceptWorkflow(ctx, &guard{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}})
}

type guard struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (g *guard) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return guarded(ctx, func() (any, error) { return g.Next.ExecuteWorkflow(ctx, in) })
}

func (g *guard) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	return guarded(ctx, func() (any, error) { return g.Next.ExecuteUpdate(ctx, in) })
}

// guarded runs a handler and marks its span abandoned when the handler
// does not return (see watch).
func guarded(ctx workflow.Context, handler func() (any, error)) (any, error) {
	abandon, done := watch(ctx), false
	defer func() {
		if !done {
			abandon()
		}
	}()
	ret, err := handler()
	done = true
	return ret, err
}

// watch has ctx's handler span ask the workflow whether it is replaying
// when it ends, and returns what marks it abandoned: the guard calls that
// only when the handler did not return (a panic, or the coroutine torn
// down when the workflow leaves the cache).
func watch(ctx workflow.Context) (abandon func()) {
	span, _ := temporalotel.SpanFromWorkflowContext(ctx)
	hs, ok := span.(*handlerSpan)
	if !ok {
		return func() {}
	}
	hs.replaying = func() bool { return workflow.IsReplaying(ctx) }
	return func() { hs.abandoned = true }
}
