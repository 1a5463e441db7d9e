package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
)

// StartConversationOptions start a session's Conversation, or reuse the
// running one.
func StartConversationOptions(taskQueue string, in agent.ConversationInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       ConversationWorkflowID(in.TenantID, in.SessionID),
		TaskQueue:                taskQueue,
		StaticSummary:            "conversation " + in.SessionID,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchTenant.ValueSet(in.TenantID), SearchSession.ValueSet(in.SessionID)),
	}
}

// SendMessage sends a message to a session's Conversation, starting it if
// needed (update-with-start), and returns the turn that answers it. The
// server refuses updates for a while when too many are in flight or the
// run is rolling over; those are retried until ctx ends.
func SendMessage(ctx context.Context, c client.Client, taskQueue string, in agent.ConversationInput, m agent.SendMessage) (agent.SendMessageResult, error) {
	backoff := 50 * time.Millisecond
	for {
		op := c.NewWithStartWorkflowOperation(StartConversationOptions(taskQueue, in), ConversationName, in)
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateName: UpdateSendMessage, Args: []any{m}, WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		var res agent.SendMessageResult
		if err == nil {
			err = h.Get(ctx, &res)
		}
		if err == nil {
			return res, nil
		}
		if !transient(err) || ctx.Err() != nil {
			return res, fmt.Errorf("send message to %s: %w", ConversationWorkflowID(in.TenantID, in.SessionID), err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// transient: the server could not take the update now, but will later.
func transient(err error) bool {
	var exhausted *serviceerror.ResourceExhausted
	var unavailable *serviceerror.Unavailable
	var aborted *serviceerror.Aborted
	return errors.As(err, &exhausted) || errors.As(err, &unavailable) || errors.As(err, &aborted)
}
