package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// routeCmd asks the gateway which agent a request would be routed to,
// without running it (CatalogService.RouteDryRun, for the token's tenant).
func routeCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("route", `usage: starter route --dry-run [flags] "message"`)
	api := addAPIFlags(fs)
	role := fs.String("role", "", "the request's context.user_role: a client hint, client.user_role in rules (caller.roles come from the token)")
	page := fs.String("page", "", "the request's ui_page")
	var meta multiFlag
	fs.Var(&meta, "metadata", "key=value of the request's metadata (repeatable)")
	dryRun := fs.Bool("dry-run", true, "only show the decision (the only mode: routing runs inside turns)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*dryRun {
		return fmt.Errorf("route: only --dry-run is supported; start a turn with run or chat to route for real")
	}
	tc := &pb.TurnContext{UserRole: *role, UiPage: *page, Metadata: map[string]string{}}
	for _, kv := range meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("route: --metadata %q: want key=value", kv)
		}
		tc.Metadata[k] = v
	}
	c, ctx, closeConn, err := api.dialCatalog(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	d, err := c.RouteDryRun(ctx, &pb.RouteDryRunRequest{Message: strings.Join(fs.Args(), " "), Context: tc})
	if err != nil {
		return api.failed("route", err)
	}
	for _, e := range d.GetErrors() {
		fmt.Fprintf(out, "rule %s skipped: %s\n", e.GetRule(), e.GetError())
	}
	fmt.Fprintf(out, "agent %s (rule %s, catalog version %d)\n", d.GetAgentId(), d.GetRule(), d.GetCatalogVersion())
	return nil
}
