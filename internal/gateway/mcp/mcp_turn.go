package mcp

import (
	"context"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The turn of a call. Calls in a session (MCP 2025-11-25), stateless
// calls and tasks (2026-07-28) prepare, read and cancel their turns here,
// through the turn API every door calls, so that the paths differ only in
// how they answer.

// prepare readies the turn of a tools/call of agentID with prompt (job:
// its job id, "" for a new one) as every door's (Service.Prepare), and
// names its stream: the task's id on every door.
func (m *mcpServer) prepare(ctx context.Context, agentID, prompt, job string) (agent.TurnRequest, string, error) {
	turn, err := m.s.Prepare(ctx, &pb.TurnRequest{AgentId: agentID, Prompt: prompt, JobId: job})
	if err != nil {
		return turn, "", err
	}
	return turn, contract.TurnWorkflowID(turn.TenantID, turn.JobID), nil
}

// turnEvents are the events a turn of the caller's tenant has logged so
// far, read as every door reads a log (Service.Events: at once, also
// during a local model call); another tenant's turn is not found.
func (m *mcpServer) turnEvents(ctx context.Context, streamID string) ([]agent.Event, error) {
	if err := gateway.OwnStream(ctx, streamID); err != nil {
		return nil, err
	}
	var events []agent.Event
	var after int64
	for {
		page, err := m.s.Events().Read(ctx, streamID, after, gateway.MaxEventsPage, 0)
		if err != nil {
			return nil, err
		}
		if page.TenantID != "" && page.TenantID != gateway.TenantOf(ctx) {
			return nil, agent.Errorf(agent.CodeNotFound, "task %q not found", streamID)
		}
		events = append(events, page.Events...)
		if len(page.Events) > 0 {
			after = page.Events[len(page.Events)-1].Index
		}
		if len(page.Events) == 0 || after >= page.Next-1 {
			return events, nil
		}
	}
}

// cancel asks the turn streamID to stop, as the caller and for reason,
// as every door's cancel asks it.
func (m *mcpServer) cancel(ctx context.Context, streamID, reason string) error {
	return m.s.CancelTurn(ctx, streamID, agent.CancelRequest{Reason: reason, RequestedBy: gateway.CallerOf(ctx).Name})
}
