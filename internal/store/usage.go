package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// applyBilling stores a tenant's price table and budgets when the catalog
// gives them; a different value marks the tenant updated.
func applyBilling(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog, change *Change) error {
	set := func(sql, what string, v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("tenant %q: encode %s: %w", tc.TenantID, what, err)
		}
		return setTenant(ctx, tx, change, sql, tc.TenantID, what, string(raw))
	}
	if tc.ReplacePrices {
		prices := tc.Prices
		if prices == nil {
			prices = []agent.Price{}
		}
		if err := set(sqlSetTenantPrices, "prices", prices); err != nil {
			return err
		}
	}
	if tc.Budgets != nil {
		if err := set(sqlSetTenantBudgets, "budgets", tc.Budgets); err != nil {
			return err
		}
	}
	return nil
}

// Billing is a tenant's price table and budgets, and its own limits on
// its model calls by governed key (modellimits.go).
type Billing struct {
	Prices      []agent.Price
	Budgets     agent.Budgets
	ModelLimits map[string]agent.ModelLimits
}

const sqlTenantBilling = `SELECT prices, budgets FROM tenants WHERE tenant_id = $1`

// TenantBilling returns a tenant's price table and budgets; none for a
// tenant that has no catalog.
func (s *Store) TenantBilling(ctx context.Context, tenantID string) (Billing, error) {
	var prices, budgets []byte
	err := s.pool.QueryRow(ctx, sqlTenantBilling, tenantID).Scan(&prices, &budgets)
	if errors.Is(err, pgx.ErrNoRows) {
		return Billing{}, nil
	}
	if err != nil {
		return Billing{}, fmt.Errorf("load prices and budgets of tenant %q: %w", tenantID, err)
	}
	return decodeBilling(tenantID, prices, budgets)
}

// decodeBilling reads a tenant's prices and budgets columns.
func decodeBilling(tenantID string, prices, budgets []byte) (Billing, error) {
	var b Billing
	if len(prices) > 0 {
		if err := json.Unmarshal(prices, &b.Prices); err != nil {
			return Billing{}, fmt.Errorf("load prices of tenant %q: %w", tenantID, err)
		}
	}
	if len(budgets) > 0 {
		if err := json.Unmarshal(budgets, &b.Budgets); err != nil {
			return Billing{}, fmt.Errorf("load budgets of tenant %q: %w", tenantID, err)
		}
	}
	var err error
	if b.ModelLimits, err = decodeModelLimits(tenantID, budgets); err != nil {
		return Billing{}, err
	}
	return b, nil
}

// ModelCall is one model call the model answered, as the usage ledger
// records it.
type ModelCall struct {
	TenantID     string
	JobID        string
	Step         int // the step the reply is stored as
	Attempt      int // the activity attempt that called the model
	AgentID      string
	AgentVersion int
	SessionID    string
	Model        string
	// Channel is the door of the call's turn (agent.TurnRequest.Channel);
	// "" for a call that is no turn's.
	Channel string
	// Kind is what the call was for (KindChat, KindPrepare, KindMemory,
	// KindEmbedding); "" is KindChat.
	Kind  string
	Usage agent.Usage
	// Cost in USD; nil when the model has no price.
	Cost *float64
	// WholeFrom and DigestFrom say what a turn's model call read of its
	// steps (contract.CallModelInput.WholeFrom, DigestFrom): 0 and 0,
	// every step whole. Written by PutReply; read by the timeline.
	WholeFrom, DigestFrom int
	CreatedAt             time.Time // set when read
	// Unbudgeted says the tenant has no budgets, so no attempt of the
	// call reserved anything: PutReply settles nothing. (A reservation
	// made before the budgets were removed expires on its own.)
	Unbudgeted bool
}

const (
	// sqlPutReply stores a reply as its step and its ledger row, and
	// settles the step's reservations when $15 says there may be some.
	// A data-modifying WITH runs whether or not it is read.
	sqlPutReply = `
WITH settled AS (
  DELETE FROM budget_reservations WHERE $15::bool AND tenant_id = $1 AND job_id = $2 AND step = $3
), step AS (
  INSERT INTO turn_steps (tenant_id, job_id, seq, message) VALUES ($1, $2, $3, $14)
  ON CONFLICT (tenant_id, job_id, seq) DO NOTHING
  RETURNING 1
)
INSERT INTO usage_ledger (tenant_id, job_id, step, attempt, agent_id, agent_version, session_id, model,
  input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost, channel, whole_from, digest_from)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $16, $17, $18 FROM step
ON CONFLICT (tenant_id, job_id, step, attempt) DO NOTHING`

	sqlJobUsage = `
SELECT tenant_id, job_id, step, attempt, agent_id, agent_version, session_id, model,
  input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost::float8, created_at, channel, kind
FROM usage_ledger WHERE tenant_id = $1 AND job_id = $2
ORDER BY step, attempt`

	sqlSpentSince = `
SELECT COALESCE(sum(input_tokens + output_tokens), 0)::bigint, COALESCE(sum(cost), 0)::float8
FROM usage_ledger WHERE tenant_id = $1 AND created_at >= $2`
)

// PutReply stores a model's reply as step c.Step of its turn and records
// the call in the usage ledger, in one transaction: a reply another
// attempt stored first is kept and the call is not recorded. The same
// transaction settles the budget reservations of the step's attempts
// (Reserve): the ledger row replaces them, so the call counts once.
func (s *Store) PutReply(ctx context.Context, c ModelCall, m agent.Message) error {
	if err := requireJobKey(c.TenantID, c.JobID); err != nil {
		return err
	}
	if c.Step < 0 || c.Attempt < 1 {
		return agent.Errorf(agent.CodeInvalid, "model call at step %d, attempt %d: want a step of 0 or more and an attempt of 1 or more", c.Step, c.Attempt)
	}
	msg, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("put reply %d of turn %q: encode: %w", c.Step, c.JobID, err)
	}
	// One statement, so one round trip and one transaction: the step's
	// reservations are settled whoever stores its reply (from here on
	// the ledger row counts the call), and the ledger row is written only
	// with the step, so a reply another attempt stored is counted once.
	u := c.Usage
	_, err = s.pool.Exec(ctx, sqlPutReply, c.TenantID, c.JobID, c.Step, c.Attempt, c.AgentID, c.AgentVersion, c.SessionID, c.Model,
		max(u.PromptTokens, 0), max(u.CompletionTokens, 0), max(u.CachedTokens, 0), max(u.ReasoningTokens, 0), c.Cost, msg, !c.Unbudgeted, c.Channel,
		max(c.WholeFrom, 0), max(c.DigestFrom, 0))
	if err != nil {
		if pgCode(err) == pgForeignKeyViolation {
			return agent.Errorf(agent.CodeNotFound, "turn %q of tenant %q not found: begin it before storing steps", c.JobID, c.TenantID)
		}
		return fmt.Errorf("put reply %d of turn %q: %w", c.Step, c.JobID, err)
	}
	return nil
}

// JobUsage returns the model calls the ledger holds for a job, by step.
func (s *Store) JobUsage(ctx context.Context, tenantID, jobID string) ([]ModelCall, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	calls, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (ModelCall, error) {
		var c ModelCall
		var in, out, cached, reasoning int64
		err := row.Scan(&c.TenantID, &c.JobID, &c.Step, &c.Attempt, &c.AgentID, &c.AgentVersion, &c.SessionID, &c.Model,
			&in, &out, &cached, &reasoning, &c.Cost, &c.CreatedAt, &c.Channel, &c.Kind)
		c.Usage = agent.Usage{PromptTokens: int(in), CompletionTokens: int(out), TotalTokens: int(in + out),
			CachedTokens: int(cached), ReasoningTokens: int(reasoning)}
		return c, err
	}, sqlJobUsage, tenantID, jobID)
	if err != nil {
		return nil, fmt.Errorf("load usage of job %q: %w", jobID, err)
	}
	return calls, nil
}

// SpentSince sums the tokens (prompt plus completion) and cost of a
// tenant's model calls since a time.
func (s *Store) SpentSince(ctx context.Context, tenantID string, since time.Time) (agent.Spent, error) {
	var sp agent.Spent
	if err := s.pool.QueryRow(ctx, sqlSpentSince, tenantID, since).Scan(&sp.Tokens, &sp.Cost); err != nil {
		return agent.Spent{}, fmt.Errorf("sum usage of tenant %q: %w", tenantID, err)
	}
	return sp, nil
}

// Kinds of model calls (ModelCall.Kind).
const (
	KindChat      = "chat"
	KindPrepare   = "prepare"
	KindMemory    = "memory"
	KindEmbedding = "embedding"
)

// Usage groupings.
const (
	ByAgent   = "agent"
	ByModel   = "model"
	ByDay     = "day"
	BySession = "session"
	ByChannel = "channel"
	ByKind    = "kind"
)

// UsageRow is the usage of one group of model calls.
type UsageRow struct {
	Key             string // the agent, model, day (YYYY-MM-DD, UTC), session, channel or kind; "" for the total
	Calls           int64
	InputTokens     int64
	OutputTokens    int64
	CachedTokens    int64
	ReasoningTokens int64
	Cost            float64
}

// usageKeys are the grouping columns, one per grouping.
var usageKeys = map[string]string{
	ByAgent:   "agent_id",
	ByModel:   "model",
	ByDay:     "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
	BySession: "session_id",
	ByChannel: "channel",
	ByKind:    "kind",
	"":        "''",
}

// UsageReport sums a tenant's model calls made in [since, until), grouped
// by by (ByAgent, ByModel, ByDay, BySession, ByChannel, ByKind, or "" for one row), ordered
// by key.
func (s *Store) UsageReport(ctx context.Context, tenantID string, since, until time.Time, by string) ([]UsageRow, error) {
	key, ok := usageKeys[by]
	if !ok {
		return nil, agent.Errorf(agent.CodeInvalid, "group_by %q: want agent, model, day, session, channel or kind", by)
	}
	// key is one of usageKeys' constants, never the caller's text.
	sql := `
SELECT ` + key + ` AS k, count(*), COALESCE(sum(input_tokens), 0)::bigint, COALESCE(sum(output_tokens), 0)::bigint,
  COALESCE(sum(cached_tokens), 0)::bigint, COALESCE(sum(reasoning_tokens), 0)::bigint, COALESCE(sum(cost), 0)::float8
FROM usage_ledger
WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
GROUP BY k ORDER BY k`
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (UsageRow, error) {
		var r UsageRow
		err := row.Scan(&r.Key, &r.Calls, &r.InputTokens, &r.OutputTokens, &r.CachedTokens, &r.ReasoningTokens, &r.Cost)
		return r, err
	}, sql, tenantID, since, until)
	if err != nil {
		return nil, fmt.Errorf("usage of tenant %q: %w", tenantID, err)
	}
	if by == "" && len(out) == 1 && out[0].Calls == 0 {
		return nil, nil
	}
	return out, nil
}

const sqlPutUsage = `
INSERT INTO usage_ledger (tenant_id, job_id, step, attempt, agent_id, agent_version, session_id, model,
  input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost, channel, kind)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (tenant_id, job_id, step, attempt) DO NOTHING`

// PutUsage counts a model call that stores no reply (a guard's judge, an
// embedding) in the usage ledger, once per (job, step, attempt).
func (s *Store) PutUsage(ctx context.Context, c ModelCall) error {
	if err := requireJobKey(c.TenantID, c.JobID); err != nil {
		return err
	}
	u := c.Usage
	_, err := s.pool.Exec(ctx, sqlPutUsage, c.TenantID, c.JobID, max(c.Step, 0), max(c.Attempt, 1), c.AgentID, c.AgentVersion, c.SessionID, c.Model,
		max(u.PromptTokens, 0), max(u.CompletionTokens, 0), max(u.CachedTokens, 0), max(u.ReasoningTokens, 0), c.Cost, c.Channel, cmp.Or(c.Kind, KindChat))
	if err != nil {
		return fmt.Errorf("count model call of %q: %w", c.JobID, err)
	}
	return nil
}
