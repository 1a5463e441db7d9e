// Package usageapi answers GetUsage: a tenant's model usage and spend
// over a period, grouped as asked, with its budgets' use. CatalogService
// serves it (internal/gateway/catalogapi delegates the method here). A
// service API, apart from the core as package gateway's doc says.
package usageapi

import (
	"context"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// MaxUsagePeriod bounds the period a GetUsage call sums.
const MaxUsagePeriod = 366 * 24 * time.Hour

// Store is where usage is read (store.Store).
type Store interface {
	UsageReport(ctx context.Context, tenantID string, since, until time.Time, by string) ([]store.UsageRow, error)
	TenantBilling(ctx context.Context, tenantID string) (store.Billing, error)
	SpentSince(ctx context.Context, tenantID string, since time.Time) (agent.Spent, error)
}

// Core is what the API needs of the gateway's core: the tenant of a
// call's credential, and an error as the call's status (never an
// internal error's text).
type Core interface {
	TenantOf(ctx context.Context) string
	StatusOf(ctx context.Context, err error) error
}

// Service answers GetUsage for the caller's tenant.
type Service struct {
	store Store
	c     Core
}

// New returns the usage API over st.
func New(st Store, c Core) *Service { return &Service{store: st, c: c} }

// GetUsage implements pb.CatalogServiceServer's method.
func (c *Service) GetUsage(ctx context.Context, in *pb.GetUsageRequest) (*pb.GetUsageResponse, error) {
	tenant := c.c.TenantOf(ctx)
	now := time.Now().UTC()
	since, until, err := usagePeriod(in, tenant, now)
	if err != nil {
		return nil, c.c.StatusOf(ctx, err)
	}
	rows, err := c.store.UsageReport(ctx, tenant, since, until, in.GetGroupBy())
	if err != nil {
		return nil, c.c.StatusOf(ctx, err)
	}
	out := &pb.GetUsageResponse{Tenant: tenant, Since: timestamppb.New(since), Until: timestamppb.New(until),
		GroupBy: in.GetGroupBy(), Total: &pb.UsageRow{}}
	for _, r := range rows {
		row := toPBUsage(r)
		if in.GetGroupBy() != "" {
			out.Rows = append(out.Rows, row)
		}
		t := out.Total
		t.Calls += row.Calls
		t.InputTokens += row.InputTokens
		t.OutputTokens += row.OutputTokens
		t.CachedTokens += row.CachedTokens
		t.ReasoningTokens += row.ReasoningTokens
		t.CostUsd += row.CostUsd
	}
	out.Total.CacheHitRate = hitRate(out.Total)
	billing, err := c.store.TenantBilling(ctx, tenant)
	if err != nil {
		return nil, c.c.StatusOf(ctx, err)
	}
	for _, pbud := range billing.Budgets.Periods() {
		start := agent.PeriodStart(pbud.Period, now)
		spent, err := c.store.SpentSince(ctx, tenant, start)
		if err != nil {
			return nil, c.c.StatusOf(ctx, err)
		}
		out.Budgets = append(out.Budgets, &pb.BudgetUse{Period: pbud.Period, PeriodStart: timestamppb.New(start),
			TokenLimit: pbud.Tokens, CostLimitUsd: pbud.Cost, TokensUsed: spent.Tokens, CostUsedUsd: spent.Cost})
	}
	return out, nil
}

func toPBUsage(r store.UsageRow) *pb.UsageRow {
	row := &pb.UsageRow{Key: r.Key, Calls: r.Calls, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CachedTokens: r.CachedTokens, ReasoningTokens: r.ReasoningTokens, CostUsd: r.Cost}
	row.CacheHitRate = hitRate(row)
	return row
}

// hitRate is the share of a row's input tokens the provider read from
// its prompt cache; 0 without input.
func hitRate(r *pb.UsageRow) float64 {
	if r.GetInputTokens() <= 0 {
		return 0
	}
	return float64(r.GetCachedTokens()) / float64(r.GetInputTokens())
}

// usagePeriod checks a GetUsage request and returns its period.
func usagePeriod(in *pb.GetUsageRequest, tenant string, now time.Time) (since, until time.Time, err error) {
	if t := in.GetTenant(); t != "" && t != tenant {
		return since, until, agent.Errorf(agent.CodePermissionDenied, "tenant %q: the token is of tenant %q", t, tenant)
	}
	switch by := in.GetGroupBy(); by {
	case "", store.ByAgent, store.ByModel, store.ByDay, store.BySession, store.ByChannel, store.ByKind:
	default:
		return since, until, agent.Errorf(agent.CodeInvalid, "group_by %q: want agent, model, day, session, channel or kind", by)
	}
	until = now
	if in.Until != nil {
		if err := in.Until.CheckValid(); err != nil {
			return since, until, agent.Errorf(agent.CodeInvalid, "until: %v", err)
		}
		until = in.Until.AsTime()
	}
	switch {
	case in.Since != nil && in.GetSinceDuration() != "":
		return since, until, agent.Errorf(agent.CodeInvalid, "give since or since_duration, not both")
	case in.Since != nil:
		if err := in.Since.CheckValid(); err != nil {
			return since, until, agent.Errorf(agent.CodeInvalid, "since: %v", err)
		}
		since = in.Since.AsTime()
	case in.GetSinceDuration() != "":
		d, err := ParseSince(in.GetSinceDuration())
		if err != nil {
			return since, until, err
		}
		since = now.Add(-d)
	default:
		return since, until, agent.Errorf(agent.CodeInvalid, "since or since_duration is required (e.g. since_duration \"24h\")")
	}
	if !since.Before(until) {
		return since, until, agent.Errorf(agent.CodeInvalid, "since (%s) must be before until (%s)", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	if until.Sub(since) > MaxUsagePeriod {
		return since, until, agent.Errorf(agent.CodeInvalid, "the period from %s to %s is longer than %d days",
			since.Format(time.RFC3339), until.Format(time.RFC3339), int(MaxUsagePeriod.Hours()/24))
	}
	return since, until, nil
}

// ParseSince reads a positive duration: a Go duration ("90m", "24h") or a
// number of days ("7d").
func ParseSince(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if n, err = strconv.Atoi(days); err == nil {
			if n > int(MaxUsagePeriod.Hours()/24) {
				return 0, agent.Errorf(agent.CodeInvalid, "since_duration %q is longer than %d days", s, int(MaxUsagePeriod.Hours()/24))
			}
			d = time.Duration(n) * 24 * time.Hour
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, agent.Errorf(agent.CodeInvalid, "since_duration %q: want a positive duration such as 90m, 24h or 7d", s)
	}
	return d, nil
}
