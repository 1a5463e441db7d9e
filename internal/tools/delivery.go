package tools

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/jqproc"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// The delivery rule. Whether a retried call may send again a write an
// earlier attempt may have sent (internal/effects) follows the far side,
// wherever the tool comes from:
//
//   - catalog and toolkit: the entry's `delivery`, else at most once
//     (agent.DeliveryAtMostOnce), for every kind;
//   - an entry's derived tools: the entry's delivery when it wrote one,
//     else the derived tool's own (DerivedDelivery): an MCP tool annotated
//     readOnlyHint or idempotentHint is idempotent (mcptool);
//   - per request, at the egress transport: a method idempotent by
//     definition (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) and an OpenAPI
//     operation that declares an Idempotency-Key header (which the call
//     sends, the same on every attempt) are sent again; other writes are
//     gated (effects.Gate).
//
// ExecuteTool gives a call of a tool delivered at most once a gate; the
// egress transport asks it before every write, and the MCP kind before
// every tools/call, over any transport.

// CallKey is a call's idempotency key: the same on every attempt of the
// call, and another for every other call (kind.CallKey, which the
// openapi_action kind sends as its Idempotency-Key).
func CallKey(tenantID, jobID, callID string) string { return kind.CallKey(tenantID, jobID, callID) }

// DerivedDelivery is the delivery of a tool that an entry stands for
// (Kind.Resolve's output): the entry's when the catalog wrote one, else
// the derived tool's own.
func DerivedDelivery(entry, derived string) string {
	return cmp.Or(entry, derived)
}

// Reconcile runs one of a reconciled tool's jq programs
// (agent.ToolReconcile) over input, in the registry's jq pool, and
// returns its first output; ok is false when it has none.
func (r *Registry) Reconcile(ctx context.Context, query string, input any) (out any, ok bool, err error) {
	pool := r.deps.JQ
	if pool == nil {
		pool = sharedJQ()
	}
	for v, err := range pool.Run(ctx, jqproc.Program{Query: query, Input: input, Timeout: reconcileJQTimeout, MaxBytes: agent.MaxToolArgumentBytes}) {
		if err != nil {
			return nil, false, err
		}
		return v, true, nil
	}
	return nil, false, nil
}

// reconcileJQTimeout bounds one of a reconcile's jq programs: they make
// a call's arguments and read a yes or no.
const reconcileJQTimeout = 5 * time.Second

// sharedJQ runs the reconcile programs of a registry built without a jq
// pool: one pool per process.
var sharedJQ = sync.OnceValue(func() *jqproc.Pool { return jqproc.New(jqproc.Options{}) })
