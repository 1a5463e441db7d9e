package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/store"
)

// routeCmd shows which agent a request would be routed to, without running it.
func routeCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("route", flag.ContinueOnError)
	tenant := fs.String("tenant", "demo", "tenant id")
	role := fs.String("role", "", "the request's user_role")
	page := fs.String("page", "", "the request's ui_page")
	var meta multiFlag
	fs.Var(&meta, "metadata", "key=value of the request's metadata (repeatable)")
	dryRun := fs.Bool("dry-run", true, "only show the decision (the only mode: routing runs inside turns)")
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*dryRun {
		return fmt.Errorf("route: only --dry-run is supported; start a turn with run or chat to route for real")
	}
	if *dbURL == "" {
		return fmt.Errorf("route: DATABASE_URL is not set")
	}
	in := routing.Input{TenantID: *tenant, UserRole: *role, UIPage: *page, Message: strings.Join(fs.Args(), " "), Metadata: map[string]string{}}
	for _, kv := range meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("route: --metadata %q: want key=value", kv)
		}
		in.Metadata[k] = v
	}
	st, err := store.Open(ctx, *dbURL, store.Options{Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := st.Routing(ctx, *tenant)
	if err != nil {
		return fmt.Errorf("route: %w", err)
	}
	table, err := routing.Compile(r.Rules, nil)
	if err != nil {
		return fmt.Errorf("route: %w", err)
	}
	d, err := table.Route(in, r.DefaultAgent)
	for _, e := range d.Errors {
		fmt.Fprintf(out, "rule %s skipped: %s\n", e.Rule, e.Err)
	}
	if err != nil {
		return fmt.Errorf("route: %w", err)
	}
	fmt.Fprintf(out, "agent %s (rule %s, catalog version %d of tenant %s, %d rules)\n", d.AgentID, d.Rule, r.Version, *tenant, table.Len())
	return nil
}
