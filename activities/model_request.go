package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
	"github.com/agentflow/agentflow/internal/structured"
)

// turnSoFar stores the tool calls that failed for good as their results
// and returns the turn's steps.
func (a *Activities) turnSoFar(ctx context.Context, in contract.CallModelInput) (turnSteps, error) {
	if err := a.storeToolFailures(ctx, in.TenantID, in.JobID, in.ToolFailures); err != nil {
		return turnSteps{}, err
	}
	if c := in.Cut; c != nil {
		// The answer the steer cut short, in its place before the
		// messages. A reply an attempt stored there whole stays.
		if err := a.store.PutStep(ctx, in.TenantID, in.JobID, c.Seq, agent.Message{Role: agent.RoleAssistant, Content: c.Text, Partial: true}); err != nil {
			return turnSteps{}, fmt.Errorf("store the answer cut short: %w", err)
		}
	}
	for _, st := range in.Steer {
		// A message added to the turn while it ran, read in its place.
		if err := a.store.PutStep(ctx, in.TenantID, in.JobID, st.Seq, agent.Message{Role: agent.RoleUser, Content: st.Prompt}); err != nil {
			return turnSteps{}, fmt.Errorf("store a message added to the turn: %w", err)
		}
	}
	if in.Repair != "" {
		// The answer to repair is step Seq-2; what was wrong with it comes
		// after it, and the repaired answer after that.
		msg := agent.Message{Role: agent.RoleUser, Content: structured.RepairPrompt(in.Repair)}
		if err := a.store.PutStep(ctx, in.TenantID, in.JobID, in.Seq-1, msg); err != nil {
			return turnSteps{}, fmt.Errorf("store the output's problems: %w", err)
		}
	}
	return a.readSteps(ctx, in)
}

// storeToolFailures stores the results of tool calls that did not run.
func (a *Activities) storeToolFailures(ctx context.Context, tenantID, jobID string, failures []contract.ToolFailure) error {
	for _, f := range failures {
		msg := agent.Message{Role: agent.RoleTool, ToolCallID: f.CallID, Name: f.Tool, Content: errorPrefix + f.Message, Program: f.Program}
		if f.Unknown {
			msg.Content = unknownMessage(agent.ToolCall{ID: f.CallID, Name: f.Tool, Arguments: f.Args}, f.Message).Content
		}
		if f.Program != "" {
			msg.ToolCalls = []agent.ToolCall{{ID: f.CallID, Name: f.Tool, Arguments: f.Args}}
		}
		if err := a.store.PutStep(ctx, tenantID, jobID, f.Seq, msg); err != nil {
			return fmt.Errorf("store failed tool call %q: %w", f.CallID, err)
		}
	}
	return nil
}

// request is what the model is sent. The prompt's prefix — the tools in
// the version's order, then its system prompt — is the same for every
// call of the agent version; what varies (the note on data, the session,
// the turn) follows it. The key lets the provider keep that prefix cached
// between turns.
func (m *modelCall) request() llm.Request {
	ag := m.ag
	tools := m.tools()
	req := llm.Request{
		Model:       ag.Model,
		Messages:    m.msgs,
		Tools:       tools,
		Specs:       m.specs(tools),
		MaxTokens:   ag.Limits.MaxOutputTokens,
		Temperature: ag.Temperature,
		CacheKey:    agent.PromptCacheKey(m.in.TenantID, ag.ID, ag.Version),

		ReasoningBudget: ag.Thinking.Budget(),
		ReasoningEffort: ag.Thinking.EffortLevel(),
		Media:           m.media,
	}
	if schema := outputSchema(ag, m.in); schema != nil {
		req.Output = &llm.OutputFormat{Name: ag.ID, Schema: schema}
	}
	return req
}

// tools are the tools the model is offered: the agent's, and, once the
// call reads a digest of the turn's older steps, the tool that reads one
// of them whole (agent.RecallStepTool).
func (m *modelCall) tools() []agent.Tool {
	tools := offered(m.ag)
	if _, own := m.ag.Tool(agent.RecallStepTool); m.steps.digest == "" || own {
		return tools
	}
	return append(append([]agent.Tool(nil), tools...), agent.RecallStep())
}

// media reads the bytes of a message's image or file, which are sent by
// their bytes, from the tenant's blobs: a ref of another tenant's is not
// found; one larger than a model is sent is refused before it is read.
func (m *modelCall) media(ctx context.Context, ref string) ([]byte, string, error) {
	b, err := m.a.store.OpenTenantBlob(ctx, m.in.TenantID, ref)
	if err != nil {
		return nil, "", err
	}
	defer b.Close()
	info := b.Info()
	if info.Size > llm.MaxMediaBytes {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s is %d bytes; a model is sent at most %d", ref, info.Size, llm.MaxMediaBytes)
	}
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(b, data); err != nil {
		return nil, "", fmt.Errorf("read %s: %w", ref, err)
	}
	return data, info.ContentType, nil
}

// restoreArgs makes each tool call's arguments what the tool's own schema
// says: a null a strict model wrote for an optional property is the
// property left out (strictschema.Restore). The reply is stored, shown
// and run as the tool takes it; only its streamed deltas went as written.
func restoreArgs(resp *llm.Response, tools []agent.Tool) {
	for i, c := range resp.Message.ToolCalls {
		for _, t := range tools {
			if t.Name == c.Name {
				resp.Message.ToolCalls[i].Arguments = string(strictschema.Restore(t.Parameters, json.RawMessage(c.Arguments)))
				break
			}
		}
	}
}

// outputSchema is the schema the call's answer must match: the turn's
// own, else its agent's; nil for none.
func outputSchema(ag agent.Agent, in contract.CallModelInput) json.RawMessage {
	return agent.TurnRequest{OutputSchema: in.OutputSchema}.OutputSchemaOf(ag)
}

// checkOutput checks a final answer against the turn's output schema (nil:
// none), for the turn to take it (OutputJSON) or repair it
// (OutputProblems). A reply that asks for tools is not an answer yet.
func checkOutput(res contract.CallModelResult, schema *structured.Schema) contract.CallModelResult {
	if schema == nil || len(res.ToolCalls) > 0 {
		return res
	}
	out, problems := schema.Check(res.Content)
	if len(problems) > 0 {
		res.OutputProblems = problems.String()
		return res
	}
	res.OutputJSON = out
	return res
}

// modelError says what a provider's failure means: retryable failures
// stay retryable (with the provider's Retry-After as the least delay), a
// request refused as over the model's context window is
// ContextLengthExceeded, any other refused request ModelRejected.
func modelError(err error) error {
	var le *llm.Error
	if errors.As(err, &le) {
		code := agent.CodeModelRejected
		if le.Retryable {
			code = agent.CodeModelFailed
		}
		if le.ContextLength {
			code = agent.CodeContextLength
		}
		return &agent.Error{Code: code, Message: "model call failed: " + le.Message, RetryAfter: le.RetryAfter}
	}
	if agent.IsCode(err, agent.CodeInvalid) {
		return agent.WithCode(agent.CodeModelRejected, err)
	}
	return fmt.Errorf("model call: %w", err)
}
