// Package asked carries who asked for a tool call to the code of a team
// that runs it on its own worker (an activity tool's): the tenant, the
// person or client the turn answers, the turn and the call, and the key a
// write of the call is made under. It travels as a Temporal header,
// HeaderKey, which a context propagator writes from the turn's workflow
// and reads in the team's worker: never a credential, only names, so the
// team's code can scope and key what it does, and audit who asked.
//
// A worker in Go registers Propagator on its client and reads Of(ctx) in
// its activity; a worker of another SDK reads the header itself: one
// payload, JSON (encoding json/plain) of Asked.
package asked

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/interceptor"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// HeaderKey is the header the turn writes on each call it schedules on a
// team's worker.
const HeaderKey = "agentflow-asked"

// Asked is who asked for a call, and which call it is.
type Asked struct {
	TenantID string `json:"tenant_id"`
	// Caller names whom the turn answers (its credential's name, issuer
	// and subject; never the credential); empty for a turn started
	// through Temporal directly.
	Caller  string `json:"caller,omitempty"`
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	AgentID string `json:"agent_id"`
	// TurnID is the turn's workflow id; JobID its job.
	TurnID string `json:"turn_id"`
	JobID  string `json:"job_id"`
	// CallID is the model's id of the call, Tool the tool's name.
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Key names the call once for every attempt of it: what a write it
	// makes is keyed by, so that a retried attempt does not make it twice.
	Key string `json:"key"`
}

type key struct{}

// With is ctx carrying who asked, for the calls scheduled under it.
func With(ctx workflow.Context, a Asked) workflow.Context {
	return workflow.WithValue(ctx, key{}, a)
}

// Of is who asked for the call whose activity runs under ctx, as the
// turn sent it; false when the call came with no such header (or the
// worker's client has no Propagator).
func Of(ctx context.Context) (Asked, bool) {
	a, ok := ctx.Value(key{}).(Asked)
	return a, ok
}

// Propagator writes the header from a turn's workflow context and reads
// it into an activity's context.
func Propagator() workflow.ContextPropagator { return propagator{} }

type propagator struct{}

var dc = converter.GetDefaultDataConverter()

// Inject writes nothing from a client's context: only a turn says who
// asked.
func (propagator) Inject(context.Context, workflow.HeaderWriter) error { return nil }

func (propagator) Extract(ctx context.Context, r workflow.HeaderReader) (context.Context, error) {
	p, ok := r.Get(HeaderKey)
	if !ok {
		return ctx, nil
	}
	var a Asked
	if err := dc.FromPayload(p, &a); err != nil {
		return ctx, nil // a header that does not decode says nothing
	}
	return context.WithValue(ctx, key{}, a), nil
}

func (propagator) InjectFromWorkflow(ctx workflow.Context, w workflow.HeaderWriter) error {
	a, ok := ctx.Value(key{}).(Asked)
	if !ok {
		return nil
	}
	p, err := dc.ToPayload(a)
	if err != nil {
		return err
	}
	w.Set(HeaderKey, p)
	return nil
}

// ExtractToWorkflow tells a workflow tool's child who asked (OfWorkflow);
// the workflow's own activities and children then carry it on.
func (propagator) ExtractToWorkflow(ctx workflow.Context, r workflow.HeaderReader) (workflow.Context, error) {
	p, ok := r.Get(HeaderKey)
	if !ok {
		return ctx, nil
	}
	var a Asked
	if err := dc.FromPayload(p, &a); err != nil {
		return ctx, nil // a header that does not decode says nothing
	}
	return With(ctx, a), nil
}

// OfWorkflow is who asked for the call a workflow tool's child runs
// under ctx, when its worker has the Propagator.
func OfWorkflow(ctx workflow.Context) (Asked, bool) {
	a, ok := ctx.Value(key{}).(Asked)
	return a, ok
}

// Interceptor is the worker interceptor that tells a Nexus operation who
// asked: Temporal headers do not cross a Nexus endpoint, so the turn's
// Nexus calls carry the same JSON as a Nexus header (HeaderKey), read by
// the handler with OfNexus.
func Interceptor() interceptor.WorkerInterceptor { return &workerInterceptor{} }

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
}

func (*workerInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &inbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type inbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *inbound) Init(next interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&nexusOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: next}})
}

type nexusOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *nexusOutbound) ExecuteNexusOperation(ctx workflow.Context, in interceptor.ExecuteNexusOperationInput) workflow.NexusOperationFuture {
	if a, ok := OfWorkflow(ctx); ok {
		if b, err := json.Marshal(a); err == nil {
			h := nexus.Header{}
			maps.Copy(h, in.NexusHeader)
			h.Set(HeaderKey, string(b))
			in.NexusHeader = h
		}
	}
	return o.Next.ExecuteNexusOperation(ctx, in)
}

// OfNexus is who asked for the Nexus operation whose request carried
// header h; false when it says nothing.
func OfNexus(h nexus.Header) (Asked, bool) {
	v := h.Get(HeaderKey)
	if v == "" {
		return Asked{}, false
	}
	var a Asked
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		return Asked{}, false
	}
	return a, true
}
