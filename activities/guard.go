package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
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
	if need, _ := a.needsApproval(spec, args, in); need {
		return "", errors.New("its tool's approval policy asks for approval of the call, which a guard cannot wait for")
	}
	tin := contract.ExecuteToolInput{TenantID: in.TenantID, JobID: in.JobID, AgentID: ag.ID, AgentVersion: ag.Version,
		Seq: in.Seq, SessionID: in.SessionID, Call: agent.ToolCall{ID: callID, Name: spec.Name, Arguments: string(args)}}
	// The guard's call is no call of the turn's: it reports no progress
	// and emits no events.
	call, err := a.call(ctx, ag, tin, nil, nil)
	if err != nil {
		return "", fmt.Errorf("the tool runtime failed (%s)", errorType(err))
	}
	out, toolErr, err := a.runTool(ctx, spec, tin, call, func(string) {})
	switch {
	case err != nil:
		return "", fmt.Errorf("the tool runtime failed (%s)", errorType(err))
	case toolErr != nil && ctx.Err() != nil:
		return "", ctx.Err()
	case toolErr != nil:
		return "", fmt.Errorf("the call failed (%s)", errorType(toolErr))
	}
	return out.Text, nil
}
