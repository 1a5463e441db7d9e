package gateway

import (
	"context"
	"slices"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tenant"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// CatalogService implements pb.CatalogServiceServer for the caller's tenant.
type CatalogService struct {
	pb.UnimplementedCatalogServiceServer
	store   *store.Store
	kinds   catalog.Kinds
	tenants *tenant.Cache
	logger  *zap.Logger
}

// NewCatalogService returns the catalog API over st; it tells tenants
// when a tenant's catalog changed.
func NewCatalogService(st *store.Store, kinds catalog.Kinds, tenants *tenant.Cache, logger *zap.Logger) *CatalogService {
	return &CatalogService{store: st, kinds: kinds, tenants: tenants, logger: logger}
}

// maxCatalogFiles bounds the files of one UpsertCatalog (each is bounded
// by catalog.MaxFileBytes, the request by gRPC's message size).
const maxCatalogFiles = 100

// UpsertCatalog implements pb.CatalogServiceServer.
func (c *CatalogService) UpsertCatalog(ctx context.Context, in *pb.UpsertCatalogRequest) (*pb.UpsertCatalogResponse, error) {
	tenantID := TenantOf(ctx)
	if n := len(in.GetFiles()); n > maxCatalogFiles {
		return nil, Status(ctx, c.logger, agent.Errorf(agent.CodeInvalid, "%d files; the limit is %d", n, maxCatalogFiles))
	}
	files := map[string][]byte{}
	for name, doc := range in.GetFiles() {
		files[name] = []byte(doc)
	}
	cat, err := catalog.ParseFiles(c.kinds, files)
	if err != nil {
		// Every problem with the documents, one per line, file:line first.
		return nil, Status(ctx, c.logger, agent.WithCode(agent.CodeInvalid, err))
	}
	for _, t := range cat.Tenants {
		if t.TenantID != tenantID {
			// Never reveal or touch another tenant's catalog.
			return nil, Status(ctx, c.logger, agent.Errorf(agent.CodePermissionDenied,
				"the documents name tenant %q; this token may only change tenant %q", t.TenantID, tenantID))
		}
	}
	// Entries that need the far side (an MCP server's tools) are resolved
	// only now that the documents are known to be sound and the tenant's,
	// within the operator's egress policy that ParseFiles checked them by.
	env := tenant.ResolveEnvOf(ctx, c.store, c.kinds.Deps().Egress, in.GetAllowUnreachable())
	if err := catalog.Resolve(ctx, c.kinds, &cat, env); err != nil {
		return nil, Status(ctx, c.logger, err)
	}
	var report store.ApplyReport
	switch {
	case in.GetStage() && in.GetDryRun():
		return nil, Status(ctx, c.logger, agent.Errorf(agent.CodeInvalid, "stage and dry_run: choose one"))
	case in.GetStage():
		// Nothing that serves changes: no cache to invalidate.
		report, err = c.store.StageCatalog(ctx, cat)
	default:
		report, err = c.store.ApplyCatalog(ctx, cat, in.GetDryRun())
	}
	if err != nil {
		return nil, Status(ctx, c.logger, err)
	}
	if !in.GetDryRun() && !in.GetStage() && c.tenants != nil {
		// A worker in this process serves the next turn with the new
		// catalog at once; others hear of it from the notification.
		c.tenants.Invalidate(tenantID)
	}
	out := &pb.UpsertCatalogResponse{}
	for _, ch := range report.Changes {
		out.Changes = append(out.Changes, &pb.CatalogChange{Kind: ch.Kind, Name: ch.Name, Action: ch.Action, Version: int32(ch.Version), Note: ch.Note, Source: ch.Source})
	}
	if r, err := c.store.TenantSettings(ctx, tenantID); err == nil {
		out.CatalogVersion = r.Version
	}
	return out, nil
}

// ListRules implements pb.CatalogServiceServer.
func (c *CatalogService) ListRules(ctx context.Context, _ *pb.ListRulesRequest) (*pb.ListRulesResponse, error) {
	r, err := c.store.TenantSettings(ctx, TenantOf(ctx))
	if err != nil {
		return nil, Status(ctx, c.logger, err)
	}
	return &pb.ListRulesResponse{Rules: toPBRules(r.Rules), DefaultAgent: r.DefaultAgent, CatalogVersion: r.Version}, nil
}

// RouteDryRun implements pb.CatalogServiceServer.
func (c *CatalogService) RouteDryRun(ctx context.Context, in *pb.RouteDryRunRequest) (*pb.RouteDryRunResponse, error) {
	tenant := TenantOf(ctx)
	settings, err := c.tenants.Settings(ctx, tenant)
	if err != nil {
		return nil, Status(ctx, c.logger, err)
	}
	// The decision for the admin who asks: rules over caller.* see the
	// admin's token, as a turn started with it would.
	tc := toContext(in.GetContext())
	d, err := settings.Table.Route(routing.Input{TenantID: tenant, Caller: CallerOf(ctx).Caller(), UserRole: tc.UserRole, UIPage: tc.UIPage,
		Metadata: tc.Metadata, Message: in.GetMessage()}, settings.DefaultAgent)
	if err != nil {
		return nil, Status(ctx, c.logger, err)
	}
	out := &pb.RouteDryRunResponse{AgentId: d.AgentID, Rule: d.Rule, CatalogVersion: settings.Version}
	for _, e := range d.Errors {
		out.Errors = append(out.Errors, &pb.RuleError{Rule: e.Rule, Error: e.Err})
	}
	return out, nil
}

// StreamCatalog implements pb.CatalogServiceServer: a snapshot, then a
// delta after each change.
func (c *CatalogService) StreamCatalog(_ *pb.StreamCatalogRequest, ss grpc.ServerStreamingServer[pb.CatalogEvent]) error {
	ctx := ss.Context()
	tenant := TenantOf(ctx)
	changed, stop := c.tenants.Watch(tenant) // before the snapshot: no change falls between
	defer stop()
	prev, err := c.load(ctx, tenant)
	if err != nil {
		return Status(ctx, c.logger, err)
	}
	first := prev.event()
	first.Snapshot = true
	if err := ss.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		cur, err := c.load(ctx, tenant)
		if err != nil {
			return Status(ctx, c.logger, err)
		}
		if cur.version == prev.version {
			continue
		}
		if err := ss.Send(cur.delta(prev)); err != nil {
			return err
		}
		prev = cur
	}
}

// catalogState is what StreamCatalog compares between versions.
type catalogState struct {
	version      int64
	defaultAgent string
	agents       []agent.Agent
	rules        []agent.Rule
}

func (c *CatalogService) load(ctx context.Context, tenant string) (catalogState, error) {
	r, err := c.store.TenantSettings(ctx, tenant)
	if err != nil {
		return catalogState{}, err
	}
	agents, err := c.store.ListAgents(ctx, tenant)
	if err != nil {
		return catalogState{}, err
	}
	return catalogState{version: r.Version, defaultAgent: r.DefaultAgent, agents: agents, rules: r.Rules}, nil
}

func (s catalogState) event() *pb.CatalogEvent {
	ev := &pb.CatalogEvent{CatalogVersion: s.version, DefaultAgent: s.defaultAgent, Rules: toPBRules(s.rules), RulesChanged: true}
	for _, a := range s.agents {
		ev.Agents = append(ev.Agents, toPBAgent(a, a.ID == s.defaultAgent))
	}
	return ev
}

func (s catalogState) delta(prev catalogState) *pb.CatalogEvent {
	ev := &pb.CatalogEvent{CatalogVersion: s.version, DefaultAgent: s.defaultAgent}
	old := map[string]int{}
	for _, a := range prev.agents {
		old[a.ID] = a.Version
	}
	for _, a := range s.agents {
		if v, ok := old[a.ID]; !ok || v != a.Version {
			ev.Agents = append(ev.Agents, toPBAgent(a, a.ID == s.defaultAgent))
		}
		delete(old, a.ID)
	}
	for _, a := range prev.agents {
		if _, gone := old[a.ID]; gone {
			ev.RemovedAgents = append(ev.RemovedAgents, a.ID)
		}
	}
	if !slices.Equal(s.rules, prev.rules) {
		ev.Rules, ev.RulesChanged = toPBRules(s.rules), true
	}
	return ev
}

func toPBRules(rules []agent.Rule) []*pb.Rule {
	out := make([]*pb.Rule, 0, len(rules))
	for _, r := range rules {
		out = append(out, &pb.Rule{Name: r.Name, Priority: int32(r.Priority), When: r.Condition, AgentId: r.AgentID})
	}
	return out
}
