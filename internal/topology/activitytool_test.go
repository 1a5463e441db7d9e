package topology

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// ordersScript is the model of the orders example: it looks an order up
// with the team's activity and answers from what it returned.
const ordersScript = `
rules:
  - name: lookup
    when: {user: '(?i)where is order (\w+)'}
    reply: {tool_calls: [{name: lookup_order, arguments: '{"order_id": "$1"}'}]}
  - name: status
    when: {tool: '"status":"(\w+)"'}
    reply: {text: 'It is $1.'}
`

// TestActivityToolInProduction runs examples/activitytools on the
// production topology: agentflow's two workers and gateway as their own
// processes, configured by the environment (the operator's allow list
// in AGENTFLOW_TEMPORAL_ALLOW), the orders team's worker as a process of
// its own on its queue, the catalog applied through the gateway (one that
// names a queue the operator did not open is refused). A turn
// streamed through the gateway calls the team's activity; with one of
// agentflow's workers killed, the next does too.
func TestActivityToolInProduction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := topologyDir(t)
	script := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(script, []byte(ordersScript), 0o644))
	queue := "orders-production"
	top, err := Start(ctx, Options{
		Dir: dir, TemporalPort: -1, Logger: zaptest.NewLogger(t),
		Env: []string{"AGENTFLOW_SCRIPT=" + script, "AGENTFLOW_TOKENS=tok=acme:user+approver+admin:ops",
			"AGENTFLOW_TEMPORAL_ALLOW=acme=task_queue:" + queue + "+activity:LookupOrder+activity:RefundOrder"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, top.Stop()) })

	bin := filepath.Join(dir, "orders-worker")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/agentflow/agentflow/examples/activitytools/worker").CombinedOutput()
	require.NoError(t, err, "%s", out)
	team := exec.Command(bin)
	team.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+top.Stack.TemporalAddress, "TEMPORAL_NAMESPACE="+top.Stack.Namespace,
		"ORDERS_TASK_QUEUE="+queue, "ORDERS_LEDGER="+filepath.Join(dir, "refunds"))
	require.NoError(t, team.Start())
	t.Cleanup(func() { _ = team.Process.Kill(); _ = team.Wait() })

	catalog, err := os.ReadFile(filepath.Join("..", "..", "examples", "activitytools", "catalog.yaml"))
	require.NoError(t, err)
	doc := strings.NewReplacer("tenant: demo", "tenant: acme", "task_queue: orders,", "task_queue: "+queue+",").Replace(string(catalog))
	conn, err := grpc.NewClient(top.Gateways[0].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok")
	// A queue the operator did not open is refused, naming the field.
	_, err = pb.NewCatalogServiceClient(conn).UpsertCatalog(ctx, &pb.UpsertCatalogRequest{Files: map[string]string{
		"acme.yaml": strings.Replace(doc, "task_queue: "+queue+",", "task_queue: payroll,", 1)}})
	require.ErrorContains(t, err, `config.task_queue: task_queue "payroll" is not open to tenant "acme"`)
	_, err = pb.NewCatalogServiceClient(conn).UpsertCatalog(ctx, &pb.UpsertCatalogRequest{Files: map[string]string{"acme.yaml": doc}})
	require.NoError(t, err)

	ask := func(jobID string) string {
		t.Helper()
		st, err := pb.NewAgentServiceClient(conn).Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: jobID, Prompt: "Where is order A17?"}})
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
	require.Contains(t, ask("orders-1"), "It is delivered.")
	require.NoError(t, top.Workers[0].Kill())
	require.Contains(t, ask("orders-2"), "It is delivered.")
}
