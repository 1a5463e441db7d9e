package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/words"
)

// stageCheck is one custom guard of an agent's chain (http, moderation or
// tool) at a stage.
type stageCheck struct {
	guard string                   // its kind: the metric's guard label
	check func(text string) string // the rule text breaks ("" for none)
	// counted says the check counts its own decisions (a tool guard
	// counts each, allowed or not).
	counted bool
}

// stageChecks are the agent's custom guards that read stage, in the
// chain's order.
func (a *Activities) stageChecks(ctx context.Context, ag agent.Agent, in contract.CallModelInput, stage string) ([]stageCheck, error) {
	var out []stageCheck
	var client *http.Client
	for i, link := range ag.Guardrails {
		switch {
		case link.HTTP != nil && link.HTTP.Checks(stage):
			if client == nil {
				var err error
				if client, err = a.tenantHTTP(ctx, in.TenantID); err != nil {
					return nil, err
				}
			}
			out = append(out, stageCheck{guard: "http", check: a.httpGuard(ctx, client, ag, in, *link.HTTP, stage)})
		case link.Moderation != nil && link.Moderation.Checks(stage):
			out = append(out, stageCheck{guard: "moderation", check: a.moderation(ctx, *link.Moderation)})
		case link.Tool != nil && link.Tool.Checks(stage):
			out = append(out, stageCheck{guard: "tool", check: a.toolGuard(ctx, ag, in, i, *link.Tool, stage), counted: true})
		}
	}
	return out, nil
}

// httpGuard is the check of an HTTP guard at a stage.
func (a *Activities) httpGuard(ctx context.Context, client *http.Client, ag agent.Agent, in contract.CallModelInput, g agent.HTTPGuard, stage string) func(string) string {
	return func(text string) string {
		rule, err := guardpkg.CallHTTP(ctx, client, g, guardpkg.HTTPCheck{Stage: stage, Text: text,
			TenantID: in.TenantID, AgentID: ag.ID, JobID: in.JobID})
		if err != nil {
			a.log(ctx).Warn("http guard failed", zap.String("url", g.URL), zap.String("fail", cmp.Or(g.Fail, agent.GuardFailClosed)), zap.Error(err))
		}
		return rule
	}
}

// Outcomes of a tool guard's decisions (contract.MetricGuardrails).
const (
	guardAllowed      = "allowed"
	guardRefused      = "refused"
	guardFailedClosed = "failed_closed"
	guardFailedOpen   = "failed_open"
)

// toolGuard is the check of a tool guard (link link of the agent's chain)
// at a stage: its tool is asked about each text through the tool runtime
// (askGuardTool), and each decision is counted. Nothing of the text, nor
// of what the tool said about it, is logged.
func (a *Activities) toolGuard(ctx context.Context, ag agent.Agent, in contract.CallModelInput, link int, g agent.ToolGuard, stage string) func(string) string {
	asked := 0
	return func(text string) string {
		asked++
		callID := fmt.Sprintf("guard-%d-%s-%d", link, stage, asked)
		rule, err := guardpkg.CallTool(ctx, g, guardpkg.ToolCheck{Stage: stage, Text: text, AgentID: ag.ID, JobID: in.JobID},
			func(ctx context.Context, args json.RawMessage) (string, error) {
				return a.askGuardTool(ctx, ag, in, g, callID, args)
			})
		outcome := guardAllowed
		switch {
		case err != nil && rule == "":
			outcome = guardFailedOpen
		case err != nil:
			outcome = guardFailedClosed
		case rule != "":
			outcome = guardRefused
		}
		countGuard(ctx, in.TenantID, "tool", outcome, 1)
		if err != nil {
			a.log(ctx).Warn("tool guard failed", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID), zap.String("tool", g.Name),
				zap.String("stage", stage), zap.String("fail", cmp.Or(g.Fail, agent.GuardFailClosed)), zap.Error(err))
		}
		return rule
	}
}

// askGuardTool calls a tool guard's tool with args, as a call of the tool
// by the model would run (runTool): under the tool's approval policy, its
// entry's rate limit, with the tenant's egress client, secrets and MCP
// sessions, and the tenant's PII redaction of what it returns, which is
// its verdict. Its errors say what went wrong by kind only: a tool's
// error may quote the text it was asked about.
func (a *Activities) askGuardTool(ctx context.Context, ag agent.Agent, in contract.CallModelInput, g agent.ToolGuard, callID string, args json.RawMessage) (string, error) {
	if g.Spec == nil {
		return "", errors.New("its tool was not resolved when the catalog was applied (its server could not be reached then): apply the catalog again")
	}
	spec := *g.Spec
	if need, _ := a.gate.NeedsApproval(spec, args, in); need {
		return "", errors.New("its tool's approval policy asks for approval of the call, which a guard cannot wait for")
	}
	tin := contract.ExecuteToolInput{TenantID: in.TenantID, JobID: in.JobID, AgentID: ag.ID, AgentVersion: ag.Version,
		Seq: in.Seq, SessionID: in.SessionID, Call: agent.ToolCall{ID: callID, Name: spec.Name, Arguments: string(args)}}
	ctx = withToolLog(ctx, tin)
	// The guard's call is no call of the turn's: it reports no progress
	// and emits no events.
	call, err := a.call(ctx, ag, tin, nil, nil)
	if err != nil {
		return "", fmt.Errorf("the tool runtime failed (%s)", telemetry.ErrorType(err))
	}
	out, toolErr, err := a.runTool(ctx, &toolRun{spec: spec, in: tin, call: call, report: func(string) {}})
	switch {
	case err != nil:
		return "", fmt.Errorf("the tool runtime failed (%s)", telemetry.ErrorType(err))
	case toolErr != nil && ctx.Err() != nil:
		return "", ctx.Err()
	case toolErr != nil:
		return "", fmt.Errorf("the call failed (%s)", telemetry.ErrorType(toolErr))
	}
	return out.Text, nil
}

// outputGuardHook is the agent's output guard as a hook of every model
// call, after the budgets (concerns): it compiles the guard, which then
// holds every channel of the reply back a window at a time as the model
// streams it (replyOut), and checks the reply's end as soon as the model
// has returned it (replyOut.end), before any handler registered before
// it sees the reply. A broken rule does not fail the stage: the reply
// becomes what was released and the refusal, is stored and counted, and
// the call then ends GuardrailTripped (modelCall.result).
func (a *Activities) outputGuardHook() hooks.Handler {
	return hooks.Handler{
		Name: "output guard",
		ModelStart: modelStart(func(ctx context.Context, m *modelCall, _ *hooks.ModelCall) error {
			guard, err := a.outputGuard(ctx, m.ag, m.in)
			if guard != nil {
				m.out.held, m.out.refusal = guard.Reply(), guard.Refusal
			}
			return err
		}),
		ModelReturn: func(ctx context.Context, _ *hooks.ModelCall, r *hooks.ModelReply) error {
			m := modelCallOf(ctx)
			if m == nil {
				return nil
			}
			var err error
			m.tripped, m.trippedOn, err = m.out.end(ctx, r)
			return err
		},
	}
}

// outputGuard compiles the agent's output guard and the custom guards
// (http, moderation, tool) that read its answers, which run after the
// output guard's rules, in the chain's order, and before its judge (nil:
// it has none of them).
func (a *Activities) outputGuard(ctx context.Context, ag agent.Agent, in contract.CallModelInput) (*guardpkg.Output, error) {
	checks, err := a.stageChecks(ctx, ag, in, agent.GuardOutput)
	if err != nil {
		return nil, err
	}
	g := ag.OutputGuard()
	if g == nil && len(checks) == 0 {
		return nil, nil
	}
	if g == nil {
		g = &agent.OutputGuard{}
	}
	o, err := guardpkg.NewOutput(*g)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "agent %q version %d: output guard: %v", ag.ID, ag.Version, err)
	}
	for _, c := range checks {
		o.Extra = append(o.Extra, c.check)
	}
	if j := g.Judge; j != nil {
		o.Extra = append(o.Extra, a.judgeOutput(ctx, ag, in, *j))
	}
	return o, nil
}

// judgeSystem is an output guard's judge model's system prompt.
const judgeSystem = "You check an assistant's answer, as it is being written, against a policy. " +
	"Reply ALLOW or BLOCK as the first word, then a short reason."

// judgeOutput is the check of an output guard's judge: a model call per
// window, counted in the usage ledger (job "<job>:judge:<step>", one
// step per window). A judge that fails, or answers neither ALLOW nor
// BLOCK, blocks: a guard that cannot tell does not let text through.
func (a *Activities) judgeOutput(ctx context.Context, ag agent.Agent, in contract.CallModelInput, j agent.GuardJudge) func(string) string {
	model := cmp.Or(j.Model, ag.Model)
	window := 0
	return func(text string) string {
		window++
		resp, err := a.model.Generate(ctx, llm.Request{Model: model, MaxTokens: 64, Messages: []agent.Message{
			{Role: agent.RoleSystem, Content: judgeSystem},
			{Role: agent.RoleUser, Content: "Policy:\n" + j.Policy + "\n\nAnswer so far:\n" + text},
		}})
		if err != nil {
			a.log(ctx).Warn("output judge failed", zap.String("model", model), zap.Error(err))
			return fmt.Sprintf("judge %s failed, and blocks: %v", model, err)
		}
		call := store.ModelCall{TenantID: in.TenantID, JobID: fmt.Sprintf("%s:judge:%d", in.JobID, in.Seq), Step: window,
			Attempt: int(activity.GetInfo(ctx).Attempt), AgentID: ag.ID, AgentVersion: ag.Version, SessionID: in.SessionID, Model: model, Usage: resp.Usage,
			Channel: in.Channel}
		if err := a.store.PutUsage(ctx, call); err != nil {
			a.log(ctx).Warn("output judge not counted", zap.Error(err))
		}
		verdict, reason, _ := strings.Cut(strings.TrimSpace(resp.Message.Content), " ")
		switch strings.Trim(strings.ToUpper(verdict), ":.,!") {
		case "ALLOW":
			return ""
		case "BLOCK":
			return fmt.Sprintf("judge %s blocked it: %s", model, words.Clip(strings.TrimLeft(reason, ":-— "), 200))
		}
		return fmt.Sprintf("judge %s answered neither ALLOW nor BLOCK, and blocks", model)
	}
}

// moderation is the check of a moderation guard: the rule a text breaks
// ("" for none).
func (a *Activities) moderation(ctx context.Context, g agent.ModerationGuard) func(string) string {
	model := g.ModelOrDefault()
	return func(text string) string {
		var res llm.Moderation
		m, ok := a.model.(llm.Moderator)
		var err error = agent.Errorf(agent.CodeInvalid, "this worker's model has no moderation endpoint")
		if ok {
			res, err = m.Moderate(ctx, model, text)
		}
		if err != nil {
			a.log(ctx).Warn("moderation failed", zap.String("model", model), zap.String("fail", cmp.Or(g.Fail, agent.GuardFailClosed)), zap.Error(err))
			if g.Fail == agent.GuardFailOpen {
				return ""
			}
			return fmt.Sprintf("moderation by %s failed closed: %v", model, err)
		}
		if res.Flagged {
			return fmt.Sprintf("moderation by %s flagged it: %s", model, strings.Join(res.Categories, ", "))
		}
		return ""
	}
}

// tenantHTTP is the client that calls out under the tenant's egress
// policy.
func (a *Activities) tenantHTTP(ctx context.Context, tenantID string) (*http.Client, error) {
	settings, err := a.tenants.Settings(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("load tenant %q: %w", tenantID, err)
	}
	return settings.HTTP, nil
}

// guardInput asks the agent's custom guards that read input (http,
// moderation, tool; in the chain's order) about what is new for this
// model call — every text of the messages after the model last spoke —
// before anything is sent; a refusal is CodeGuardrailTripped.
func (a *Activities) guardInput(ctx context.Context, ag agent.Agent, in contract.CallModelInput, msgs []agent.Message) error {
	checks, err := a.stageChecks(ctx, ag, in, agent.GuardInput)
	if err != nil || len(checks) == 0 {
		return err
	}
	start := 0
	for i, m := range msgs {
		if m.Role == agent.RoleAssistant || m.Role == agent.RoleSystem {
			start = i + 1
		}
	}
	var texts []string
	for _, m := range msgs[start:] {
		// Its text parts too: the model reads them as it reads the
		// content.
		if t := m.Text(); t != "" {
			texts = append(texts, t)
		}
	}
	text := strings.Join(texts, "\n\n")
	// The guards may take seconds each: nothing else heartbeats yet.
	stop := heartbeat(ctx, time.Second)
	defer stop()
	for _, c := range checks {
		if rule := c.check(text); rule != "" {
			a.log(ctx).Info("input guard refused", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID), zap.String("guard", c.guard))
			if !c.counted {
				countGuard(ctx, in.TenantID, c.guard, "refused", 1)
			}
			return agent.Errorf(agent.CodeGuardrailTripped, "the input was refused before the model call: %s", rule)
		}
	}
	return nil
}
