package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const usageUsage = `usage: starter usage [--tenant T] [--since 24h|7d|2026-11-01T00:00:00Z] [--until TIME] [--by agent|model|day|session] [--json]
(with [--addr HOST:PORT] [--token TOKEN]; the token's tenant, role admin)`

// usageCmd prints the tenant's model usage and cost (CatalogService
// GetUsage): a row per group, the totals and the budgets' use.
func usageCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("usage", usageUsage)
	api := addAPIFlags(fs)
	tenant := fs.String("tenant", "", "the tenant (default: the token's; another is refused)")
	since := fs.String("since", "24h", "the period's start: a duration back from now (90m, 24h, 7d) or an RFC 3339 time")
	until := fs.String("until", "", "the period's end, an RFC 3339 time (default: now)")
	by := fs.String("by", "", "group by agent, model, day (UTC), session, channel (the door of the call's turn) or kind (chat, prepare, memory, embedding; default: totals only)")
	asJSON := fs.Bool("json", false, "print the response as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("usage: unexpected argument %q\n%s", fs.Arg(0), usageUsage)
	}
	req := &pb.GetUsageRequest{Tenant: *tenant, GroupBy: *by}
	if t, err := time.Parse(time.RFC3339, *since); err == nil {
		req.Since = timestamppb.New(t)
	} else {
		req.SinceDuration = *since
	}
	if *until != "" {
		t, err := time.Parse(time.RFC3339, *until)
		if err != nil {
			return fmt.Errorf("usage: --until %q: want an RFC 3339 time such as 2026-11-01T00:00:00Z", *until)
		}
		req.Until = timestamppb.New(t)
	}
	c, ctx, closeConn, err := api.dialCatalog(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	resp, err := c.GetUsage(ctx, req)
	if err != nil {
		return api.failed("usage", err)
	}
	if *asJSON {
		return printJSON(out, resp, protojson.MarshalOptions{EmitUnpopulated: true}, "usage")
	}
	printUsage(out, resp)
	return nil
}

// printUsage prints a usage table: a row per group, then the totals and
// the budgets of the current periods. "cache hits" is the share of the
// input tokens the provider read from its prompt cache.
func printUsage(out io.Writer, r *pb.GetUsageResponse) {
	fmt.Fprintf(out, "usage of tenant %s from %s to %s\n", r.GetTenant(), stamp(r.GetSince().AsTime()), stamp(r.GetUntil().AsTime()))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	key := cmp.Or(r.GetGroupBy(), "-")
	fmt.Fprintf(w, "%s\tcalls\tinput\tcached\toutput\treasoning\tcost (USD)\tcache hits\t\n", key)
	row := func(name string, u *pb.UsageRow) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%.6f\t%.1f%%\t\n", name, u.GetCalls(), u.GetInputTokens(), u.GetCachedTokens(),
			u.GetOutputTokens(), u.GetReasoningTokens(), u.GetCostUsd(), 100*u.GetCacheHitRate())
	}
	for _, u := range r.GetRows() {
		name := cmp.Or(u.GetKey(), "(none)")
		row(name, u)
	}
	row("total", r.GetTotal())
	_ = w.Flush()
	for _, b := range r.GetBudgets() {
		fmt.Fprintf(out, "budget %s (since %s):", b.GetPeriod(), stamp(b.GetPeriodStart().AsTime()))
		if b.GetTokenLimit() > 0 {
			fmt.Fprintf(out, " %d of %d tokens", b.GetTokensUsed(), b.GetTokenLimit())
		}
		if b.GetCostLimitUsd() > 0 {
			fmt.Fprintf(out, " %.4f of %.4f USD", b.GetCostUsedUsd(), b.GetCostLimitUsd())
		}
		fmt.Fprintln(out)
	}
}
