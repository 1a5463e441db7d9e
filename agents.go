package agentflow

import (
	"github.com/nexus-rpc/sdk-go/nexus"

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

// RunTurn runs a turn and answers with its result (async, backed by the
// turn's workflow: cancelling the operation cancels the turn).
var RunTurn = nexus.NewOperationReference[RunTurnInput, TurnResult](nexusdoor.OpRunTurn)

// DecideInput decides a call waiting for approval in a turn of the
// endpoint's tenant; the approver is the binding's caller, which needs
// the approver role.
type DecideInput = nexusdoor.DecideInput

// GetResultInput names a turn of the endpoint's tenant.
type GetResultInput = nexusdoor.GetResultInput

// ApprovalAck is what a decision made.
type ApprovalAck = contract.ApprovalAck

// Decide decides an approval (sync).
var Decide = nexus.NewOperationReference[DecideInput, ApprovalAck](nexusdoor.OpDecide)

// GetResult reads a closed turn's result (sync); a running turn is
// refused (run_turn waits for one).
var GetResult = nexus.NewOperationReference[GetResultInput, TurnResult](nexusdoor.OpGetResult)
