package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/temporaltool"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// TestWaitingToolsAgentflowWorkerKilled: agentflow's worker is SIGKILLed
// while a turn waits on a tool that waits for a person, a child workflow
// on the team's queue and an async Nexus operation in the team's
// namespace; the turn goes on on the worker started in its place, keeps
// waiting on the call it made, and takes its result when the person
// answers. The far side holds one workflow for the call: the new worker
// did not start it again.
func TestWaitingToolsAgentflowWorkerKilled(t *testing.T) {
	release := func(ctx workflow.Context) (string, error) {
		var said string
		workflow.GetSignalChannel(ctx, "decide").Receive(ctx, &said)
		return said, nil
	}
	for _, tc := range []struct {
		kind, script, prompt, want string
		// serve starts the team's side on queue and returns the
		// namespace it runs the waiting workflows in, the allow rule,
		// and the catalog.
		serve func(t *testing.T, p *procEnv, queue string) (namespace, allow, catalog string)
	}{{
		kind: "workflow", script: workflowToolScript, prompt: "Refund order A17.", want: "The desk said: refund A17 approved",
		serve: func(t *testing.T, p *procEnv, queue string) (string, string, string) {
			w := worker.New(p.client, queue, worker.Options{})
			w.RegisterWorkflowWithOptions(func(ctx workflow.Context, in struct {
				OrderID string `json:"order_id"`
			}) (string, error) {
				said, err := release(ctx)
				return "refund " + in.OrderID + " " + said, err
			}, workflow.RegisterOptions{Name: "AwaitRefund"})
			require.NoError(t, w.Start())
			t.Cleanup(w.Stop)
			return p.namespace, "demo=task_queue:" + queue + "+workflow:AwaitRefund", strings.ReplaceAll(workflowToolCatalog, "QUEUE", queue)
		},
	}, {
		kind: "nexus", script: nexusToolScript, prompt: "Hold order B2.", want: "The orders team said: order B2 released: approved",
		serve: func(t *testing.T, p *procEnv, queue string) (string, string, string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, devstack.EnsureNamespace(ctx, p.address, nexusHandlers))
			require.NoError(t, devstack.EnsureNexusEndpoint(ctx, p.client, devstack.NexusEndpoint{Name: queue, Namespace: nexusHandlers, TaskQueue: queue}))
			hc, err := client.Dial(client.Options{HostPort: p.address, Namespace: nexusHandlers})
			require.NoError(t, err)
			t.Cleanup(hc.Close)
			type order struct {
				OrderID string `json:"order_id"`
			}
			holdOrder := func(ctx workflow.Context, in order) (string, error) {
				said, err := release(ctx)
				return "order " + in.OrderID + " released: " + said, err
			}
			svc := nexus.NewService("orders")
			require.NoError(t, svc.Register(temporalnexus.NewWorkflowRunOperation("hold", holdOrder,
				func(_ context.Context, in order, o nexus.StartOperationOptions) (client.StartWorkflowOptions, error) {
					return client.StartWorkflowOptions{ID: "hold-" + in.OrderID + "-" + o.RequestID}, nil
				})))
			w := worker.New(hc, queue, worker.Options{})
			w.RegisterNexusService(svc)
			w.RegisterWorkflowWithOptions(holdOrder, workflow.RegisterOptions{Name: "HoldOrder"})
			require.NoError(t, w.Start())
			t.Cleanup(w.Stop)
			return nexusHandlers, "demo=nexus_endpoint:" + queue, strings.ReplaceAll(nexusToolCatalog, "ENDPOINT", queue)
		},
	}} {
		t.Run(tc.kind, func(t *testing.T) {
			queue := "waits-" + testserver.RandomID()
			p := newProcEnv(t, tc.script)
			namespace, rule, catalog := tc.serve(t, p, queue)
			p.applyTemporalCatalog(t, rule, catalog)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			team, err := client.Dial(client.Options{HostPort: p.address, Namespace: namespace})
			require.NoError(t, err)
			t.Cleanup(team.Close)
			waiting := func() []string {
				list, err := team.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
					Namespace: namespace, Query: "TaskQueue = '" + queue + "'"})
				require.NoError(t, err)
				var ids []string
				for _, e := range list.GetExecutions() {
					ids = append(ids, e.GetExecution().GetWorkflowId())
				}
				return ids
			}

			first := p.startWorker()
			run, err := turnclient.Start(ctx, p.client, p.queue, agent.TurnRequest{Version: agent.ProtocolVersion,
				TenantID: "demo", Prompt: tc.prompt, JobID: "waits-" + testserver.RandomID()})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return len(waiting()) == 1 }, time.Minute, 200*time.Millisecond,
				"the team's workflow waits for a person")
			require.NoError(t, first.Process.Signal(syscall.SIGKILL))
			_ = first.Wait()
			p.startWorker()
			held := waiting()
			require.NoError(t, team.SignalWorkflow(ctx, held[0], "", "decide", "approved"))

			res, err := turnclient.Result(ctx, run)
			require.NoError(t, err)
			require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
			require.Contains(t, res.Output, tc.want)
			require.Equal(t, held, waiting(), "one workflow for the call at the far side")
		})
	}
}

// applyTemporalCatalog opens what rule allows (AGENTFLOW_TEMPORAL_ALLOW)
// to the workers started after it and applies catalog with the kinds
// that rule lets name it.
func (p *procEnv) applyTemporalCatalog(t *testing.T, rule, catalog string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.environ = append(p.environ, "AGENTFLOW_TEMPORAL_ALLOW="+rule)
	allow, err := reach.Parse(rule)
	require.NoError(t, err)
	st, err := store.Open(ctx, p.dbURL, store.Options{Logger: p.logger})
	require.NoError(t, err)
	defer st.Close()
	kinds, err := tools.NewRegistry(tools.Deps{Logger: p.logger}, append(tools.Builtin(), temporaltool.Kinds(allow)...)...)
	require.NoError(t, err)
	require.NoError(t, testserver.ApplyCatalogs(ctx, st, kinds, catalog))
}
