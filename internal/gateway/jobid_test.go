package gateway_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// requireConflict checks that a call was refused because its job id names
// another request.
func requireConflict(t *testing.T, err error, job string) {
	t.Helper()
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), fmt.Sprintf("job id %q names another", job))
}

// TestJobIDNamesOneRequest: ten Invokes at once with one job id and ten
// prompts give one answer and nine Conflicts; later, another prompt,
// agent or context under the job id is a Conflict on every start path,
// and the same request again gets the stored answer without the model.
func TestJobIDNamesOneRequest(t *testing.T) {
	f := start(t)
	ctx := f.as("tok-demo")
	const job, n = "reused", 10
	prompt := func(i int) string { return fmt.Sprintf("What is %d * 7?", i+1) }
	results := make([]*pb.TurnResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: prompt(i)}})
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err != nil {
			requireConflict(t, err, job)
			continue
		}
		require.Equal(t, -1, won, "two prompts were answered: %d and %d", won, i)
		won = i
		require.Equal(t, agent.StatusCompleted, results[i].GetStatus())
		require.Equal(t, fmt.Sprintf("The result is %d.", (i+1)*7), results[i].GetOutput(), "the answer is its own prompt's")
	}
	require.NotEqual(t, -1, won, "no prompt was answered")
	require.Equal(t, 1, f.srv.Model.Served("calc"), "one turn ran")
	answer := results[won]

	// Later, another request under the job id, by Invoke and by Stream.
	for name, turn := range map[string]*pb.TurnRequest{
		"another prompt":  {JobId: job, Prompt: "What is 100 * 7?"},
		"another agent":   {JobId: job, AgentId: "writer", Prompt: prompt(won)},
		"another context": {JobId: job, Prompt: prompt(won), Context: &pb.TurnContext{UiPage: "/orders"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: turn})
			requireConflict(t, err, job)
			s, err := f.client.Stream(ctx, &pb.StreamRequest{Turn: turn})
			require.NoError(t, err)
			_, err = s.Recv()
			requireConflict(t, err, job)
		})
	}

	// The same request again, as it was or streamed: the stored answer.
	noStream := false
	again, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: prompt(won), Stream: &noStream}})
	require.NoError(t, err)
	require.Equal(t, answer.GetOutput(), again.GetOutput())
	require.Equal(t, answer.GetResultRef(), again.GetResultRef())
	s, err := f.client.Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: prompt(won)}})
	require.NoError(t, err)
	events := collect(t, s)
	require.Equal(t, agent.StreamCompleted, events[len(events)-1].Status)
	require.Contains(t, agent.ReplayText(events), answer.GetOutput())

	// A temporal client starts the job under another workflow id with
	// another prompt: the turn is rejected, Conflict, and stores nothing.
	tctx := t.Context()
	run, err := f.srv.Client().ExecuteWorkflow(tctx, client.StartWorkflowOptions{ID: "manual-" + job, TaskQueue: f.srv.TaskQueue},
		contract.AgentTurn, agent.TurnRequest{JobID: job, TenantID: "demo", Prompt: "What is 100 * 7?"})
	require.NoError(t, err)
	var res agent.TurnResult
	err = run.Get(tctx, &res)
	failed, ok := contract.FailedResult(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, agent.StatusRejected, failed.Status)
	require.Equal(t, agent.ErrTypeConflict, failed.Error.Type)
	require.Contains(t, failed.Error.Message, fmt.Sprintf("job id %q of tenant %q names another request", job, "demo"))

	require.Equal(t, 1, f.srv.Model.Served("calc"), "no turn but the first called the model")
	var rows int
	var stored string
	require.NoError(t, f.srv.Store().Pool().QueryRow(tctx,
		`SELECT count(*), min(request->>'prompt') FROM turns WHERE tenant_id = 'demo' AND job_id = $1`, job).Scan(&rows, &stored))
	require.Equal(t, 1, rows)
	require.Equal(t, prompt(won), stored)
	require.NoError(t, f.srv.Store().Pool().QueryRow(tctx,
		`SELECT count(*) FROM agent_results WHERE tenant_id = 'demo' AND job_id = $1`, job).Scan(&rows))
	require.Equal(t, 1, rows)
}

// TestSendMessageJobIDNamesOneMessage: a message's job id reused in its
// session for another prompt is a Conflict; for the same one it names the
// same turn.
func TestSendMessageJobIDNamesOneMessage(t *testing.T) {
	f := start(t)
	ctx := f.as("tok-demo")
	msg := &pb.SendMessageRequest{SessionId: "jobs", JobId: "msg-1", Prompt: "What is 1 + 1?"}
	first, err := f.client.SendMessage(ctx, msg)
	require.NoError(t, err)
	require.Equal(t, "turn/demo/msg-1", first.GetStreamId())

	again, err := f.client.SendMessage(ctx, msg)
	require.NoError(t, err)
	require.Equal(t, first.GetStreamId(), again.GetStreamId())

	_, err = f.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: "jobs", JobId: "msg-1", Prompt: "What is 2 + 2?"})
	requireConflict(t, err, "msg-1")

	s, err := f.client.Resume(ctx, &pb.ResumeRequest{StreamId: first.GetStreamId()})
	require.NoError(t, err)
	require.Equal(t, "The result is 2.", agent.ReplayText(collect(t, s)))
}
