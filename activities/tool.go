package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// ExecuteTool runs one tool call and stores its result. Errors the model
// can act on (bad arguments, an unknown tool) are results, not failures:
// the model sees them and may try again. Other errors fail the attempt and
// Temporal retries it.
func (a *Activities) ExecuteTool(ctx context.Context, in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
	// The turn logged tool_start before scheduling this: let gateways know.
	a.wake(ctx, activity.GetInfo(ctx).WorkflowExecution.ID)
	var stored agent.Message
	err := a.db(ctx, "look up step", func() (err error) {
		stored, err = a.store.Step(ctx, in.TenantID, in.JobID, in.Seq)
		return err
	})
	if err == nil {
		// An earlier attempt ran the tool and stored the result.
		return a.toolResult(ctx, in.Call.ID, stored.Content, statusOf(stored.Content))
	} else if !agent.IsCode(err, agent.CodeNotFound) {
		return contract.ExecuteToolResult{}, fmt.Errorf("look up step %d: %w", in.Seq, err)
	}

	var ag agent.Agent
	err = a.db(ctx, "load agent", func() (err error) {
		ag, err = a.store.AgentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion)
		return err
	})
	if err != nil {
		return contract.ExecuteToolResult{}, fmt.Errorf("load agent %q version %d: %w", in.AgentID, in.AgentVersion, agentNotFound(err))
	}
	text, status := a.run(ctx, ag, in)
	if status == "" {
		return contract.ExecuteToolResult{}, fmt.Errorf("tool %q: %s", in.Call.Name, text)
	}
	msg := agent.Message{Role: agent.RoleTool, ToolCallID: in.Call.ID, Name: in.Call.Name, Content: text}
	if status == agent.ToolError {
		msg.Content = errorPrefix + text
	}
	// The tool has run: wait for the database rather than run it again.
	if err := a.db(ctx, "store tool result", func() error { return a.store.PutStep(ctx, in.TenantID, in.JobID, in.Seq, msg) }); err != nil {
		return contract.ExecuteToolResult{}, fmt.Errorf("store result of tool call %q: %w", in.Call.ID, err)
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
func (a *Activities) run(ctx context.Context, ag agent.Agent, in contract.ExecuteToolInput) (text, status string) {
	spec, ok := ag.Tool(in.Call.Name)
	if !ok {
		return fmt.Sprintf("agent %q has no tool %q", ag.ID, in.Call.Name), agent.ToolError
	}
	if n := len(in.Call.Arguments); n > agent.MaxToolArgumentBytes {
		return fmt.Sprintf("the arguments are %d bytes; the limit is %d", n, agent.MaxToolArgumentBytes), agent.ToolError
	}
	out, err := a.tools.Execute(ctx, spec, in.Call.Arguments)
	switch {
	case err == nil && len(out.Text) > agent.MaxToolOutputBytes:
		return fmt.Sprintf("the tool's output is %d bytes; the limit is %d", len(out.Text), agent.MaxToolOutputBytes), agent.ToolError
	case err == nil:
		return out.Text, agent.ToolOK
	case agent.IsCode(err, agent.CodeInvalid), agent.IsCode(err, agent.CodeNotFound):
		return err.Error(), agent.ToolError
	default:
		a.logger.Warn("tool call failed", zap.String("tool", in.Call.Name), zap.String("job_id", in.JobID), zap.Error(err))
		return err.Error(), ""
	}
}

func (a *Activities) toolResult(ctx context.Context, callID, content, status string) (contract.ExecuteToolResult, error) {
	preview, cut := truncate(content, a.previewBytes)
	res := contract.ExecuteToolResult{CallID: callID, Status: status, Preview: preview}
	if cut {
		var ref string
		err := a.db(ctx, "store tool output", func() (err error) {
			ref, err = a.store.PutBlob(ctx, []byte(content), "text/plain; charset=utf-8")
			return err
		})
		if err != nil {
			return contract.ExecuteToolResult{}, fmt.Errorf("store tool output: %w", err)
		}
		res.Ref = ref
	}
	return res, nil
}
