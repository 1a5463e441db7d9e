package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
)

// ExecuteToolInput is one tool call of a turn.
type ExecuteToolInput struct {
	TenantID     string         `json:"tenant_id"`
	JobID        string         `json:"job_id"`
	AgentID      string         `json:"agent_id"`
	AgentVersion int            `json:"agent_version"`
	Seq          int            `json:"seq"` // the step the result is stored under
	Call         agent.ToolCall `json:"call"`
}

// ExecuteToolResult is a short account of the call for the workflow. The
// full output is stored as step Seq; when it is longer than the preview it
// is also stored as a blob and named by Ref.
type ExecuteToolResult struct {
	CallID  string `json:"call_id"`
	Status  string `json:"status"` // agent.ToolOK or agent.ToolError
	Preview string `json:"preview"`
	Ref     string `json:"ref,omitempty"`
}

// ExecuteTool runs one tool call and stores its result. Errors the model
// can act on (bad arguments, an unknown tool) are results, not failures:
// the model sees them and may try again. Other errors fail the attempt and
// Temporal retries it.
func (a *Activities) ExecuteTool(ctx context.Context, in ExecuteToolInput) (ExecuteToolResult, error) {
	// The turn logged tool_start before scheduling this: let gateways know.
	a.wake(ctx, activity.GetInfo(ctx).WorkflowExecution.ID)
	if stored, err := a.Store.Step(ctx, in.TenantID, in.JobID, in.Seq); err == nil {
		// An earlier attempt ran the tool and stored the result.
		return a.toolResult(ctx, in.Call.ID, stored.Content, statusOf(stored.Content))
	} else if !agent.IsCode(err, agent.CodeNotFound) {
		return ExecuteToolResult{}, fmt.Errorf("look up step %d: %w", in.Seq, err)
	}

	ag, err := a.Store.AgentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion)
	if err != nil {
		return ExecuteToolResult{}, classify(fmt.Errorf("load agent %q version %d: %w", in.AgentID, in.AgentVersion, err), agent.ErrTypeAgentNotFound)
	}
	text, status := a.run(ctx, ag, in)
	if status == "" {
		return ExecuteToolResult{}, fmt.Errorf("tool %q: %s", in.Call.Name, text)
	}
	msg := agent.Message{Role: agent.RoleTool, ToolCallID: in.Call.ID, Name: in.Call.Name, Content: text}
	if status == agent.ToolError {
		msg.Content = errorPrefix + text
	}
	if err := a.Store.PutStep(ctx, in.TenantID, in.JobID, in.Seq, msg); err != nil {
		return ExecuteToolResult{}, fmt.Errorf("store result of tool call %q: %w", in.Call.ID, err)
	}
	return a.toolResult(ctx, in.Call.ID, msg.Content, status)
}

// errorPrefix marks a stored tool result as an error, for the model and
// for a retried attempt that reads the step back.
const errorPrefix = "error: "

func statusOf(content string) string {
	if len(content) >= len(errorPrefix) && content[:len(errorPrefix)] == errorPrefix {
		return agent.ToolError
	}
	return agent.ToolOK
}

// run executes the call. An empty status means a failure worth retrying;
// text then holds the error.
func (a *Activities) run(ctx context.Context, ag agent.Agent, in ExecuteToolInput) (text, status string) {
	spec, ok := ag.Tool(in.Call.Name)
	if !ok {
		return fmt.Sprintf("agent %q has no tool %q", ag.ID, in.Call.Name), agent.ToolError
	}
	out, err := a.Tools.Execute(ctx, spec, in.Call.Arguments)
	switch {
	case err == nil:
		return out.Text, agent.ToolOK
	case agent.IsCode(err, agent.CodeInvalid), agent.IsCode(err, agent.CodeNotFound):
		return err.Error(), agent.ToolError
	default:
		a.Logger.Warn("tool call failed", zap.String("tool", in.Call.Name), zap.String("job_id", in.JobID), zap.Error(err))
		return err.Error(), ""
	}
}

func (a *Activities) toolResult(ctx context.Context, callID, content, status string) (ExecuteToolResult, error) {
	preview, cut := truncate(content, a.previewBytes())
	res := ExecuteToolResult{CallID: callID, Status: status, Preview: preview}
	if cut {
		ref, err := a.Store.PutBlob(ctx, []byte(content), "text/plain; charset=utf-8")
		if err != nil {
			return ExecuteToolResult{}, fmt.Errorf("store tool output: %w", err)
		}
		res.Ref = ref
	}
	return res, nil
}
