package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// sentMessage is what the trip team's workflow made of a message: the
// stream it followed, and the answering turn's result.
type sentMessage struct {
	Stream string
	Result agentflow.TurnResult
}

// sendVia is a workflow that sends a message through endpoint, tells its
// turn's stream id (query "stream") once the operation has started, and
// returns the turn's result.
func sendVia(endpoint string) func(workflow.Context, agentflow.SendMessageInput) (sentMessage, error) {
	return func(ctx workflow.Context, in agentflow.SendMessageInput) (sentMessage, error) {
		var out sentMessage
		if err := workflow.SetQueryHandler(ctx, "stream", func() (string, error) { return out.Stream, nil }); err != nil {
			return out, err
		}
		f := workflow.NewNexusClient(endpoint, agentflow.AgentsService).
			ExecuteOperation(ctx, agentflow.SendMessage, in, workflow.NexusOperationOptions{})
		stream, err := agentflow.Stream(ctx, f) // "": the turn had ended, and answered at once
		if err != nil {
			return out, err
		}
		out.Stream = stream
		err = f.Get(ctx, &out.Result)
		return out, err
	}
}

// answerVia is a workflow that answers a question through endpoint.
func answerVia(endpoint string) func(workflow.Context, agentflow.AnswerInput) (agentflow.AnswerAck, error) {
	return func(ctx workflow.Context, in agentflow.AnswerInput) (agentflow.AnswerAck, error) {
		var ack agentflow.AnswerAck
		err := workflow.NewNexusClient(endpoint, agentflow.AgentsService).
			ExecuteOperation(ctx, agentflow.Answer, in, workflow.NexusOperationOptions{}).Get(ctx, &ack)
		return ack, err
	}
}

// TestAgentsNexusConversation: a workflow in another namespace sends
// messages to a conversation through the endpoint. The operation is
// backed by the turn that answers: the caller reads the turn's stream id
// from the operation's token while the turn runs, the turn's events are
// read by that id, its question is answered through the answer operation
// as the binding's caller, and the operation's result is the turn's. A
// message sent again answers at once with the ended turn's result; the
// next message is the conversation's next turn; cancelling a message's
// operation cancels its turn.
func TestAgentsNexusConversation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := testserver.RandomID()
	endpoint := "agents-conv-" + id
	srv := testserver.Start(t, testserver.Options{Script: askScript, Catalogs: []string{askCatalog},
		NexusBindings: []nexusdoor.Binding{{TaskQueue: endpoint, TenantID: "demo", Roles: []string{"user"}, Name: "trip-process"}}})
	cc := callerClient(ctx, t, srv.Address, srv.Client(), srv.Namespace, endpoint)
	queue := "trips-" + id
	callerWorker(t, cc, queue, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(sendVia(endpoint), workflow.RegisterOptions{Name: "SendAgentMessage"})
		w.RegisterWorkflowWithOptions(answerVia(endpoint), workflow.RegisterOptions{Name: "AnswerAgent"})
	})
	start := func(workflowType string, in any) client.WorkflowRun {
		r, err := cc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, workflowType, in)
		require.NoError(t, err)
		return r
	}

	session, job := "trip-"+id, "trip-"+id+"-1"
	caller := start("SendAgentMessage", agentflow.SendMessageInput{SessionID: session, Prompt: "Book a trip", JobID: job})
	turn := contract.TurnWorkflowID("demo", job)
	var stream string
	require.Eventually(t, func() bool {
		v, err := cc.QueryWorkflow(ctx, caller.GetID(), "", "stream")
		return err == nil && v.Get(&stream) == nil && stream != ""
	}, time.Minute, 100*time.Millisecond, "the caller has the turn's stream id while the turn runs")
	require.Equal(t, turn, stream)
	var questions []agent.PendingQuestion
	var err error
	require.Eventually(t, func() bool {
		questions, err = turnclient.PendingQuestions(ctx, srv.Client(), stream)
		return err == nil && len(questions) == 1
	}, time.Minute, 100*time.Millisecond)
	page, err := turnclient.Events(ctx, srv.Client(), stream, agent.EventsQuery{})
	require.NoError(t, err)
	require.NotEmpty(t, page.Events, "the turn's events, by the stream id the caller read")

	var ack agentflow.AnswerAck
	require.NoError(t, start("AnswerAgent", agentflow.AnswerInput{JobID: job, CallID: questions[0].CallID, Answer: "Paris"}).Get(ctx, &ack))
	require.Equal(t, questions[0].CallID, ack.CallID)
	var sent sentMessage
	require.NoError(t, caller.Get(ctx, &sent))
	require.Equal(t, turn, sent.Stream)
	require.Equal(t, agent.StatusCompleted, sent.Result.Status, "%+v", sent.Result.Error)
	require.Equal(t, "Booked for Paris.", sent.Result.Output)
	var req agent.TurnRequest
	requireTurnRequest(ctx, t, srv.Client(), turn, &req)
	require.Equal(t, agent.ChannelNexus, req.Channel)
	require.Equal(t, "trip-process", req.Caller.Name)
	require.Equal(t, session, req.SessionID)
	require.True(t, linked(ctx, cc, caller.GetID(), enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED, srv.Namespace, turn),
		"the caller's operation links to the turn it attached to")

	// The same message again: the conversation answers with the turn its
	// job id started, which has ended, and the operation answers at once
	// with that turn's result.
	require.NoError(t, start("SendAgentMessage", agentflow.SendMessageInput{SessionID: session, Prompt: "Book a trip", JobID: job}).Get(ctx, &sent))
	require.Equal(t, "Booked for Paris.", sent.Result.Output)
	require.Empty(t, sent.Stream, "answered at once: no operation token")

	// The conversation's next message: a turn that answers at once.
	require.NoError(t, start("SendAgentMessage", agentflow.SendMessageInput{SessionID: session, Prompt: "Thanks"}).Get(ctx, &sent))
	require.Equal(t, agent.StatusCompleted, sent.Result.Status, "%+v", sent.Result.Error)
	require.Equal(t, "Hello.", sent.Result.Output)
	tr, err := turnclient.Transcript(ctx, srv.Client(), contract.ConversationWorkflowID("demo", session))
	require.NoError(t, err)
	require.Len(t, tr.Window, 2, "both messages are the conversation's turns")

	// Cancelling a message's operation cancels its turn.
	job = "trip-" + id + "-cancel"
	caller = start("SendAgentMessage", agentflow.SendMessageInput{SessionID: session, Prompt: "Book a trip", JobID: job})
	turn = contract.TurnWorkflowID("demo", job)
	require.Eventually(t, func() bool {
		questions, err = turnclient.PendingQuestions(ctx, srv.Client(), turn)
		return err == nil && len(questions) == 1
	}, time.Minute, 100*time.Millisecond)
	require.NoError(t, cc.CancelWorkflow(ctx, caller.GetID(), ""))
	requireTurnCanceled(ctx, t, srv.Client(), turn)
}
