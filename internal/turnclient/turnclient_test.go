package turnclient_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// starter is a Temporal client and a task queue no worker polls: the
// turns these tests start stay open, so that what Start does with an
// open run is what is tested.
type starter struct {
	c     client.Client
	queue string
}

func newStarter(t *testing.T) starter {
	t.Helper()
	address, namespace := devtest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return starter{c: c, queue: "turnclient-" + testserver.RandomID()}
}

// terminate ends the open run of a workflow when the test ends.
func (s starter) terminate(t *testing.T, workflowID string) {
	t.Cleanup(func() {
		_ = s.c.TerminateWorkflow(context.Background(), workflowID, "", "test over")
	})
}

func request(job, prompt string) agent.TurnRequest {
	return agent.TurnRequest{Version: agent.ProtocolVersion, JobID: job, TenantID: "demo", AgentID: "assistant", Prompt: prompt}
}

// TestStartAttachesToTheSameRequestOnly: a second start of a job attaches
// to its run when it is the same request, and is a Conflict otherwise,
// whether the run was started by Start (memo) or without it (input).
func TestStartAttachesToTheSameRequestOnly(t *testing.T) {
	s := newStarter(t)
	ctx := t.Context()

	byStart, byOther := "job-"+testserver.RandomID(), "job-"+testserver.RandomID()
	first, err := turnclient.Start(ctx, s.c, s.queue, request(byStart, "What is 6 * 7?"))
	require.NoError(t, err)
	s.terminate(t, first.GetID())
	// As the temporal CLI or a parent workflow starts one: no memo.
	plain := request(byOther, "What is 6 * 7?")
	other, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.TurnWorkflowID("demo", byOther), TaskQueue: s.queue},
		contract.AgentTurn, plain)
	require.NoError(t, err)
	s.terminate(t, other.GetID())

	for _, run := range []client.WorkflowRun{first, other} {
		job := run.GetID()[len("turn/demo/"):]
		t.Run(job, func(t *testing.T) {
			no := false
			same := request(job, "What is 6 * 7?")
			same.Stream, same.Version = &no, ""
			again, err := turnclient.Start(ctx, s.c, s.queue, same)
			require.NoError(t, err, "the same request, delivered otherwise")
			require.Equal(t, run.GetRunID(), again.GetRunID())

			for name, mutate := range map[string]func(*agent.TurnRequest){
				"prompt":  func(r *agent.TurnRequest) { r.Prompt = "What is 6 * 8?" },
				"agent":   func(r *agent.TurnRequest) { r.AgentID = "writer" },
				"routed":  func(r *agent.TurnRequest) { r.AgentID = "" },
				"context": func(r *agent.TurnRequest) { r.Context.UserRole = "supervisor" },
			} {
				req := request(job, "What is 6 * 7?")
				mutate(&req)
				_, err := turnclient.Start(ctx, s.c, s.queue, req)
				require.Equal(t, agent.CodeConflict, agent.ErrorCode(err), "%s: %v", name, err)
				require.ErrorContains(t, err, fmt.Sprintf("job id %q names another request (started ", job))
			}
		})
	}

	// A workflow of another type under a turn's id runs no request.
	squatter := "job-" + testserver.RandomID()
	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.TurnWorkflowID("demo", squatter), TaskQueue: s.queue},
		"SomethingElse", request(squatter, "What is 6 * 7?"))
	require.NoError(t, err)
	s.terminate(t, run.GetID())
	_, err = turnclient.Start(ctx, s.c, s.queue, request(squatter, "What is 6 * 7?"))
	require.Equal(t, agent.CodeConflict, agent.ErrorCode(err), "%v", err)
}

// TestStartConcurrentRequests: ten requests started at once under one job
// id make one run; the nine others are Conflicts, and the run's memo holds
// the hash of the request that made it.
func TestStartConcurrentRequests(t *testing.T) {
	s := newStarter(t)
	ctx := t.Context()
	job := "job-" + testserver.RandomID()
	s.terminate(t, contract.TurnWorkflowID("demo", job))
	const n = 10
	runs := make([]client.WorkflowRun, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			runs[i], errs[i] = turnclient.Start(ctx, s.c, s.queue, request(job, fmt.Sprintf("What is %d * 7?", i)))
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, won, "two requests started the job")
			won = i
			continue
		}
		require.Equal(t, agent.CodeConflict, agent.ErrorCode(err), "%v", err)
	}
	require.NotEqual(t, -1, won)

	desc, err := s.c.DescribeWorkflowExecution(ctx, runs[won].GetID(), runs[won].GetRunID())
	require.NoError(t, err)
	var hash string
	memo := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[contract.MemoRequestHash]
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(memo, &hash))
	require.Equal(t, request(job, fmt.Sprintf("What is %d * 7?", won)).Hash(), hash)

	again, err := turnclient.Start(ctx, s.c, s.queue, request(job, fmt.Sprintf("What is %d * 7?", won)))
	require.NoError(t, err)
	require.Equal(t, runs[won].GetRunID(), again.GetRunID())
}
