package topology

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestRollout rolls builds out with docs/operations/deploys.md's recipe (go
// tool task deploy:rollout) while turns keep coming: build B, whose model
// endpoint refuses every call, is rolled back at its first step, its error
// rate in the report, and new turns go to A again; gated by a dataset of the
// turns A completed, B is refused before it takes any traffic; build C,
// healthy, passes the dataset, goes through its steps and becomes current.
// Every turn that did not run on B completes.
func TestRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	h := startHeldTopology(ctx, t, Options{Workers: 1, Gateways: 1, Env: []string{
		"AGENTFLOW_DEPLOYMENT_NAME=" + testDeployment, "AGENTFLOW_BUILD_ID=build-a"}})
	recipes := deployRecipes(t)
	task := func(args ...string) (string, error) {
		t.Helper()
		require.Contains(t, recipes, "go tool task "+args[0], "docs/operations/deploys.md has the recipe")
		return h.task(ctx, []string{"AGENTFLOW_DEPLOYMENT_NAME=" + testDeployment, "DATABASE_URL=" + h.DatabaseURL}, args...)
	}
	_, err := task("deploy:current", "BUILD=build-a")
	require.NoError(t, err)

	// Traffic: two clients, one quick turn after another, until the end.
	var mu sync.Mutex
	var turns []*turn
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tr := &turn{job: fmt.Sprintf("quick-rollout-%d-%d", c, i)}
				if err := streamGRPC(ctx, h.Conns, tr, nil, nil); err != nil {
					t.Errorf("turn %s: %v", tr.job, err)
					return
				}
				mu.Lock()
				turns = append(turns, tr)
				mu.Unlock()
			}
		})
	}

	// B's model endpoint refuses every call: each of its turns fails.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"this build's model is misconfigured","type":"invalid_request_error"}}`)
	}))
	t.Cleanup(broken.Close)
	_, err = h.AddWorker(ctx, "AGENTFLOW_BUILD_ID=build-b", "OPENAI_BASE_URL="+broken.URL)
	require.NoError(t, err)
	out, err := task("deploy:rollout", "BUILD=build-b", "STEPS=50,100", "HOLD=3s", "--", "--min-turns", "3", "--max-wait", "2m")
	t.Logf("deploy:rollout of build-b prints:\n%s", out)
	require.Error(t, err, "a rolled back rollout exits 1")
	require.Contains(t, out, "Rolled back: new turns go to build-a again")
	require.Contains(t, out, "at 50 %: error rate 1.000 against the current build's 0.000")
	h.requireOn(ctx, t, h.runQuick(ctx, t, "quick-after-rollback"), "build-a", enumspb.VERSIONING_BEHAVIOR_PINNED)

	// The turns that completed become a dataset, which gates a build
	// before it takes traffic: replayed on build-a and on build-b, each
	// evaluation pinned to its build, it fails on B, and B is not ramped.
	rec, err := pb.NewEvalServiceClient(h.Conns[0]).RecordDataset(auth(ctx), &pb.RecordDatasetRequest{
		DatasetId: "rollout", AgentId: "echo", Outcome: "completed", Limit: 6,
		From: timestamppb.New(time.Now().Add(-time.Hour)), To: timestamppb.New(time.Now().Add(time.Minute))})
	require.NoError(t, err)
	require.EqualValues(t, 6, rec.GetCases())
	gate := []string{"--dataset", "rollout", "--addr", h.Gateways[0].GRPCAddr, "--token", heldToken}
	out, err = task(append([]string{"deploy:rollout", "BUILD=build-b", "STEPS=50,100", "HOLD=3s", "--"}, gate...)...)
	t.Logf("deploy:rollout of build-b with a dataset prints:\n%s", out)
	require.Error(t, err, "a refused build exits 1")
	require.Contains(t, out, "gate: build build-b passed 0 of 6 cases; 6 that pass on build build-a fail on it")
	require.Contains(t, out, "gate: refused: build build-b takes no traffic")
	require.NotContains(t, out, "# Rollout of", "no step was taken")

	_, err = h.AddWorker(ctx, "AGENTFLOW_BUILD_ID=build-c")
	require.NoError(t, err)
	out, err = task(append([]string{"deploy:rollout", "BUILD=build-c", "STEPS=50,100", "HOLD=3s", "--", "--min-turns", "3", "--max-wait", "2m"}, gate...)...)
	t.Logf("deploy:rollout of build-c prints:\n%s", out)
	require.NoError(t, err, out)
	require.Contains(t, out, "gate: build build-c passed 6 of 6 cases; 0 that pass on build build-a fail on it")
	require.Contains(t, out, "build-c is current.")
	h.requireOn(ctx, t, h.runQuick(ctx, t, "quick-on-c"), "build-c", enumspb.VERSIONING_BEHAVIOR_PINNED)

	close(stop)
	wg.Wait()
	onB := 0
	for _, tr := range turns {
		d, err := h.Client.DescribeWorkflowExecution(ctx, tr.streamID(), "")
		require.NoError(t, err)
		build := d.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId()
		if build == "build-b" {
			onB++
			require.Equal(t, pb.Status_STATUS_FAILED, tr.status, tr.job)
			continue
		}
		require.Equal(t, pb.Status_STATUS_COMPLETED, tr.status, "%s on %s", tr.job, build)
	}
	require.GreaterOrEqual(t, onB, 3, "B took its step's turns")
}
