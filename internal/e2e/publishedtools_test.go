package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// publishedCatalog names the team's activity and nothing else: its
// description and parameters are what the team's worker publishes.
const publishedCatalog = `
tenant: demo
default_agent: clerk
tools:
  - name: lookup_order
    kind: activity
    approval: never
    config: {task_queue: QUEUE, activity_type: LookupOrder}
agents:
  - id: clerk
    model: openai:gpt-4o-mini
    tools: [lookup_order]
    limits: {max_iterations: 4}
`

// TestPublishedActivityTools: the team's Go worker registers its activity
// as a tool with agentflow.RegisterActivityTools (the schema from the
// argument's Go type); a catalog entry that names only the queue and the
// type takes the description and parameters it publishes when applied,
// the model is shown them, and the turn checks the call's arguments
// against them. An entry naming an activity the worker does not publish
// is refused, saying what it publishes.
func TestPublishedActivityTools(t *testing.T) {
	queue := "published-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:*")
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: activityToolScript, TemporalAllow: allow})

	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace,
		ContextPropagators: []workflow.ContextPropagator{agentflow.AskedPropagator()}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	type lookupIn struct {
		OrderID string `json:"order_id" jsonschema:"the order's id, as on the receipt"`
	}
	w := worker.New(c, queue, worker.Options{})
	agentflow.RegisterActivityTools(w, agentflow.NewActivityTool("LookupOrder", "Looks an order up by its id: its status and total.",
		func(_ context.Context, in lookupIn) (map[string]any, error) {
			return map[string]any{"order_id": in.OrderID, "status": "shipped"}, nil
		}))
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	doc := strings.ReplaceAll(publishedCatalog, "QUEUE", queue)
	srv.ApplyCatalog(t, doc)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
		TenantID: "demo", Prompt: "Where is order A17?", JobID: "published-" + testserver.RandomID()})
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, "It has shipped.", res.Output, "%+v", res.Error)
	shown := srv.Model.Requests()[0].ToolsJSON
	require.Contains(t, shown, "Looks an order up by its id", "the model is shown the published description")
	require.Contains(t, shown, "the order's id, as on the receipt", "and the schema made from the Go type")

	err = testserver.ApplyCatalogs(ctx, srv.Store(), srv.Tools(), strings.ReplaceAll(doc, "activity_type: LookupOrder", "activity_type: CancelOrder"))
	require.ErrorContains(t, err, `the worker on task queue "`+queue+`" publishes no tool for activity "CancelOrder" (it publishes: LookupOrder)`)
}
