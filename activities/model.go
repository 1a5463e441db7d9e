package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/policy"
)

// CallModelInput names everything the model call needs by reference: the
// pinned agent version, the turn (whose steps are read from the store) and
// the session. Workflow history therefore does not grow with the length of
// the conversation.
type CallModelInput struct {
	TenantID     string `json:"tenant_id"`
	JobID        string `json:"job_id"`
	AgentID      string `json:"agent_id"`
	AgentVersion int    `json:"agent_version"`
	SessionID    string `json:"session_id,omitempty"`
	History      string `json:"history,omitempty"` // agent.HistoryLoad or agent.HistoryFresh
	// Seq is the step number the reply is stored under; steps 0..Seq-1 are
	// the turn so far.
	Seq int `json:"seq"`
	// ToolFailures are tool calls whose ExecuteTool gave up; they are stored
	// as the calls' results before the model is called.
	ToolFailures []ToolFailure `json:"tool_failures,omitempty"`

	// Stream asks for the reply's text as token batches, signalled to the
	// turn StreamID; FirstIndex is the log index of the first of them.
	Stream     bool   `json:"stream,omitempty"`
	StreamID   string `json:"stream_id,omitempty"`
	FirstIndex int64  `json:"first_index,omitempty"`
	// Notify is a workflow that also receives the batches.
	Notify string `json:"notify,omitempty"`
	// Context is the turn's context, for tools' approval policies.
	Context agent.TurnContext `json:"context,omitzero"`
}

// ToolFailure is the result of a tool call that could not run.
type ToolFailure struct {
	Seq     int    `json:"seq"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Message string `json:"message"`
}

// CallModelResult is the model's reply. Content is the final answer when
// there are no tool calls.
type CallModelResult struct {
	Content      string           `json:"content,omitempty"`
	ToolCalls    []agent.ToolCall `json:"tool_calls,omitempty"`
	Usage        agent.Usage      `json:"usage"`
	Model        string           `json:"model,omitempty"`
	FinishReason string           `json:"finish_reason,omitempty"`
	// Stored is true when the reply was already stored by an earlier
	// attempt and the model was not called again (its usage is then not
	// known and reported as zero).
	Stored bool `json:"stored,omitempty"`
	// Approvals lists the tool calls whose tool's policy asks a person
	// first, with the reason.
	Approvals []ApprovalNeed `json:"approvals,omitempty"`
}

// ApprovalNeed says that a tool call waits for a person, and why.
type ApprovalNeed struct {
	CallID string `json:"call_id"`
	Reason string `json:"reason"`
}

// approvals applies the agent's tools' approval policies to the calls.
// A call of a tool the agent does not have needs none: it fails anyway.
func (a *Activities) approvals(ag agent.Agent, in CallModelInput, calls []agent.ToolCall) []ApprovalNeed {
	var out []ApprovalNeed
	for _, c := range calls {
		t, ok := ag.Tool(c.Name)
		if !ok {
			continue
		}
		checker, err := a.policy()
		if err != nil {
			// Fail safe: a call whose policy cannot be applied waits.
			if t.Approval != "" && t.Approval != agent.ApprovalNever {
				out = append(out, ApprovalNeed{CallID: c.ID, Reason: err.Error()})
			}
			continue
		}
		need, why := checker.NeedsApproval(t.Approval, policy.Call{Tool: c.Name, Args: c.Arguments, TenantID: in.TenantID, Context: in.Context})
		if need {
			out = append(out, ApprovalNeed{CallID: c.ID, Reason: why})
		}
	}
	return out
}

// CallModel sends the turn so far to the agent's model and stores the
// reply as step Seq.
func (a *Activities) CallModel(ctx context.Context, in CallModelInput) (CallModelResult, error) {
	ag, err := a.Store.AgentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion)
	if err != nil {
		return CallModelResult{}, classify(fmt.Errorf("load agent %q version %d: %w", in.AgentID, in.AgentVersion, err), agent.ErrTypeAgentNotFound)
	}
	for _, f := range in.ToolFailures {
		msg := agent.Message{Role: agent.RoleTool, ToolCallID: f.CallID, Name: f.Tool, Content: "error: " + f.Message}
		if err := a.Store.PutStep(ctx, in.TenantID, in.JobID, f.Seq, msg); err != nil {
			return CallModelResult{}, fmt.Errorf("store failed tool call %q: %w", f.CallID, err)
		}
	}
	steps, err := a.Store.Steps(ctx, in.TenantID, in.JobID)
	if err != nil {
		return CallModelResult{}, fmt.Errorf("load steps of job %q: %w", in.JobID, err)
	}
	switch {
	case len(steps) > in.Seq:
		// An earlier attempt stored its reply but did not report back.
		m := steps[in.Seq]
		if m.Role != agent.RoleAssistant {
			return CallModelResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("step %d of job %q is a %s message, not the model's reply", in.Seq, in.JobID, m.Role), agent.ErrTypeInternal, nil)
		}
		return CallModelResult{Content: m.Content, ToolCalls: m.ToolCalls, Model: ag.Model, Stored: true,
			Approvals: a.approvals(ag, in, m.ToolCalls)}, nil
	case len(steps) < in.Seq:
		return CallModelResult{}, fmt.Errorf("job %q has %d steps stored, want %d before calling the model", in.JobID, len(steps), in.Seq)
	}

	var msgs []agent.Message
	if ag.SystemPrompt != "" {
		msgs = append(msgs, agent.Message{Role: agent.RoleSystem, Content: ag.SystemPrompt})
	}
	if in.History == agent.HistoryLoad && in.SessionID != "" {
		past, err := a.Store.SessionMessages(ctx, in.TenantID, in.SessionID, a.sessionWindow())
		if err != nil {
			return CallModelResult{}, fmt.Errorf("load session %q: %w", in.SessionID, err)
		}
		msgs = append(msgs, past...)
	}
	msgs = append(msgs, steps...)

	req := llm.Request{
		Model:       ag.Model,
		Messages:    msgs,
		Tools:       ag.Tools,
		MaxTokens:   ag.Limits.MaxOutputTokens,
		Temperature: ag.Temperature,
	}
	var st *streamer
	if in.Stream && in.StreamID != "" && a.Temporal != nil {
		if st, err = a.startStreamer(ctx, in); err != nil {
			return CallModelResult{}, err
		}
		req.OnText = st.add
	}
	resp, err := a.Model.Generate(ctx, req)
	if st != nil {
		if err != nil {
			st.abort()
		} else if serr := st.close(); serr != nil {
			// The reply is not stored: the retry calls the model again and
			// voids what this attempt streamed.
			return CallModelResult{}, serr
		}
	}
	if err != nil {
		a.Logger.Warn("model call failed", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID),
			zap.String("model", ag.Model), zap.Error(err))
		return CallModelResult{}, modelError(err)
	}
	reply := resp.Message
	reply.Role = agent.RoleAssistant
	if err := a.Store.PutStep(ctx, in.TenantID, in.JobID, in.Seq, reply); err != nil {
		return CallModelResult{}, fmt.Errorf("store reply: %w", err)
	}
	return CallModelResult{
		Content:      reply.Content,
		ToolCalls:    reply.ToolCalls,
		Usage:        resp.Usage,
		Model:        resp.Model,
		FinishReason: resp.FinishReason,
		Approvals:    a.approvals(ag, in, reply.ToolCalls),
	}, nil
}
