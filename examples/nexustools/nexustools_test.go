package nexustools_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/examples/nexustools"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// script is the model: it tracks a parcel or holds a shipment, and
// answers from what the warehouse's operation returned.
const script = `
rules:
  - name: track
    when: {user: '(?i)where is order (\w+)'}
    reply: {tool_calls: [{name: track_parcel, arguments: '{"order_id": "$1"}'}]}
  - name: hold
    when: {user: '(?i)hold order (\w+)'}
    reply: {tool_calls: [{name: hold_shipment, arguments: '{"order_id": "$1"}'}]}
  - name: released
    when: {tool: '"note":"([^"]+)"'}
    reply: {text: 'Released: $1'}
  - name: status
    when: {tool: '"status":"([^"]+)","carrier":"(\w+)"'}
    reply: {text: 'It is $1, with $2.'}
`

// TestNexusTools runs the example as `task up` runs it: the warehouse
// team's worker, a process of its own in the team's namespace, serves the
// catalog's two nexus tools behind an endpoint. A parcel is tracked; a
// hold, once a person approved it, waits in the team's namespace for the
// warehouse's release while the team's worker is SIGKILLed and another
// started; the release reaches the turn, and the far side holds one
// HoldShipment for the call.
func TestNexusTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	catalog, err := os.ReadFile("catalog.yaml")
	require.NoError(t, err)
	id := testserver.RandomID()
	endpoint, queue := "warehouse-"+id, "warehouse-"+id
	allow, err := reach.Parse("demo=nexus_endpoint:" + endpoint)
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: script, TemporalAllow: allow,
		Catalogs: []string{strings.ReplaceAll(string(catalog), "endpoint: warehouse,", "endpoint: "+endpoint+",")}})
	// What `task up` makes: the team's namespace and the endpoint into it.
	require.NoError(t, devstack.EnsureNamespace(ctx, srv.Address, nexustools.Namespace))
	require.NoError(t, devstack.EnsureNexusEndpoint(ctx, srv.Client(), devstack.NexusEndpoint{Name: endpoint, Namespace: nexustools.Namespace, TaskQueue: queue}))
	team, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: nexustools.Namespace})
	require.NoError(t, err)
	t.Cleanup(team.Close)

	bin := filepath.Join(t.TempDir(), "warehouse-worker")
	build := exec.Command("go", "build", "-o", bin, "./worker")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	start := func() *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+srv.Address, "WAREHOUSE_TASK_QUEUE="+queue)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	first := start()

	ask := func(prompt string) string {
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "demo", Prompt: prompt, JobID: "shipping-" + testserver.RandomID()})
		require.NoError(t, err)
		return run.GetID()
	}
	result := func(id string) agent.TurnResult {
		res, err := turnclient.Result(ctx, srv.Client().GetWorkflow(ctx, id, ""))
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
		return res
	}
	require.Equal(t, "It is at the warehouse, with DHL.", result(ask("Where is order A17?")).Output)

	turn := ask("Please hold order A17.")
	var pending []agent.PendingApproval
	require.Eventually(t, func() bool {
		pending, err = turnclient.PendingApprovals(ctx, srv.Client(), turn)
		return err == nil && len(pending) == 1
	}, time.Minute, 100*time.Millisecond, "a hold waits for a person")
	_, err = turnclient.Approve(ctx, srv.Client(), turn, agent.ApprovalDecision{CallID: pending[0].CallID, ApprovalID: pending[0].ApprovalID, Approved: true, Approver: "ana"})
	require.NoError(t, err)
	holds := func() []string {
		list, err := team.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: nexustools.Namespace, Query: "WorkflowType = 'HoldShipment'"})
		require.NoError(t, err)
		var ids []string
		for _, e := range list.GetExecutions() {
			if strings.HasPrefix(e.GetExecution().GetWorkflowId(), "hold-A17-") {
				ids = append(ids, e.GetExecution().GetWorkflowId())
			}
		}
		return ids
	}
	require.Eventually(t, func() bool { return len(holds()) == 1 }, time.Minute, 200*time.Millisecond,
		"the hold's workflow starts in the team's namespace")

	// The team's worker dies while the hold waits; another takes its place.
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	start()
	held := holds()[0]
	require.NoError(t, team.SignalWorkflow(ctx, held, "", nexustools.ReleaseSignal, "customs cleared"))

	res := result(turn)
	require.Equal(t, "Released: customs cleared", res.Output)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.Equal(t, []string{held}, holds(), fmt.Sprintf("one hold for the call, at the far side (turn %s)", turn))
}
