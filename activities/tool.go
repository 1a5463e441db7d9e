package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/pipeline"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tools"
)

// ExecuteTool runs one tool call and stores its result. Errors the model
// can act on (bad arguments, an unknown tool) are results, not failures:
// the model sees them and may try again. Other errors fail the attempt and
// Temporal retries it. A result once stored is what every later attempt
// returns: the tool is not run again. A call the turn ran as a child turn
// (in.Delegated, a delegate_to_agent call) is not run: the child's result
// is stored as the call's; nor is a question the turn asked (in.Asked,
// an ask_user call): its answer is.
func (a *Activities) ExecuteTool(ctx context.Context, in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
	ctx = withToolLog(ctx, in)
	defer callHeartbeats(ctx)()
	// What the tool embeds (retrieve, remember, recall) is charged to the
	// turn's tenant, under the call's key.
	ctx = withScope(ctx, metered.Scope{TenantID: in.TenantID, Key: fmt.Sprintf("%s:tool:%d:%s", in.JobID, in.Seq, in.Call.ID),
		AgentID: in.AgentID, AgentVersion: in.AgentVersion, SessionID: in.SessionID}, nil)
	// The turn logged tool_start before scheduling this: let gateways
	// know, while the call goes on, and before the next activity tells
	// them more.
	turnID := activity.GetInfo(ctx).WorkflowExecution.ID
	sinks := a.sinks(ctx, "")
	handed := make(chan struct{})
	go func() {
		defer close(handed)
		sinks.HandOn(ctx, turnID, in.Live)
	}()
	defer func() { <-handed }()
	var stored agent.Message
	err := a.db(ctx, "look up step", func() (err error) {
		stored, err = a.store.Step(ctx, in.TenantID, in.JobID, in.Seq)
		return err
	})
	// prior is the stored unknown outcome of a call a person decided on
	// sending again: the decision's result replaces it.
	var prior *agent.Message
	switch {
	case err == nil && in.Resend != nil && undecided(stored):
		prior = &stored
	case err == nil:
		// An earlier attempt ran the tool (or carried out the decision)
		// and stored the result.
		return a.toolResult(ctx, in.Call.ID, stored, statusOf(stored.Content))
	case !agent.IsCode(err, agent.CodeNotFound):
		return contract.ExecuteToolResult{}, fmt.Errorf("look up step %d: %w", in.Seq, err)
	}
	ag, err := a.agentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion)
	if err != nil {
		return contract.ExecuteToolResult{}, err
	}
	if in.Delegated != nil {
		// The call ran as a child turn: store what it came to.
		msg, status := delegated(in.Call, *in.Delegated)
		return a.storeToolResult(ctx, in, ranAs(ag, in.Call.Name, msg), status)
	}
	if in.Asked != nil {
		// A person answered the question (or no one did): store that.
		msg, status := asked(*in.Asked)
		return a.storeToolResult(ctx, in, ranAs(ag, in.Call.Name, msg), status)
	}
	if r := in.Resend; r != nil && !r.Approved {
		// Not sent again: the model reads the unknown outcome with the
		// decision, and why.
		return a.storeStep(ctx, in, prior, ranAs(ag, in.Call.Name, notResent(in.Call, prior, r.Message)), agent.ToolUnknown)
	}
	progress := eventlog.StartProgress(ctx, sinks, turnID, in.Call)
	msg, status, step := a.run(ctx, ag, in, progress)
	progress.Close()
	if status == "" {
		if err := ctx.Err(); err != nil {
			// The turn cancelled the call (heartbeats bring that within
			// seconds): the attempt ends canceled, with nothing stored;
			// the turn records the call's result.
			return contract.ExecuteToolResult{}, fmt.Errorf("tool %q: %w", in.Call.Name, err)
		}
		return contract.ExecuteToolResult{}, contract.ToolCallFailed(fmt.Sprintf("tool %q: %s", in.Call.Name, msg.Content), step)
	}
	if r := in.Resend; r != nil && status == agent.ToolUnknown {
		// The second delivery's outcome is unknown too.
		msg.Content = withDecision(msg.Content, r.Message)
	}
	res, err := a.storeStep(ctx, in, prior, ranAs(ag, in.Call.Name, msg), status)
	if err == nil && res.Status == agent.ToolError {
		res.Step = step
	}
	return res, err
}

// storeToolResult stores a call's result as step in.Seq and returns the
// workflow's account of it. An account over the payload budget
// (checkResult) is replaced, before anything is stored, by the tool's
// error saying what was too large: the model reads that, and the turn
// gets a result it can take.
func (a *Activities) storeToolResult(ctx context.Context, in contract.ExecuteToolInput, msg agent.Message, status string) (contract.ExecuteToolResult, error) {
	return a.storeStep(ctx, in, nil, msg, status)
}

// storeStep is storeToolResult in place of over, the stored unknown
// outcome of a call a person decided on sending again (nil: a new step).
// When another attempt replaced it first, what that attempt stored is
// the call's result.
func (a *Activities) storeStep(ctx context.Context, in contract.ExecuteToolInput, over *agent.Message, msg agent.Message, status string) (contract.ExecuteToolResult, error) {
	msg.Role, msg.ToolCallID, msg.Name, msg.Program = agent.RoleTool, in.Call.ID, in.Call.Name, in.Program
	if in.Program != "" {
		msg.ToolCalls = []agent.ToolCall{in.Call} // the program's next run checks it made this call
	}
	if status == agent.ToolError {
		msg.Content = errorPrefix + msg.Content
	}
	res, err := a.toolResult(ctx, in.Call.ID, msg, status)
	if err != nil {
		return contract.ExecuteToolResult{}, err
	}
	if _, err := a.checkResult(ctx, contract.ExecuteTool, res); err != nil {
		msg.Content, msg.Data, msg.CacheHit, status = errorPrefix+err.Error(), nil, false, agent.ToolError
		if res, err = a.toolResult(ctx, in.Call.ID, msg, status); err != nil {
			return contract.ExecuteToolResult{}, err
		}
	}
	if over != nil {
		return a.replaceToolResult(ctx, in, over.Content, msg, res)
	}
	// The tool has run: wait for the database rather than run it again.
	if err := a.db(ctx, "store tool result", func() error { return a.store.PutStep(ctx, in.TenantID, in.JobID, in.Seq, msg) }); err != nil {
		return contract.ExecuteToolResult{}, fmt.Errorf("store result of tool call %q: %w", in.Call.ID, err)
	}
	return res, nil
}

// ranAs is a call's result with the definition of the tool that ran
// (agent.ToolVersion): the pinned agent version's tool of that name.
func ranAs(ag agent.Agent, tool string, msg agent.Message) agent.Message {
	if t, ok := ag.Tool(tool); ok {
		v := t.VersionOf()
		msg.ToolVersion = &v
	}
	return msg
}

// errorPrefix marks a stored tool result as an error, for the model and
// for a retried attempt that reads the step back.
const errorPrefix = "error: "

func statusOf(content string) string {
	switch {
	case strings.HasPrefix(content, errorPrefix):
		return agent.ToolError
	case strings.HasPrefix(content, unknownPrefix):
		return agent.ToolUnknown
	}
	return agent.ToolOK
}

// run executes the call and returns what the model reads of it, and the
// pipeline step that failed it, if one did. An empty status means a
// failure worth retrying, or a call cancelled while it ran; the message's
// content then holds the error.
func (a *Activities) run(ctx context.Context, ag agent.Agent, in contract.ExecuteToolInput, progress *eventlog.Progress) (agent.Message, string, string) {
	spec, ok := ag.Tool(in.Call.Name)
	if !ok && in.Call.Name == agent.RecallStepTool {
		msg, status := a.recallStep(ctx, in)
		return msg, status, ""
	}
	if !ok {
		return agent.Message{Content: notGranted(ag, in.Call.Name)}, agent.ToolError, ""
	}
	if n := len(in.Call.Arguments); n > agent.MaxToolArgumentBytes {
		return agent.Message{Content: fmt.Sprintf("the arguments are %d bytes; the limit is %d", n, agent.MaxToolArgumentBytes)}, agent.ToolError, ""
	}
	call, err := a.call(ctx, ag, in, progress.Report, progress.Emit)
	if err != nil {
		return agent.Message{Content: err.Error()}, "", ""
	}
	var gate *effects.Gate
	if spec.Delivery != agent.DeliveryIdempotent {
		// At most once: each write's intent recorded before it leaves
		// (internal/effects), by the egress transport or the kind.
		k := effects.Key{TenantID: in.TenantID, JobID: in.JobID, Seq: in.Seq}
		if in.Resend != nil {
			// A person approved sending it again: a delivery of its own,
			// past the first one's intent, at most once too.
			k.Resend = in.Resend.ApprovalID
		}
		gate = effects.NewGate(a.store, k)
		ctx = effects.With(ctx, gate)
	}
	t := &toolRun{ag: ag, spec: spec, in: in, call: call, report: progress.Report}
	out, err, rerr := a.runTool(ctx, t)
	if rerr != nil {
		return agent.Message{Content: rerr.Error()}, "", ""
	}
	var failed *pipeline.StepError
	step := ""
	if errors.As(err, &failed) {
		step = string(failed.Op)
	}
	if msg, status, ok := writeOutcome(ctx, in.Call, gate, err); ok {
		if status == agent.ToolUnknown && spec.Reconcile != nil {
			msg, status = a.reconcile(ctx, ag, spec, in, msg)
		}
		return msg, status, step
	}
	switch {
	case err == nil:
		msg, status := a.output(ctx, in, out)
		msg.Content = a.read(ctx, t, msg.Content)
		return msg, status, ""
	case ctx.Err() != nil:
		// Cancelled: whatever the tool made of it is not its result.
		return agent.Message{Content: err.Error()}, "", step
	case agent.IsCode(err, agent.CodeInvalid), agent.IsCode(err, agent.CodeNotFound):
		// An error can quote what the tool fetched: it is data too.
		return agent.Message{Content: a.read(ctx, t, err.Error())}, agent.ToolError, step
	default:
		a.log(ctx).Warn("tool call failed", zap.Error(err))
		return agent.Message{Content: err.Error()}, "", step
	}
}

// runTool runs a call through the tool runtime, as every call of a
// tool runs whoever makes it (the model, a tool guard, a reconciliation):
// a replay's answer from its recording in place of the tool (replayed),
// else the tool registry's (Execute: the tenant's egress client, its
// secrets, MCP sessions) inside the registry's tool hooks, the
// activities' own among them (concerns): the values behind PII
// placeholders for the tools the tenant reveals them to, the entry's
// rate limit (waits reported through t.report), the call's span, and the
// tenant's PII redaction of what the tool returns, before the model, the
// stored step or the span reads it. toolErr is the tool's failure, for
// the caller to classify; err the runtime's (worth retrying).
func (a *Activities) runTool(ctx context.Context, t *toolRun) (out tools.Output, toolErr, err error) {
	// A replay's calls are answered from its recording: no tool runs.
	rep, err := a.replayOf(ctx, t.in)
	if err != nil {
		return tools.Output{}, nil, err
	}
	if rep == nil && t.in.Replay {
		// The turn's workflow asked no one: whatever the stored turn
		// says, the call does not run; with no recording, it diverges.
		rep = &agent.Replay{}
	}
	if rep != nil {
		return a.replayed(ctx, t.in, *rep)
	}
	hook := t.hooked()
	hctx, err := a.hooks.ToolStart(context.WithValue(ctx, toolRunKey{}, t), hook)
	if err != nil {
		return tools.Output{}, nil, err
	}
	out, toolErr = a.execute(hctx, t)
	if toolErr != nil {
		a.hooks.ToolError(hctx, hook, toolErr)
		return out, toolErr, nil
	}
	t.out = &out
	res := &hooks.ToolResult{Text: out.Text}
	if err := a.hooks.ToolReturn(hctx, hook, res); err != nil {
		a.hooks.ToolError(hctx, hook, err)
		return tools.Output{}, nil, err
	}
	out.Text = res.Text
	a.hooks.ToolEnd(hctx, hook, res)
	return out, nil, nil
}

// execute makes the call: through the tool registry, or, for a call the
// turn made on a team's own worker (in.Foreign), what it came to.
func (a *Activities) execute(ctx context.Context, t *toolRun) (tools.Output, error) {
	f := t.in.Foreign
	if f == nil {
		return a.tools.Execute(ctx, t.spec, t.call)
	}
	if f.Unknown != "" {
		return tools.Output{}, &unknownCall{what: f.Unknown}
	}
	if f.Error != "" {
		// The team's code failed it after its attempts: the model reads
		// why, as a tool's error it can act on.
		return tools.Output{}, agent.Errorf(agent.CodeInvalid, "%s", f.Error)
	}
	var text string
	if json.Unmarshal(f.Output, &text) == nil {
		return tools.Output{Text: text}, nil // a string is the text itself
	}
	return tools.Output{Text: string(f.Output)}, nil
}

// toolRun is one call through the tool runtime (runTool), as the
// activities' own tool hooks read it from their context (toolRunOf) and
// keep what they acquire in it.
type toolRun struct {
	ag     agent.Agent // the turn's agent; zero for a guard's or a reconciliation's call
	spec   agent.Tool
	in     contract.ExecuteToolInput
	call   tools.Call   // what the tool is given (its arguments revealed: piiReveal)
	report func(string) // the call's progress
	hook   *hooks.ToolCall
	out    *tools.Output    // the tool's output once it has returned
	pii    redact.Policy    // the tenant's PII redaction (piiReveal)
	permit *governor.Permit // the tool's rate limit's admission (toolRateLimit)
}

// toolRunKey keeps the call in its hooks' context.
type toolRunKey struct{}

// toolRunOf is the call whose hooks run under ctx; nil outside runTool
// and read.
func toolRunOf(ctx context.Context) *toolRun {
	t, _ := ctx.Value(toolRunKey{}).(*toolRun)
	return t
}

// toolStart is a ToolStart of the activities' own concerns: start runs
// with the call runTool makes, and a call made elsewhere passes.
func toolStart(start func(ctx context.Context, t *toolRun) error) func(context.Context, *hooks.ToolCall) (context.Context, error) {
	return func(ctx context.Context, _ *hooks.ToolCall) (context.Context, error) {
		if t := toolRunOf(ctx); t != nil {
			return ctx, start(ctx, t)
		}
		return ctx, nil
	}
}

// hooked is the call as hooks see it: its arguments the model's, as the
// history keeps them.
func (t *toolRun) hooked() *hooks.ToolCall {
	if t.hook == nil {
		in := t.in
		t.hook = &hooks.ToolCall{TenantID: in.TenantID, AgentID: in.AgentID, JobID: in.JobID, AgentVersion: in.AgentVersion,
			Kind: t.spec.Kind, ID: in.Call.ID, Name: in.Call.Name, Arguments: json.RawMessage(in.Call.Arguments)}
	}
	return t.hook
}

// read is what the model reads of a turn's call's result, content, past
// the hooks that see it last (ToolRead: the injection guard's screen).
func (a *Activities) read(ctx context.Context, t *toolRun, content string) string {
	r := &hooks.ToolResult{Text: content}
	a.hooks.ToolRead(context.WithValue(ctx, toolRunKey{}, t), t.hooked(), r)
	return r.Text
}

// withToolLog is ctx for a tool call: every log line about the call —
// the activity's (a.log) and the tool's own (telemetry.Logger) — says
// whose call it is: tenant, job, agent id and version, tool, call id.
func withToolLog(ctx context.Context, in contract.ExecuteToolInput) context.Context {
	return telemetry.WithLogFields(ctx, zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID),
		zap.String("agent_id", in.AgentID), zap.Int("agent_version", in.AgentVersion),
		zap.String("tool", in.Call.Name), zap.String("call_id", in.Call.ID))
}

// notGranted says which tools the agent has, by toolkit, for a call of
// one it has not.
func notGranted(ag agent.Agent, name string) string {
	var own []string
	kits := map[string][]string{}
	var kitOrder []string
	for _, t := range ag.Tools {
		if t.FromToolkit == "" {
			own = append(own, t.Name)
			continue
		}
		if kits[t.FromToolkit] == nil {
			kitOrder = append(kitOrder, t.FromToolkit)
		}
		kits[t.FromToolkit] = append(kits[t.FromToolkit], t.Name)
	}
	var have []string
	if len(own) > 0 {
		have = append(have, strings.Join(own, ", "))
	}
	for _, k := range kitOrder {
		have = append(have, fmt.Sprintf("toolkit %s: %s", k, strings.Join(kits[k], ", ")))
	}
	if len(have) == 0 {
		return fmt.Sprintf("tool %q is not granted to agent %q, which has no tools", name, ag.ID)
	}
	return fmt.Sprintf("tool %q is not granted to agent %q; it has %s", name, ag.ID, strings.Join(have, "; "))
}
