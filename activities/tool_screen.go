package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/tools"
)

// piiReveal is the tenant's PII reveal as a hook of every call through
// the tool runtime, the first tool hook to start (concerns): the tool the
// tenant allows gets the values behind placeholders in its arguments;
// the span, the events and the history keep the placeholders. It reads
// the tenant's PII redaction for piiRedaction too.
func (a *Activities) piiReveal() hooks.Handler {
	return hooks.Handler{
		Name: "pii reveal",
		ToolStart: toolStart(func(ctx context.Context, t *toolRun) error {
			var err error
			if t.pii, err = a.piiPolicy(ctx, t.in.TenantID); err != nil {
				return err
			}
			reveal := t.pii.Config.Reveal
			if !slices.Contains(reveal, t.spec.Entry()) && !slices.Contains(reveal, t.spec.Name) {
				return nil
			}
			args, err := a.vault.Reveal(ctx, t.in.TenantID, piiScope(t.in), string(t.call.Args))
			if err != nil {
				return err
			}
			t.call.Args = json.RawMessage(args)
			return nil
		}),
	}
}

// piiRedaction is the tenant's PII redaction of what a tool returns, as
// the last hook registered (concerns), so that its return runs first:
// the model, the stored step and every other hook read the output
// redacted. A redaction that fails fails the attempt.
func (a *Activities) piiRedaction() hooks.Handler {
	return hooks.Handler{
		Name: "pii redaction",
		ToolReturn: func(ctx context.Context, _ *hooks.ToolCall, r *hooks.ToolResult) error {
			t := toolRunOf(ctx)
			if t == nil || t.out == nil {
				return nil
			}
			t.out.Text = r.Text
			err := a.redactOutput(ctx, t.pii, t.in.TenantID, piiScope(t.in), t.out)
			r.Text = t.out.Text
			return err
		},
	}
}

// piiScope is the scope of a call's placeholders: its session's, else its
// turn's.
func piiScope(in contract.ExecuteToolInput) string { return redact.Scope(in.SessionID, in.JobID) }

// injectionScreen is the agent's injection guard as a hook of the turn's
// tool calls: what the model reads of a result — the tool's output, or
// an error it can act on, which can quote what the tool fetched — is
// screened (screen) once it is made (ToolRead).
func (a *Activities) injectionScreen() hooks.Handler {
	return hooks.Handler{
		Name: "injection guard",
		ToolRead: func(ctx context.Context, _ *hooks.ToolCall, r *hooks.ToolResult) {
			t := toolRunOf(ctx)
			if t == nil {
				return
			}
			if g := t.ag.InjectionGuard(); g != nil {
				r.Text = a.screen(ctx, *g, t.in, t.call, r.Text)
			}
		},
	}
}

// piiPolicy is the tenant's PII redaction (none without a catalog).
func (a *Activities) piiPolicy(ctx context.Context, tenantID string) (redact.Policy, error) {
	settings, err := a.tenants.Settings(ctx, tenantID)
	if agent.IsCode(err, agent.CodeNotFound) {
		return redact.Policy{}, nil
	}
	if err != nil {
		return redact.Policy{}, err
	}
	return redact.Policy{Redactor: settings.PII, Config: settings.PIIConfig}, nil
}

// redactOutput applies the tenant's PII redaction to a tool's output: its
// text, and the strings of its data and of its data's preview.
func (a *Activities) redactOutput(ctx context.Context, pii redact.Policy, tenantID, scope string, out *tools.Output) error {
	if pii.Redactor == nil {
		return nil
	}
	n, err := a.vault.Texts(ctx, pii, tenantID, scope, &out.Text)
	if err != nil {
		return err
	}
	data, nd, err := a.vault.JSON(ctx, pii, tenantID, scope, out.Data)
	if err != nil {
		return err
	}
	out.Data = data
	countGuard(ctx, tenantID, "pii", "redacted", n+nd)
	if out.Preview != nil {
		raw, err := json.Marshal(out.Preview)
		if err != nil {
			return err
		}
		raw, n, err := a.vault.JSON(ctx, pii, tenantID, scope, raw)
		if err != nil {
			return err
		}
		if n > 0 {
			var p agent.DataPreview
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("redact the data preview: %w", err)
			}
			out.Preview = &p
		}
	}
	return nil
}

// screen gives the model a tool's output delimited as data, acted on by
// the agent's injection guard where it reads as instructions (flagged,
// stripped or withheld), and tells the turn's clients what was found (a
// custom event agentflow.guardrail) and the log how much.
func (a *Activities) screen(ctx context.Context, g agent.InjectionGuard, in contract.ExecuteToolInput, call tools.Call, content string) string {
	inj, err := guardpkg.NewInjection(g)
	if err != nil {
		// Checked when the catalog was applied: screen with the built-in
		// patterns rather than not at all.
		a.log(ctx).Error("injection guard unreadable; screening with the built-in patterns", zap.Error(err))
		inj, _ = guardpkg.NewInjection(agent.InjectionGuard{Action: g.Action})
	}
	s := inj.Screen(in.Call.Name, in.Call.ID, content)
	countGuard(ctx, in.TenantID, "injection", s.Action, s.Found)
	if s.Found > 0 {
		a.log(ctx).Info("tool output read as instructions", zap.Int("passages", s.Found), zap.String("action", s.Action))
		value, _ := json.Marshal(map[string]any{"guard": "injection", "action": s.Action, "passages": s.Found})
		if call.Emit != nil {
			if err := call.Emit(agent.CustomEvent{Name: "agentflow.guardrail", ID: "injection-" + in.Call.ID, Value: value}); err != nil {
				a.log(ctx).Warn("guardrail event not sent", zap.Error(err))
			}
		}
	}
	return s.Text
}

// countGuard counts what a guardrail found (contract.MetricGuardrails).
func countGuard(ctx context.Context, tenantID, guard, outcome string, n int) {
	if n <= 0 {
		return
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"tenant": tenantID, "guard": guard, "outcome": outcome}).
		Counter(contract.MetricGuardrails).Inc(int64(n))
}
