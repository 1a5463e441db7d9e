package gateway

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// SessionTurn is the stream id of the turn a session's Conversation is
// running (its child AgentTurn), "" when it runs none, which is also the
// answer for a session no Conversation of the caller's tenant has, and
// for a person's session to a caller who is not staff (ownPerson).
func (s *Service) SessionTurn(ctx context.Context, session string) (string, error) {
	if ownPerson(ctx, "session", session) != nil {
		return "", nil
	}
	id := contract.ConversationWorkflowID(TenantOf(ctx), session)
	desc, err := s.client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return "", nil
	case err != nil:
		return "", agent.WithCode(agent.CodeUnavailable, fmt.Errorf("describe conversation %s: %w", id, err))
	case desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "", nil
	}
	for _, c := range desc.GetPendingChildren() {
		if c.GetWorkflowTypeName() == contract.AgentTurn {
			return c.GetWorkflowId(), nil
		}
	}
	return "", nil
}
