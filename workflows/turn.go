package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/agent"
)

// Activity options. Local activities are for the cheap steps (a few
// database reads and writes); the model and tools are regular activities
// because they may run long and must survive the worker.
var (
	localOptions = workflow.LocalActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
			MaximumAttempts:    5,
		},
	}
	modelRetry = temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
		MaximumAttempts:    6,
	}
	toolRetry = temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
		MaximumAttempts:    3,
	}
	toolTimeout = 2 * time.Minute
	// A local tool's call runs inside the workflow task; the bound keeps a
	// misjudged tool from holding the task (the worker heartbeats it).
	localToolTimeout = 10 * time.Second
	modelHeartbeat   = 10 * time.Second
)

// AgentTurn runs one agent turn: route the request, pin the agent's
// version, call the model and the tools it asks for until it answers,
// and store the result. It fails with a non-retryable application error
// whose type is one of agent.ErrType* and whose details hold the
// TurnResult (status rejected or failed) when the turn cannot complete.
func AgentTurn(ctx workflow.Context, req agent.TurnRequest) (agent.TurnResult, error) {
	info := workflow.GetInfo(ctx)
	req.Normalize()
	if req.JobID == "" {
		req.JobID = info.WorkflowExecution.ID
	}
	t := &turn{req: req, workflowID: info.WorkflowExecution.ID, start: workflow.Now(ctx)}
	return t.run(ctx)
}

type turn struct {
	req        agent.TurnRequest
	workflowID string
	start      time.Time

	agent agent.Agent
	rule  string
	model string
	seq   int // the last step stored for the turn; 0 is the prompt
	usage agent.Usage
	calls []agent.ToolCallRecord

	log    eventLog
	tokens workflow.ReceiveChannel
	appr   approvals
}

func (t *turn) run(ctx workflow.Context) (agent.TurnResult, error) {
	if err := t.startEvents(ctx); err != nil {
		return agent.TurnResult{}, err
	}
	if err := t.startApprovals(ctx); err != nil {
		return agent.TurnResult{}, err
	}
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	if err := t.req.Validate(); err != nil {
		return t.reject(ctx, agent.ErrTypeInvalidRequest, err)
	}

	workflow.SetCurrentDetails(ctx, "routing the request")
	lctx := workflow.WithLocalActivityOptions(ctx, localOptions)
	var route activities.RouteResult
	err := workflow.ExecuteLocalActivity(lctx, activities.RouteName, activities.RouteInput{
		TenantID: t.req.TenantID, AgentID: t.req.AgentID, Prompt: t.req.Prompt, Context: t.req.Context,
	}).Get(ctx, &route)
	if err != nil {
		return t.reject(ctx, errorType(err), err)
	}
	t.rule = route.Rule

	workflow.SetCurrentDetails(ctx, fmt.Sprintf("loading agent %s", route.AgentID))
	var loaded activities.LoadAgentResult
	err = workflow.ExecuteLocalActivity(lctx, activities.LoadAgentName, activities.LoadAgentInput{
		Request: t.req, WorkflowID: t.workflowID, AgentID: route.AgentID,
	}).Get(ctx, &loaded)
	if err != nil {
		return t.reject(ctx, errorType(err), err)
	}
	if ex := loaded.Existing; ex != nil {
		return t.finishStored(ctx, *ex)
	}
	t.agent = loaded.Agent
	t.model = t.agent.Model
	if err := t.upsertSearch(ctx); err != nil {
		return agent.TurnResult{}, err
	}

	limits := t.agent.Limits.WithDefaults()
	timeout := limits.TurnTimeout()
	if s := t.req.TimeoutSec; s > 0 && time.Duration(s)*time.Second < timeout {
		timeout = time.Duration(s) * time.Second
	}
	runCtx, cancel := workflow.WithCancel(ctx)
	timedOut := false
	workflow.Go(runCtx, func(c workflow.Context) {
		timer := workflow.NewTimerWithOptions(c, timeout, workflow.TimerOptions{Summary: "turn timeout"})
		if timer.Get(c, nil) == nil {
			timedOut = true
			cancel()
		}
	})
	output, failure := t.loop(runCtx, limits)
	cancel()
	if timedOut {
		failure = &agent.TurnError{
			Type:      agent.ErrTypeTimeout,
			Message:   fmt.Sprintf("turn did not finish within its timeout of %s", timeout),
			Retryable: true,
		}
	}
	return t.finish(ctx, output, failure)
}

// loop calls the model and runs the tools it asks for until it answers,
// a limit is reached or a call fails.
func (t *turn) loop(ctx workflow.Context, limits agent.Limits) (string, *agent.TurnError) {
	var failures []activities.ToolFailure
	for i := 1; i <= limits.MaxIterations; i++ {
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("calling %s (iteration %d of at most %d)", t.agent.Model, i, limits.MaxIterations))
		mctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: limits.TurnTimeout(),
			// A streaming call heartbeats with every batch and at least
			// every second: a lost worker is noticed quickly.
			HeartbeatTimeout: modelHeartbeat,
			RetryPolicy:      &modelRetry,
			Summary:          fmt.Sprintf("%s · iteration %d", t.agent.Model, i),
		})
		t.seq++
		t.log.step, t.log.attempt = t.seq, 0
		var reply activities.CallModelResult
		call := workflow.ExecuteActivity(mctx, activities.CallModelName, activities.CallModelInput{
			TenantID: t.req.TenantID, JobID: t.req.JobID,
			AgentID: t.agent.ID, AgentVersion: t.agent.Version,
			SessionID: t.req.SessionID, History: t.req.History,
			Seq: t.seq, ToolFailures: failures,
			Stream: t.req.Streaming(), StreamID: t.workflowID, FirstIndex: t.log.next(), Notify: t.req.Notify,
			Context: t.req.Context,
		})
		err := t.awaitModel(ctx, call, &reply)
		t.log.step = 0
		if err != nil {
			return "", turnError(err)
		}
		t.emit(ctx, agent.Event{Kind: agent.EventUsage, Step: t.seq, Usage: &reply.Usage})
		failures = nil
		t.usage = t.usage.Add(reply.Usage)
		if reply.Model != "" {
			t.model = reply.Model
		}
		if b := limits.TokenBudget; b > 0 && t.usage.TotalTokens > b {
			return "", &agent.TurnError{
				Type:    agent.ErrTypeTokenBudget,
				Message: fmt.Sprintf("turn used %d tokens; the agent's budget is %d", t.usage.TotalTokens, b),
			}
		}
		if len(reply.ToolCalls) == 0 {
			return reply.Content, nil
		}
		failures = t.runTools(ctx, reply.ToolCalls, reply.Approvals, limits)
		if ctx.Err() != nil {
			return "", turnError(ctx.Err())
		}
	}
	return "", &agent.TurnError{
		Type:    agent.ErrTypeMaxIterations,
		Message: fmt.Sprintf("the model still asked for tools after %d iterations (the agent's max_iterations)", limits.MaxIterations),
	}
}

// runTools runs the calls in parallel, one activity (or local activity,
// for local tools) each, and returns the
// calls that failed for good (their results are stored by the next
// CallModel). Calls whose tool's policy asks for approval wait for a
// decision first; a rejected or timed-out call fails with a message the
// model reads as the tool's result.
func (t *turn) runTools(ctx workflow.Context, calls []agent.ToolCall, needs []activities.ApprovalNeed, limits agent.Limits) []activities.ToolFailure {
	futures := make([]workflow.Future, len(calls))
	refused := make([]*agent.ToolEvent, len(calls)) // tool_end of calls not run
	start := func(i int) {
		c := calls[i]
		t.emit(ctx, agent.Event{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: c.ID, Name: c.Name, Args: argsJSON(c.Arguments)}})
		in := activities.ExecuteToolInput{
			TenantID: t.req.TenantID, JobID: t.req.JobID,
			AgentID: t.agent.ID, AgentVersion: t.agent.Version,
			Seq: t.seq + 1 + i, Call: c,
		}
		summary := oneLine(c.Name+" "+c.Arguments, 120)
		// The agent was loaded by a recorded local activity, so the choice
		// replays the same. Agents stored before tools had an execution
		// run every tool as an activity, as they did then.
		if spec, ok := t.agent.Tool(c.Name); ok && spec.IsLocal() {
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
				StartToCloseTimeout: localToolTimeout,
				RetryPolicy:         &toolRetry,
				Summary:             summary,
			})
			futures[i] = workflow.ExecuteLocalActivity(lctx, activities.ExecuteToolName, in)
			return
		}
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: toolTimeout,
			RetryPolicy:         &toolRetry,
			Summary:             summary,
		})
		futures[i] = workflow.ExecuteActivity(actx, activities.ExecuteToolName, in)
	}

	var names []string
	var waiting []int
	for i, c := range calls {
		if reasonFor(needs, c.ID) != "" {
			waiting = append(waiting, i)
			continue
		}
		names = append(names, c.Name)
		start(i)
	}
	if len(names) > 0 {
		workflow.SetCurrentDetails(ctx, "running tools: "+strings.Join(names, ", "))
	}
	if len(waiting) > 0 {
		t.awaitApprovals(ctx, calls, waiting, needs, limits, func(i int, outcome, message string) {
			if outcome == agent.ApprovalApproved {
				start(i)
				return
			}
			refused[i] = &agent.ToolEvent{CallID: calls[i].ID, Name: calls[i].Name, Status: outcome, Output: message}
			t.emit(ctx, agent.Event{Kind: agent.EventToolEnd, Tool: refused[i]})
		})
	}

	var failures []activities.ToolFailure
	for i, f := range futures {
		c := calls[i]
		rec := agent.ToolCallRecord{CallID: c.ID, Tool: c.Name, Args: argsJSON(c.Arguments)}
		fail := func(status, msg string) {
			rec.Status = status
			failures = append(failures, activities.ToolFailure{Seq: t.seq + 1 + i, CallID: c.ID, Tool: c.Name, Message: msg})
		}
		switch {
		case refused[i] != nil:
			fail(refused[i].Status, refused[i].Output)
		case f == nil:
			// The turn ended (its timeout) while the call waited.
			fail(agent.ToolError, "the turn ended before the call was decided")
		default:
			var res activities.ExecuteToolResult
			end := agent.ToolEvent{CallID: c.ID, Name: c.Name}
			if err := f.Get(ctx, &res); err != nil {
				fail(agent.ToolError, errorMessage(err))
				end.Status, end.Output = agent.ToolError, oneLine(errorMessage(err), 200)
			} else {
				rec.Status = res.Status
				end.Status, end.Output = res.Status, oneLine(res.Preview, 200)
			}
			t.emit(ctx, agent.Event{Kind: agent.EventToolEnd, Tool: &end})
		}
		t.calls = append(t.calls, rec)
	}
	t.seq += len(calls)
	return failures
}

func reasonFor(needs []activities.ApprovalNeed, callID string) string {
	for _, n := range needs {
		if n.CallID == callID {
			return n.Reason
		}
	}
	return ""
}

// finish stores the result and returns it, or fails the workflow with it.
func (t *turn) finish(ctx workflow.Context, output string, failure *agent.TurnError) (agent.TurnResult, error) {
	res := agent.TurnResult{
		Version: agent.ProtocolVersion,
		JobID:   t.req.JobID,
		Status:  agent.StatusCompleted,
		Output:  output,
		Metadata: agent.ResultMetadata{
			AgentID:         t.agent.ID,
			AgentVersion:    t.agent.Version,
			RouteRule:       t.rule,
			ToolCalls:       t.calls,
			TokensUsed:      t.usage.TotalTokens,
			ExecutionTimeMS: workflow.Now(ctx).Sub(t.start).Milliseconds(),
			LLMModel:        t.model,
		},
	}
	if res.Metadata.ToolCalls == nil {
		res.Metadata.ToolCalls = []agent.ToolCallRecord{}
	}
	if failure != nil {
		res.Status = agent.StatusFailed
		res.Output = ""
		res.Error = failure
	} else {
		res.ResultPreview = textPreview(output)
	}

	workflow.SetCurrentDetails(ctx, "saving the result")
	// The turn's own context may be cancelled by its timeout; saving must
	// still happen.
	sctx, _ := workflow.NewDisconnectedContext(ctx)
	sctx = workflow.WithLocalActivityOptions(sctx, localOptions)
	var saved agent.TurnResult
	err := workflow.ExecuteLocalActivity(sctx, activities.SaveResultName, activities.SaveResultInput{
		Request: t.req, WorkflowID: t.workflowID, Result: res,
	}).Get(sctx, &saved)
	if err != nil {
		return agent.TurnResult{}, err
	}
	return t.finishStored(ctx, saved)
}

// finishStored ends the workflow with a stored result.
func (t *turn) finishStored(ctx workflow.Context, res agent.TurnResult) (agent.TurnResult, error) {
	if res.Status == agent.StatusCompleted {
		workflow.SetCurrentDetails(ctx, "completed")
		t.emit(ctx, agent.Event{Kind: agent.EventContent, Content: textBlock(res.Output)})
		t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})
		return res, nil
	}
	e := res.Error
	if e == nil {
		e = &agent.TurnError{Type: agent.ErrTypeInternal, Message: "turn failed without an error"}
	}
	workflow.SetCurrentDetails(ctx, "failed: "+e.Message)
	t.emit(ctx, agent.Event{Kind: agent.EventError, Error: e})
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: e})
	return agent.TurnResult{}, temporal.NewNonRetryableApplicationError(e.Message, e.Type, nil, res)
}

// reject fails a turn that could not start: nothing was stored.
func (t *turn) reject(ctx workflow.Context, errType string, err error) (agent.TurnResult, error) {
	msg := errorMessage(err)
	workflow.GetLogger(ctx).Info("turn rejected", "type", errType, "error", msg)
	workflow.SetCurrentDetails(ctx, "rejected: "+msg)
	res := agent.TurnResult{
		Version: agent.ProtocolVersion,
		JobID:   t.req.JobID,
		Status:  agent.StatusRejected,
		Error:   &agent.TurnError{Type: errType, Message: msg},
	}
	res.Metadata.ToolCalls = []agent.ToolCallRecord{}
	t.emit(ctx, agent.Event{Kind: agent.EventError, Error: res.Error})
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: res.Error})
	return agent.TurnResult{}, temporal.NewNonRetryableApplicationError(msg, errType, nil, res)
}

// upsertSearch sets the turn's search attributes in one command, whatever
// the starter set: what a history shows of the start's attributes differs
// between servers, so the workflow must not branch on it.
func (t *turn) upsertSearch(ctx workflow.Context) error {
	attrs := []temporal.SearchAttributeUpdate{SearchTenant.ValueSet(t.req.TenantID), SearchAgent.ValueSet(t.agent.ID)}
	if t.req.SessionID != "" {
		attrs = append(attrs, SearchSession.ValueSet(t.req.SessionID))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		return fmt.Errorf("set search attributes: %w", err)
	}
	return nil
}

// errorType is the application error type in err's chain, or InternalError.
func errorType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return app.Type()
	}
	return agent.ErrTypeInternal
}

// errorMessage is the innermost message of an activity error: the one
// that names the problem, without the SDK's wrapping.
func errorMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// turnError describes a failed model call for the result.
func turnError(err error) *agent.TurnError {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return &agent.TurnError{Type: agent.ErrTypeTimeout, Message: "turn was cancelled", Retryable: true}
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch typ := app.Type(); typ {
		case agent.ErrTypeModelRejected, agent.ErrTypeInvalidRequest, agent.ErrTypeAgentNotFound:
			return &agent.TurnError{Type: typ, Message: app.Message()}
		}
		return &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: app.Message(), Retryable: true}
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: "model call timed out", Retryable: true}
	}
	return &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: err.Error(), Retryable: true}
}

// argsJSON keeps valid JSON arguments as they are and quotes the rest, so
// the result's tool_calls stay valid JSON whatever the model wrote.
func argsJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	// Marshalling a string is deterministic; workflowcheck cannot tell.
	b, _ := json.Marshal(s) //workflowcheck:ignore
	return b
}

// textPreview is the result_preview of a text answer.
func textPreview(s string) json.RawMessage {
	p := preview{Type: "text", Chars: len([]rune(s)), Text: oneLine(s, 200)}
	// Marshalling a struct of strings and ints is deterministic.
	b, _ := json.Marshal(p) //workflowcheck:ignore
	return b
}

// textBlock is the content block of a text answer.
func textBlock(s string) json.RawMessage {
	b := block{Type: "text", Text: s}
	// Marshalling a struct of strings is deterministic.
	out, _ := json.Marshal(b) //workflowcheck:ignore
	return out
}

type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type preview struct {
	Type  string `json:"type"`
	Chars int    `json:"chars"`
	Text  string `json:"text"`
}

// oneLine shortens s to at most n runes on one line, for summaries.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
