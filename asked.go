package agentflow

import (
	"context"

	"github.com/nexus-rpc/sdk-go/nexus"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/asked"
)

// Asked is who asked for a call of an activity tool, as your activity is
// told: the tenant, whom the turn answers (names, never a credential),
// the agent, the turn, the call, and the key a write it makes should be
// keyed by, the same for every attempt of the call.
type Asked = asked.Asked

// AskedPropagator reads who asked into your activities' context: give it
// to your worker's client (client.Options.ContextPropagators), then call
// WhoAsked in an activity. Other SDKs read the header themselves:
// AskedHeader, one JSON payload of Asked.
func AskedPropagator() workflow.ContextPropagator { return asked.Propagator() }

// AskedHeader is the Temporal header an activity tool's call carries.
const AskedHeader = asked.HeaderKey

// WhoAsked is who asked for the call whose activity runs under ctx; false
// when it carries no such header, or your client has no AskedPropagator.
func WhoAsked(ctx context.Context) (Asked, bool) { return asked.Of(ctx) }

// WhoAskedWorkflow is WhoAsked in a workflow tool's child workflow.
func WhoAskedWorkflow(ctx workflow.Context) (Asked, bool) { return asked.OfWorkflow(ctx) }

// WhoAskedNexus is WhoAsked in the handler of a nexus tool's operation,
// from its request's header (nexus.StartOperationOptions.Header): the
// same JSON under AskedHeader, since Temporal headers do not cross a
// Nexus endpoint.
func WhoAskedNexus(h nexus.Header) (Asked, bool) { return asked.OfNexus(h) }
