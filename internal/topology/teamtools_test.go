package topology

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/examples/nexustools"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/nodeclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// teamScript is the model: each prompt calls one of the teams' tools, and
// the answer says what the tool returned.
const teamScript = `
rules:
  - {name: lookup, when: {user: '(?i)^where is order (\w+)'}, reply: {tool_calls: [{name: lookup_order, arguments: '{"order_id": "$1"}'}]}}
  - {name: ts, when: {user: '(?i)^ask typescript about order (\w+)'}, reply: {tool_calls: [{name: ts_lookup, arguments: '{"order_id": "$1"}'}]}}
  - {name: refund, when: {user: '(?i)^refund order (\w+)'}, reply: {tool_calls: [{name: refund, arguments: '{"order_id": "$1"}'}]}}
  - {name: track, when: {user: '(?i)^track order (\w+)'}, reply: {tool_calls: [{name: track_parcel, arguments: '{"order_id": "$1"}'}]}}
  - {name: hold, when: {user: '(?i)^hold order (\w+)'}, reply: {tool_calls: [{name: hold_shipment, arguments: '{"order_id": "$1"}'}]}}
  - {name: typescript, when: {tool: '"served_by":"typescript"'}, reply: {text: 'TypeScript says it has shipped.'}}
  - {name: carrier, when: {tool: '"carrier":"(\w+)"'}, reply: {text: 'It is with $1.'}}
  - {name: released, when: {tool: '"note":"([^"]+)"'}, reply: {text: 'Released: $1'}}
  - {name: desk, when: {tool: '(?s)^(refund .+)$'}, reply: {text: 'The desk said: $1'}}
  - {name: status, when: {tool: '"status":"(\w+)"'}, reply: {text: 'It is $1.'}}
`

// teamCatalog gives tenant acme's agent a tool of each kind on the teams'
// code: the orders team's Go and TypeScript activities, the refunds desk's
// workflow, and the warehouse's Nexus service (examples/nexustools). The
// writes need no approval here: approvals are the e2e tests'.
const teamCatalog = `
tenant: acme
default_agent: clerk
tools:
  - {name: lookup_order, kind: activity, description: Look an order up., approval: never, delivery: idempotent,
     parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]},
     config: {task_queue: orders-production, activity_type: LookupOrder, start_to_close_sec: 10}}
  - {name: ts_lookup, kind: activity, description: Look an order up in TypeScript., approval: never, delivery: idempotent,
     parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]},
     config: {task_queue: ts-orders-production, activity_type: LookupOrder, start_to_close_sec: 10}}
  - {name: refund, kind: workflow, description: Ask the refunds desk; it answers when a person decides., approval: never,
     parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]},
     config: {task_queue: refunds-production, workflow_type: AwaitRefund}}
  - {name: track_parcel, kind: nexus, description: Where a parcel is., approval: never,
     parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]},
     config: {endpoint: warehouse, service: warehouse, operation: track}}
  - {name: hold_shipment, kind: nexus, description: Hold a shipment until the warehouse releases it., approval: never,
     parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]},
     config: {endpoint: warehouse, service: warehouse, operation: hold, schedule_to_close_sec: 3600}}
agents:
  - {id: clerk, model: openai:gpt-4o-mini, tools: [lookup_order, ts_lookup, refund, track_parcel, hold_shipment], limits: {max_iterations: 4}}
`

// TestTeamToolsInProduction runs the teams' own code as tools on the
// production topology: agentflow's two workers and gateway as their own
// processes, configured by the environment (the operator's allow list in
// AGENTFLOW_TEMPORAL_ALLOW); the real Temporal server with the namespace
// "teams" and the endpoint "warehouse" that `task up --production` makes;
// the orders team's Go worker (examples/activitytools) and TypeScript
// worker, and the warehouse's Nexus worker (examples/nexustools), each a
// process of its own; the refunds desk's workflow on a worker of the
// test's. The catalog goes through the gateway (one naming a queue the
// operator did not open is refused). Turns streamed through the gateway
// call an activity in Go and in TypeScript, a sync and an async Nexus
// operation in the other namespace, and a child workflow that waits for a
// person; one of agentflow's workers is killed while the last two wait.
func TestTeamToolsInProduction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := topologyDir(t)
	script := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(script, []byte(teamScript), 0o644))
	top, err := Start(ctx, Options{
		Dir: dir, TemporalPort: -1, Logger: zaptest.NewLogger(t),
		Env: []string{"AGENTFLOW_SCRIPT=" + script, "AGENTFLOW_TOKENS=tok=acme:user+approver+admin:ops",
			"AGENTFLOW_TEMPORAL_ALLOW=acme=task_queue:orders-production+task_queue:ts-orders-production+activity:LookupOrder" +
				"+task_queue:refunds-production+workflow:AwaitRefund+nexus_endpoint:warehouse"},
		Namespaces:     []string{"teams"},
		NexusEndpoints: []devstack.NexusEndpoint{{Name: "warehouse", Namespace: "teams", TaskQueue: "warehouse-production"}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, top.Stop()) })
	address, namespace := top.Stack.TemporalAddress, top.Stack.Namespace

	goWorker(t, dir, "activitytools", "TEMPORAL_ADDRESS="+address, "TEMPORAL_NAMESPACE="+namespace,
		"ORDERS_TASK_QUEUE=orders-production", "ORDERS_LEDGER="+filepath.Join(dir, "refunds"))
	goWorker(t, dir, "nexustools", "TEMPORAL_ADDRESS="+address, "WAREHOUSE_TASK_QUEUE=warehouse-production")
	typeScriptWorker(t, "TEMPORAL_ADDRESS="+address, "TEMPORAL_NAMESPACE="+namespace, "ORDERS_TASK_QUEUE=ts-orders-production")
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	desk := worker.New(c, "refunds-production", worker.Options{})
	desk.RegisterWorkflowWithOptions(func(ctx workflow.Context, in struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		var said string
		workflow.GetSignalChannel(ctx, "decide").Receive(ctx, &said)
		return "refund " + in.OrderID + " " + said, nil
	}, workflow.RegisterOptions{Name: "AwaitRefund"})
	require.NoError(t, desk.Start())
	t.Cleanup(desk.Stop)

	conn, err := grpc.NewClient(top.Gateways[0].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok")
	// A queue the operator did not open is refused, naming the field.
	_, err = pb.NewCatalogServiceClient(conn).UpsertCatalog(ctx, &pb.UpsertCatalogRequest{Files: map[string]string{
		"acme.yaml": strings.Replace(teamCatalog, "task_queue: orders-production,", "task_queue: payroll,", 1)}})
	require.ErrorContains(t, err, `config.task_queue: task_queue "payroll" is not open to tenant "acme"`)
	_, err = pb.NewCatalogServiceClient(conn).UpsertCatalog(ctx, &pb.UpsertCatalogRequest{Files: map[string]string{"acme.yaml": teamCatalog}})
	require.NoError(t, err)

	ask := func(jobID, prompt string) string {
		t.Helper()
		st, err := pb.NewAgentServiceClient(conn).Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: jobID, Prompt: prompt}})
		require.NoError(t, err)
		var answer string
		for {
			ev, err := st.Recv()
			if err == io.EOF {
				return answer
			}
			require.NoError(t, err)
			if c := ev.GetContent(); c != nil {
				answer += c.GetBlockJson()
			}
			if s := ev.GetStatus(); s != nil && s.GetStatus() == pb.Status_STATUS_FAILED {
				t.Fatalf("turn failed: %v", ev)
			}
		}
	}
	require.Contains(t, ask("orders-1", "Where is order A17?"), "It is delivered.")
	require.Contains(t, ask("orders-2", "Ask TypeScript about order A17."), "TypeScript says it has shipped.")
	require.Contains(t, ask("track-1", "Track order A17."), "It is with DHL.")
	require.NoError(t, top.Workers[0].Kill())
	require.Contains(t, ask("orders-3", "Where is order A17?"), "It is delivered.")
	require.NoError(t, top.Workers[0].Start(ctx))

	// The waiting kinds: each waits for a person while one of agentflow's
	// workers is killed.
	teams, err := client.Dial(client.Options{HostPort: address, Namespace: "teams"})
	require.NoError(t, err)
	t.Cleanup(teams.Close)
	for _, tc := range []struct {
		prompt, namespace, query, signal, want string
		c                                      client.Client
	}{
		{"Refund order A17.", namespace, "WorkflowType = 'AwaitRefund'", "decide", "The desk said: refund A17 approved", c},
		{"Hold order A17.", "teams", "WorkflowType = 'HoldShipment'", nexustools.ReleaseSignal, "Released: approved", teams},
	} {
		answer := make(chan string, 1)
		go func() { defer close(answer); answer <- ask("waits-"+tc.namespace, tc.prompt) }()
		var waiting string
		require.Eventually(t, func() bool {
			list, err := tc.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: tc.namespace, Query: tc.query + " AND ExecutionStatus = 'Running'"})
			if err != nil || len(list.GetExecutions()) != 1 {
				return false
			}
			waiting = list.GetExecutions()[0].GetExecution().GetWorkflowId()
			return true
		}, 2*time.Minute, 200*time.Millisecond, "%s: the team's workflow waits for a person", tc.prompt)
		require.NoError(t, top.Workers[1].Kill())
		require.NoError(t, tc.c.SignalWorkflow(ctx, waiting, "", tc.signal, "approved"))
		require.NoError(t, top.Workers[1].Start(ctx))
		require.Contains(t, <-answer, tc.want)
	}
}

// goWorker builds and runs the team's worker of examples/<example> as a
// process of its own.
func goWorker(t *testing.T, dir, example string, env ...string) {
	t.Helper()
	bin := filepath.Join(dir, example+"-worker")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/agentflow/agentflow/examples/"+example+"/worker").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// typeScriptWorker runs examples/activitytools/typescript's worker
// (@temporalio/worker, pinned by its lockfile) until the test ends.
func typeScriptWorker(t *testing.T, env ...string) {
	t.Helper()
	if !nodeclient.Installed() {
		t.Fatal("node and npm are needed to run the TypeScript worker; install Node.js 18 or later")
	}
	dir, err := nodeclient.Install(context.Background(), filepath.Join("..", "..", "examples", "activitytools", "typescript"), "agentflow", "@temporalio/worker")
	require.NoError(t, err)
	cmd := exec.Command("node", "worker.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { nodeclient.Stop(cmd, 30*time.Second) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the TypeScript worker")
	require.Equal(t, "ready", strings.TrimSpace(line))
}
