package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/examples/process"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/testserver"
)

// processNexusScript answers with a story, and checks an answer only
// when the turn was told of the answer step's result by reference.
const processNexusScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: story
    when: {user: '^tell a story'}
    reply: {text: '` + storyText + `'}
  - name: check
    when:
      user: '^Check this answer'
      system: '(?s)previous_results\[0\]: \S+ \(step answer\)'
    reply: {text: 'Checked against the answer step.'}
  - name: fallback
    reply: {text: "I don't know."}
`

// TestProcessThroughNexus runs the example process the Nexus way, as
// its README does: its worker in namespace teams, each step a run_turn
// operation through an endpoint bound to tenant demo. The answering
// turn's stream id is the process's while it runs, the check turn is
// handed the answer by result_ref, and both turns came through the
// nexus channel as the binding's caller.
func TestProcessThroughNexus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := testserver.RandomID()
	endpoint := "agents-process-" + id
	srv := testserver.Start(t, testserver.Options{Script: processNexusScript, Catalogs: []string{testCatalog},
		NexusBindings: []nexusdoor.Binding{{TaskQueue: endpoint, TenantID: "demo", Roles: []string{"user"}, Name: "process-team"}}})
	cc := callerClient(ctx, t, srv.Address, srv.Client(), srv.Namespace, endpoint)
	queue := "examples-" + id
	callerWorker(t, cc, queue, func(w worker.Worker) { process.Register(w) })

	run, err := cc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "process-nexus-" + id, TaskQueue: queue},
		process.NexusName, process.NexusInput{Question: "tell a story", Endpoint: endpoint})
	require.NoError(t, err)
	wf := run.GetID()
	answerTurn, checkTurn := contract.TurnWorkflowID("demo", wf+"-answer"), contract.TurnWorkflowID("demo", wf+"-check")
	// While the story streams, the process tells the turn's stream id.
	require.Eventually(t, func() bool {
		v, err := cc.QueryWorkflow(ctx, wf, "", process.StreamsQuery)
		var streams map[string]string
		return err == nil && v.Get(&streams) == nil && streams["answer"] != ""
	}, time.Minute, 50*time.Millisecond, "the process knows the answering turn's stream")
	var out process.NexusResult
	require.NoError(t, run.Get(ctx, &out))

	require.Equal(t, storyText, out.Answer)
	require.NotEmpty(t, out.AnswerRef)
	require.Equal(t, "turn/demo/"+wf+"-answer", out.Streams["answer"])
	require.Equal(t, answerTurn, out.Streams["answer"], "the stream id is the turn's workflow id")
	require.Equal(t, checkTurn, out.Streams["check"])
	require.Equal(t, "Checked against the answer step.", out.Check, "the check turn was told of the answer by reference")

	var answerReq, checkReq agent.TurnRequest
	requireTurnRequest(ctx, t, srv.Client(), answerTurn, &answerReq)
	requireTurnRequest(ctx, t, srv.Client(), checkTurn, &checkReq)
	for _, req := range []agent.TurnRequest{answerReq, checkReq} {
		require.Equal(t, agent.ChannelNexus, req.Channel)
		require.Equal(t, "process-team", req.Caller.Name)
		require.Equal(t, "demo", req.TenantID)
		require.Equal(t, wf, req.RunID)
	}
	require.Equal(t, "answer", answerReq.NodeID)
	require.Equal(t, "check", checkReq.NodeID)
	require.Equal(t, []agent.PreviousResult{{NodeID: "answer", ResultRef: out.AnswerRef}}, checkReq.Context.PreviousResults)
	res, err := srv.Store().Result(ctx, "demo", wf+"-check")
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, out.Check, res.Output)
	res, err = srv.Store().Result(ctx, "demo", wf+"-answer")
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, out.AnswerRef, res.ResultRef)
}
