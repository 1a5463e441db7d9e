package devstack

import (
	"context"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// nexusOptions are the other team's namespace and the endpoint into it
// that the tests ask a stack for.
var nexusOptions = struct {
	namespaces []string
	endpoints  []NexusEndpoint
}{[]string{"teams"}, []NexusEndpoint{{Name: "echo", Namespace: "teams", TaskQueue: "echo-handlers"}}}

// requireAsyncNexus runs an async Nexus operation across the stack's
// namespaces, as the nexus tool kind does: a workflow in the stack's
// namespace calls, through the endpoint the stack made, an operation
// backed by a workflow in "teams", whose completion comes back by the
// server's callback. A server without the callback's settings fails it.
func requireAsyncNexus(ctx context.Context, t *testing.T, s *Stack) {
	t.Helper()
	list, err := dial(ctx, t, s, s.Namespace).OperatorService().ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: "echo"})
	require.NoError(t, err)
	require.Len(t, list.GetEndpoints(), 1, "the stack made the endpoint")
	require.Equal(t, "teams", list.GetEndpoints()[0].GetSpec().GetTarget().GetWorker().GetNamespace())

	echo := func(ctx workflow.Context, in string) (string, error) { return "echo " + in, nil }
	op := temporalnexus.NewWorkflowRunOperation("echo", echo, func(_ context.Context, in string, o nexus.StartOperationOptions) (client.StartWorkflowOptions, error) {
		return client.StartWorkflowOptions{ID: "echo-" + o.RequestID}, nil
	})
	svc := nexus.NewService("echo")
	require.NoError(t, svc.Register(op))
	handlers := worker.New(dial(ctx, t, s, "teams"), "echo-handlers", worker.Options{})
	handlers.RegisterNexusService(svc)
	handlers.RegisterWorkflowWithOptions(echo, workflow.RegisterOptions{Name: "Echo"})
	require.NoError(t, handlers.Start())
	t.Cleanup(handlers.Stop)

	caller := func(ctx workflow.Context, in string) (string, error) {
		var out string
		f := workflow.NewNexusClient("echo", "echo").ExecuteOperation(ctx, "echo", in, workflow.NexusOperationOptions{ScheduleToCloseTimeout: time.Minute})
		return out, f.Get(ctx, &out)
	}
	c := dial(ctx, t, s, s.Namespace)
	callers := worker.New(c, "echo-callers", worker.Options{})
	callers.RegisterWorkflowWithOptions(caller, workflow.RegisterOptions{Name: "CallEcho"})
	require.NoError(t, callers.Start())
	t.Cleanup(callers.Stop)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "echo-callers"}, "CallEcho", "hi")
	require.NoError(t, err)
	var got string
	require.NoError(t, run.Get(ctx, &got))
	require.Equal(t, "echo hi", got)
}

func dial(ctx context.Context, t *testing.T, s *Stack, namespace string) client.Client {
	t.Helper()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.TemporalAddress, Namespace: namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
