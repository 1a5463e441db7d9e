package workflows

import (
	"encoding/json"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/words"
)

// finish stores the result and returns it, or fails the workflow with it.
func (t *turn) finish(ctx workflow.Context, output string, failure *agent.TurnError) (agent.TurnResult, error) {
	res := agent.TurnResult{
		Version:     agent.ProtocolVersion,
		JobID:       t.req.JobID,
		Status:      agent.StatusCompleted,
		Output:      output,
		Channel:     t.req.Channel,
		SessionID:   t.req.SessionID,
		CompletedAt: workflow.Now(ctx),
		Metadata: agent.ResultMetadata{
			AgentID:          t.agent.ID,
			AgentVersion:     t.agent.Version,
			RouteRule:        t.rule,
			ToolCalls:        t.recs.calls,
			ToolCallsOmitted: t.recs.omitted,
			TokensUsed:       t.usage.TotalTokens,
			CacheHit:         t.parts.cacheHit || t.usage.CachedTokens > 0,
			CachedTokens:     t.usage.CachedTokens,
			ExecutionTimeMS:  workflow.Now(ctx).Sub(t.start).Milliseconds(),
			LLMModel:         t.model,
		},
	}
	if res.Metadata.ToolCalls == nil {
		res.Metadata.ToolCalls = []agent.ToolCallRecord{}
	}
	switch {
	case failure != nil && failure.Type == agent.ErrTypeCanceled:
		res.Status, res.Output, res.Error = agent.StatusCanceled, "", failure
		if output != "" && (t.canceled == nil || !t.canceled.Discard) {
			res.Output, res.Partial, res.ResultPreview = output, true, textPreview(output)
		}
	case failure != nil:
		res.Status, res.Output, res.Error = agent.StatusFailed, "", failure
	case t.parts.data != nil:
		res.DataRef = t.parts.data.Ref
		res.ResultPreview = dataPreview(*t.parts.data)
		res.OutputJSON = t.output
	case t.output != nil:
		res.OutputJSON = t.output
		res.ResultPreview = jsonPreview(t.output)
	default:
		if strings.TrimSpace(output) == "" && len(t.parts.files) == 0 {
			// The model answered nothing: the caller gets the agent's
			// placeholder, never an empty answer.
			res.Output = t.agent.EmptyAnswerText()
		}
		res.ResultPreview = textPreview(res.Output)
	}

	workflow.SetCurrentDetails(ctx, "saving the result")
	// The turn's own context may be cancelled by its timeout; saving must
	// still happen, however long the database is away: the work is done.
	sctx, _ := workflow.NewDisconnectedContext(ctx)
	in := contract.SaveResultInput{
		Request: t.req, WorkflowID: t.workflowID, Result: res, ToolFailures: t.unstored,
		Reasoning: words.Clip(strings.Join(t.parts.reasoning, "\n\n"), agent.MaxResultReasoningBytes), Files: t.parts.files,
		Retrieved: t.parts.retrieved,
	}
	for _, h := range t.hooks.save {
		h.beforeSave(&in)
	}
	if t.req.Streaming() {
		// SaveResult publishes the closing events once the result is
		// stored, a workflow task and the close's round trip before
		// followers would have them from the close; so nothing may be
		// logged between here and them (finishStored).
		t.takeArrived(ctx)
		in.Live, in.CloseFrom = t.log.Unhanded(true), t.log.Next()
	}
	var saved agent.TurnResult
	err := dbStep(sctx, contract.SaveResult, time.Time{}, in, &saved)
	if err != nil {
		return agent.TurnResult{}, err
	}
	return t.finishStored(ctx, saved)
}

// finishStored ends the workflow with a stored result: it logs the
// closing events (eventlog.Closing) — those SaveResult published on the
// live path, as it published them, when it did (their indices are the
// log's next: finish took in what was pending before it saved) — and
// returns the result, or fails the workflow with it.
func (t *turn) finishStored(ctx workflow.Context, res agent.TurnResult) (agent.TurnResult, error) {
	defer t.forward.Flush(ctx)
	if res.Status != agent.StatusCompleted && res.Error == nil {
		res.Error = &agent.TurnError{Type: agent.ErrTypeInternal, Message: "turn failed without an error"}
	}
	for _, h := range t.hooks.end {
		h.ended(ctx, res)
	}
	shown := res.StreamTail
	if len(shown) > 0 && shown[0].Index == t.log.Next() {
		for _, e := range shown {
			t.forward.Forward(ctx, t.log.Append(e))
		}
	} else {
		if len(shown) > 0 {
			// Only a run that went otherwise than the one whose SaveResult
			// published them (its task lost, a signal then taken earlier).
			workflow.GetLogger(ctx).Warn("closing events were published at other indices", "published_from", shown[0].Index, "next", t.log.Next())
		}
		for _, e := range eventlog.Closing(res) {
			t.emit(ctx, e)
		}
	}
	// Followers end with what the close carries (the value returned is
	// not compared on replay: old runs replay as they were).
	res.StreamTail = t.log.Tail(t.req.Streaming())
	t.observeEvents(ctx, t.req.TenantID, t.agent.ID, t.req.JobID)
	switch res.Status {
	case agent.StatusCompleted:
		workflow.SetCurrentDetails(ctx, "completed")
		return res, nil
	case agent.StatusCanceled:
		workflow.SetCurrentDetails(ctx, "canceled: "+res.Error.Message)
		res.StreamTail = nil
		return agent.TurnResult{}, contract.TurnCanceled(res)
	default:
		workflow.SetCurrentDetails(ctx, "failed: "+res.Error.Message)
		res.StreamTail = nil
		return agent.TurnResult{}, contract.TurnFailure(res)
	}
}

// reject fails a turn that could not start: nothing was stored.
func (t *turn) reject(ctx workflow.Context, err error) (agent.TurnResult, error) {
	e := agent.TurnErrorOf(err)
	workflow.GetLogger(ctx).Info("turn rejected", "type", e.Type, "error", e.Message)
	workflow.SetCurrentDetails(ctx, "rejected: "+e.Message)
	res := agent.TurnResult{
		Version:     agent.ProtocolVersion,
		JobID:       t.req.JobID,
		Status:      agent.StatusRejected,
		SessionID:   t.req.SessionID,
		Error:       e,
		CompletedAt: workflow.Now(ctx),
	}
	if agent.KnownChannel(t.req.Channel) {
		res.Channel = t.req.Channel
	}
	res.Metadata.ToolCalls = []agent.ToolCallRecord{}
	for _, h := range t.hooks.end {
		h.ended(ctx, res)
	}
	t.emit(ctx, agent.Event{Kind: agent.EventError, Error: res.Error})
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: res.Error})
	t.forward.Flush(ctx)
	return agent.TurnResult{}, contract.TurnFailure(res)
}

// blame names the tool call that caused a failure, when one did
// (agent.TurnError.Tool, Step): the call of the latest tool round the
// turn's timeout interrupted; the delegation of that round whose tokens
// took the turn over its budget; the failing call of the last round when
// the model was still calling tools at max_iterations. A failure in a
// model call, or one a person caused (a cancellation), names none.
func (r *toolRecords) blame(failure *agent.TurnError, a agent.Agent) *agent.TurnError {
	if failure == nil || !r.afterTools || failure.Tool != "" {
		return failure
	}
	var rec *agent.ToolCallRecord
	switch failure.Type {
	case agent.ErrTypeTimeout:
		rec = r.roundCall(func(c agent.ToolCallRecord) bool { return c.Status != agent.ToolOK })
	case agent.ErrTypeTokenBudget:
		rec = r.roundCall(func(c agent.ToolCallRecord) bool {
			spec, ok := a.Tool(c.Tool)
			return ok && spec.Kind == agent.KindDelegate
		})
	case agent.ErrTypeMaxIterations:
		for i := len(r.round) - 1; i >= 0 && rec == nil; i-- {
			if r.round[i].Status != agent.ToolOK {
				rec = &r.round[i]
			}
		}
	}
	if rec == nil {
		return failure
	}
	out := *failure
	out.Tool, out.Step = rec.Tool, rec.Step
	return &out
}

// roundCall is the first call of the latest tool round that match
// holds for, nil when none.
func (r *toolRecords) roundCall(match func(agent.ToolCallRecord) bool) *agent.ToolCallRecord {
	for i := range r.round {
		if match(r.round[i]) {
			return &r.round[i]
		}
	}
	return nil
}

// textPreview is the result_preview of a text answer.
func textPreview(s string) json.RawMessage {
	p := preview{Type: "text", Chars: len([]rune(s)), Text: contract.OneLine(s, 200)}
	// Marshalling a struct of strings and ints is deterministic.
	b, _ := json.Marshal(p) //workflowcheck:ignore
	return b
}

// jsonPreview is the result_preview of an answer that matched the turn's
// output schema: the JSON, in one line.
func jsonPreview(out json.RawMessage) json.RawMessage {
	p := preview{Type: "json", Chars: len([]rune(string(out))), Text: contract.OneLine(string(out), 200)}
	// Marshalling a struct of strings and ints is deterministic.
	b, _ := json.Marshal(p) //workflowcheck:ignore
	return b
}

// dataPreview is the result_preview of an answer that rests on data.
func dataPreview(p agent.DataPreview) json.RawMessage {
	// Marshalling a struct of strings, ints and raw JSON is deterministic.
	b, _ := json.Marshal(p) //workflowcheck:ignore
	return b
}

type preview struct {
	Type  string `json:"type"`
	Chars int    `json:"chars"`
	Text  string `json:"text"`
}
