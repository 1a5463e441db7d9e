package devstack

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"
)

// TestTemporalServer runs the real Temporal server on the stack's Postgres,
// runs a workflow with a search attribute on it, and starts it again on
// the same state: the workflow is still there.
func TestTemporalServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := stateDir(t)
	opts := Options{Dir: dir, TemporalPort: -1, Namespace: "agentflow-server", TemporalServer: true,
		Logger: zaptest.NewLogger(t), Namespaces: nexusOptions.namespaces, NexusEndpoints: nexusOptions.endpoints}

	echo := func(ctx workflow.Context, s string) (string, error) { return "echo " + s, nil }
	for run := range 2 {
		s, err := Start(ctx, opts)
		require.NoError(t, err, "run %d", run)
		require.NotEmpty(t, s.DatabaseURL)
		require.Empty(t, s.UIURL, "the real server has no Web UI")
		requireHTTPAPI(t, s.TemporalHTTPAddress, s.Namespace)

		c, err := client.DialContext(ctx, client.Options{HostPort: s.TemporalAddress, Namespace: s.Namespace})
		require.NoError(t, err)
		attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace})
		require.NoError(t, err)
		for _, name := range searchAttributes() {
			require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, attrs.GetCustomAttributes()[name], name)
		}

		if run == 0 {
			requireAsyncNexus(ctx, t, s)
			w := worker.New(c, "devstack-server-test", worker.Options{})
			w.RegisterWorkflowWithOptions(echo, workflow.RegisterOptions{Name: "Echo"})
			require.NoError(t, w.Start())
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "echo-1", TaskQueue: "devstack-server-test"}, "Echo", "hi")
			require.NoError(t, err)
			var got string
			require.NoError(t, run.Get(ctx, &got))
			require.Equal(t, "echo hi", got)
			w.Stop()
		} else {
			d, err := c.DescribeWorkflowExecution(ctx, "echo-1", "")
			require.NoError(t, err, "state kept across restarts")
			require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.GetWorkflowExecutionInfo().GetStatus())

			// Both services come back after a crash, on the same state.
			require.NoError(t, s.Restart(ctx, ServicePostgres, time.Second))
			require.NoError(t, s.Restart(ctx, ServiceTemporal, 0))
			require.ErrorContains(t, s.Restart(ctx, "ui", 0), `unknown service "ui"`)
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				_, err := c.DescribeWorkflowExecution(ctx, "echo-1", "")
				assert.NoError(ct, err)
			}, time.Minute, 200*time.Millisecond)
		}
		c.Close()
		require.NoError(t, s.Stop())
	}
}
