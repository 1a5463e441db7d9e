package agentflow

import (
	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/nexusdoor"
)

// AgentsService is the Nexus service agentflow serves on each endpoint
// the operator binds to a tenant (AGENTFLOW_NEXUS_BINDINGS): a workflow
// of any namespace calls an agent through the endpoint, and acts as the
// binding says, whatever its input holds.
//
//	c := workflow.NewNexusClient("agents", agentflow.AgentsService)
//	f := c.ExecuteOperation(ctx, agentflow.RunTurn, agentflow.RunTurnInput{Prompt: "…"}, workflow.NexusOperationOptions{})
//	var res agentflow.TurnResult
//	err := f.Get(ctx, &res)
const AgentsService = nexusdoor.Service

// RunTurnInput is what a caller asks of a turn: the prompt, and the
// agent, job, session and timeout as a door's request names them. The
// tenant and the caller are the endpoint's.
type RunTurnInput = nexusdoor.RunTurnInput

// TurnContext is what a caller's process hands a turn
// (RunTurnInput.Context): earlier steps' results by reference
// (PreviousResults), where its workflow stands, metadata.
type TurnContext = agent.TurnContext

// PreviousResult points at an earlier step's result by its result_ref
// (a TurnResult's ResultRef), named by the step's node id.
type PreviousResult = agent.PreviousResult

// RunTurn runs a turn and answers with its result (async, backed by the
// turn's workflow: cancelling the operation cancels the turn).
var RunTurn = nexus.NewOperationReference[RunTurnInput, TurnResult](nexusdoor.OpRunTurn)

// SendMessageInput sends a message to a conversation of the endpoint's
// tenant (started if needed): the prompt, and the job id, agent, context
// and what the message does while a turn runs (on_busy).
type SendMessageInput = nexusdoor.SendMessageInput

// SendMessage sends a message and answers with the result of the turn
// that answers it (async, backed by that turn's workflow: cancelling the
// operation cancels the turn).
var SendMessage = nexus.NewOperationReference[SendMessageInput, TurnResult](nexusdoor.OpSendMessage)

// StreamOf is the stream id of the turn a RunTurn or SendMessage
// operation is backed by, from the operation's token: follow the turn's
// tokens by it through Workflow Streams or any door while it runs.
func StreamOf(token string) (string, error) { return nexusdoor.StreamOf(token) }

// Stream waits in workflow code until a RunTurn or SendMessage
// operation has started and returns the stream id of its turn (StreamOf);
// "" when the operation answered at once, its turn having ended.
//
//	f := c.ExecuteOperation(ctx, agentflow.RunTurn, in, workflow.NexusOperationOptions{})
//	stream, err := agentflow.Stream(ctx, f)
func Stream(ctx workflow.Context, f workflow.NexusOperationFuture) (string, error) {
	var exec workflow.NexusOperationExecution
	if err := f.GetNexusOperationExecution().Get(ctx, &exec); err != nil {
		return "", err
	}
	if exec.OperationToken == "" {
		return "", nil
	}
	// StreamOf decodes the token's JSON: a pure function of it.
	return StreamOf(exec.OperationToken) //workflowcheck:ignore
}

// DecideInput decides a call waiting for approval in a turn of the
// endpoint's tenant; the approver is the binding's caller, which needs
// the approver role.
type DecideInput = nexusdoor.DecideInput

// AnswerInput answers a question (ask_user) a turn of the endpoint's
// tenant waits on, as the binding's caller with its roles.
type AnswerInput = nexusdoor.AnswerInput

// AnswerAck is what an answer made.
type AnswerAck = contract.AnswerAck

// Answer answers a question (sync).
var Answer = nexus.NewOperationReference[AnswerInput, AnswerAck](nexusdoor.OpAnswer)

// GetResultInput names a turn of the endpoint's tenant.
type GetResultInput = nexusdoor.GetResultInput

// ApprovalAck is what a decision made.
type ApprovalAck = contract.ApprovalAck

// Decide decides an approval (sync).
var Decide = nexus.NewOperationReference[DecideInput, ApprovalAck](nexusdoor.OpDecide)

// GetResult reads a closed turn's result (sync); a running turn is
// refused (run_turn waits for one).
var GetResult = nexus.NewOperationReference[GetResultInput, TurnResult](nexusdoor.OpGetResult)
