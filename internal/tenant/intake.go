package tenant

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/redact"
)

// Intake applies each tenant's PII redaction to the texts people send in
// through a door (prompts, messages, answers, reasons) before a
// workflow, the model, a table or a log sees them: the one rule of every
// door, the gateway's and the Nexus service's.
type Intake struct {
	Tenants *Cache
	Vault   *redact.Vault
}

// Policy is tenantID's PII redaction: none without a catalog, which the
// turn reports itself.
func (in Intake) Policy(ctx context.Context, tenantID string) (redact.Policy, error) {
	if in.Tenants == nil {
		return redact.Policy{}, nil
	}
	settings, err := in.Tenants.Settings(ctx, tenantID)
	if agent.IsCode(err, agent.CodeNotFound) {
		return redact.Policy{}, nil
	}
	if err != nil {
		return redact.Policy{}, err
	}
	return redact.Policy{Redactor: settings.PII, Config: settings.PIIConfig}, nil
}

// Texts redacts texts of tenantID with the placeholders of scope
// (redact.Scope) and says how many values it replaced.
func (in Intake) Texts(ctx context.Context, tenantID, scope string, texts ...*string) (int, error) {
	p, err := in.Policy(ctx, tenantID)
	if err != nil || p.Redactor == nil {
		return 0, err
	}
	return in.Vault.Texts(ctx, p, tenantID, scope, texts...)
}

// ForTurn redacts texts sent to the running turn jobID of tenantID with
// the turn's placeholders: its session's, else its own (also for a turn
// that has not begun yet, whose session is not known).
func (in Intake) ForTurn(ctx context.Context, tenantID, jobID string, texts ...*string) (int, error) {
	if !slices.ContainsFunc(texts, func(t *string) bool { return *t != "" }) {
		return 0, nil // a decision without a reason, say
	}
	p, err := in.Policy(ctx, tenantID)
	if err != nil || p.Redactor == nil {
		return 0, err
	}
	turn, err := in.Tenants.store.Turn(ctx, tenantID, jobID)
	if err != nil && !agent.IsCode(err, agent.CodeNotFound) {
		return 0, fmt.Errorf("load turn %q of %q: %w", jobID, tenantID, err)
	}
	return in.Vault.Texts(ctx, p, tenantID, redact.Scope(turn.SessionID, jobID), texts...)
}
