package cluster

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const testCatalog = `
tenant: acme
default_agent: calc
tools:
  - name: calculator
    kind: calculator
    description: Evaluates an arithmetic expression exactly.
agents:
  - id: calc
    description: Does arithmetic.
    model: openai:gpt-4o-mini
    system_prompt: Call the calculator for any arithmetic.
    tools: [calculator]
`

// TestCluster starts the cluster, runs a turn through the balancer, fails
// PostgreSQL over to the standby, and runs another: it is answered, and
// the first turn's result is still stored.
func TestCluster(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err) // CI runs as root
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	// One worker and one gateway: the trials (internal/chaos) and
	// `starter up --cluster` run the full set, often at the same time.
	c, err := Start(ctx, Options{Dir: dir, Workers: 1, Gateways: 1, Logger: zaptest.NewLogger(t),
		Env: []string{"AGENTFLOW_SCRIPT=demo", "AGENTFLOW_TOKENS=tok=acme:user+approver+admin:ops", "AGENTFLOW_LOG_LEVEL=info"}})
	if err != nil {
		dumpLogs(t, dir)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, dir)
		}
		require.NoError(t, c.Stop())
	})

	conn, err := grpc.NewClient(c.ClientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok")
	_, err = pb.NewCatalogServiceClient(conn).UpsertCatalog(ctx, &pb.UpsertCatalogRequest{Files: map[string]string{"acme.yaml": testCatalog}})
	require.NoError(t, err)
	turn := func(job string) string {
		st, err := pb.NewAgentServiceClient(conn).Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 12*7?"}})
		require.NoError(t, err)
		var answer string
		for {
			ev, err := st.Recv()
			if err == io.EOF {
				return answer
			}
			require.NoError(t, err)
			answer += ev.GetContent().GetBlockJson()
		}
	}
	require.Contains(t, turn("cluster-1"), "84")
	begin := time.Now()
	require.NoError(t, c.Failover(ctx))
	t.Logf("failover took %s", time.Since(begin))
	require.Contains(t, turn("cluster-2"), "84")
	db, err := pgx.Connect(ctx, c.DatabaseURL)
	require.NoError(t, err)
	defer db.Close(ctx)
	var n int
	require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM agent_results WHERE job_id IN ('cluster-1', 'cluster-2')").Scan(&n))
	require.Equal(t, 2, n, "the result stored before the failover is on the new primary")
}

func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("== %s ==\n%s", filepath.Base(l), b)
	}
}
