// Package catalogapi serves CatalogService: a tenant's catalog YAML
// validated and applied (or staged, or tried), its routing rules listed
// and tried (RouteDryRun), its changes streamed, and its usage
// (internal/gateway/usageapi). A service API, apart from the core as
// package gateway's doc says (it also reaches the tenants' cache through
// an interface below); its HTTP routes are grpc-gateway's, from the same
// service.
package catalogapi

import (
	"context"
	"slices"

	"google.golang.org/grpc"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/gateway/usageapi"
	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/tools"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Store is where catalogs are applied and read (store.Store).
type Store interface {
	ApplyCatalog(ctx context.Context, c agent.Catalog, dryRun bool) (store.ApplyReport, error)
	StageCatalog(ctx context.Context, c agent.Catalog) (store.ApplyReport, error)
	TenantSettings(ctx context.Context, tenantID string) (store.TenantSettings, error)
	ListAgents(ctx context.Context, tenantID string) ([]agent.Agent, error)
}

// Tenants is the process's cache of tenants' settings (tenant.Cache),
// told when a tenant's catalog changed.
type Tenants interface {
	Settings(ctx context.Context, tenantID string) (*tenant.Settings, error)
	Invalidate(tenantID string)
	Watch(tenantID string) (changed <-chan struct{}, stop func())
}

// Core is what the API needs of the gateway's core: the caller of a
// call's credential, an error as the call's status (never an internal
// error's text), and the core's conversions of agents and turn contexts.
type Core interface {
	TenantOf(ctx context.Context) string
	StatusOf(ctx context.Context, err error) error
	Caller(ctx context.Context) *agent.Caller
	AgentInfo(a agent.Agent, isDefault bool) *pb.AgentInfo
	TurnContext(c *pb.TurnContext) agent.TurnContext
}

// Options make a Service.
type Options struct {
	Store Store
	Kinds catalog.Kinds
	// Tenants, when set, is told of each change applied.
	Tenants Tenants
	// ResolveEnv is what resolves the entries that need the far side
	// (tenant.ResolveEnvOf, within the operator's egress policy).
	ResolveEnv func(ctx context.Context, allowUnreachable bool) func(agent.TenantCatalog) (tools.ResolveEnv, error)
	// Usage answers GetUsage.
	Usage *usageapi.Service
	Core  Core
}

// Service implements pb.CatalogServiceServer for the caller's tenant.
type Service struct {
	pb.UnimplementedCatalogServiceServer
	o Options
}

// New returns the catalog API of o.
func New(o Options) *Service { return &Service{o: o} }

// RegisterGRPC adds CatalogService to g.
func (c *Service) RegisterGRPC(g grpc.ServiceRegistrar) { pb.RegisterCatalogServiceServer(g, c) }

// GetUsage implements pb.CatalogServiceServer (usageapi).
func (c *Service) GetUsage(ctx context.Context, in *pb.GetUsageRequest) (*pb.GetUsageResponse, error) {
	return c.o.Usage.GetUsage(ctx, in)
}

// maxCatalogFiles bounds the files of one UpsertCatalog (each is bounded
// by catalog.MaxFileBytes, the request by gRPC's message size).
const maxCatalogFiles = 100

// UpsertCatalog implements pb.CatalogServiceServer.
func (c *Service) UpsertCatalog(ctx context.Context, in *pb.UpsertCatalogRequest) (*pb.UpsertCatalogResponse, error) {
	tenantID := c.o.Core.TenantOf(ctx)
	if n := len(in.GetFiles()); n > maxCatalogFiles {
		return nil, c.o.Core.StatusOf(ctx, agent.Errorf(agent.CodeInvalid, "%d files; the limit is %d", n, maxCatalogFiles))
	}
	files := map[string][]byte{}
	for name, doc := range in.GetFiles() {
		files[name] = []byte(doc)
	}
	cat, err := catalog.ParseFiles(c.o.Kinds, files)
	if err != nil {
		// Every problem with the documents, one per line, file:line first.
		return nil, c.o.Core.StatusOf(ctx, agent.WithCode(agent.CodeInvalid, err))
	}
	for _, t := range cat.Tenants {
		if t.TenantID != tenantID {
			// Never reveal or touch another tenant's catalog.
			return nil, c.o.Core.StatusOf(ctx, agent.Errorf(agent.CodePermissionDenied,
				"the documents name tenant %q; this token may only change tenant %q", t.TenantID, tenantID))
		}
	}
	// Entries that need the far side (an MCP server's tools) are resolved
	// only now that the documents are known to be sound and the tenant's,
	// within the operator's egress policy that ParseFiles checked them by.
	env := c.o.ResolveEnv(ctx, in.GetAllowUnreachable())
	if err := catalog.Resolve(ctx, c.o.Kinds, &cat, env); err != nil {
		return nil, c.o.Core.StatusOf(ctx, err)
	}
	var report store.ApplyReport
	switch {
	case in.GetStage() && in.GetDryRun():
		return nil, c.o.Core.StatusOf(ctx, agent.Errorf(agent.CodeInvalid, "stage and dry_run: choose one"))
	case in.GetStage():
		// Nothing that serves changes: no cache to invalidate.
		report, err = c.o.Store.StageCatalog(ctx, cat)
	default:
		report, err = c.o.Store.ApplyCatalog(ctx, cat, in.GetDryRun())
	}
	if err != nil {
		return nil, c.o.Core.StatusOf(ctx, err)
	}
	if !in.GetDryRun() && !in.GetStage() && c.o.Tenants != nil {
		// A worker in this process serves the next turn with the new
		// catalog at once; others hear of it from the notification.
		c.o.Tenants.Invalidate(tenantID)
	}
	out := &pb.UpsertCatalogResponse{}
	for _, ch := range report.Changes {
		out.Changes = append(out.Changes, &pb.CatalogChange{Kind: ch.Kind, Name: ch.Name, Action: ch.Action, Version: int32(ch.Version), Note: ch.Note, Source: ch.Source})
	}
	if r, err := c.o.Store.TenantSettings(ctx, tenantID); err == nil {
		out.CatalogVersion = r.Version
	}
	return out, nil
}

// ListRules implements pb.CatalogServiceServer.
func (c *Service) ListRules(ctx context.Context, _ *pb.ListRulesRequest) (*pb.ListRulesResponse, error) {
	r, err := c.o.Store.TenantSettings(ctx, c.o.Core.TenantOf(ctx))
	if err != nil {
		return nil, c.o.Core.StatusOf(ctx, err)
	}
	return &pb.ListRulesResponse{Rules: toPBRules(r.Rules), DefaultAgent: r.DefaultAgent, CatalogVersion: r.Version}, nil
}

// RouteDryRun implements pb.CatalogServiceServer.
func (c *Service) RouteDryRun(ctx context.Context, in *pb.RouteDryRunRequest) (*pb.RouteDryRunResponse, error) {
	tenant := c.o.Core.TenantOf(ctx)
	settings, err := c.o.Tenants.Settings(ctx, tenant)
	if err != nil {
		return nil, c.o.Core.StatusOf(ctx, err)
	}
	// The decision for the admin who asks: rules over caller.* see the
	// admin's token, as a turn started with it would.
	tc := c.o.Core.TurnContext(in.GetContext())
	d, err := settings.Table.Route(routing.Input{TenantID: tenant, Caller: c.o.Core.Caller(ctx), UserRole: tc.UserRole, UIPage: tc.UIPage,
		Metadata: tc.Metadata, Message: in.GetMessage()}, settings.DefaultAgent)
	if err != nil {
		return nil, c.o.Core.StatusOf(ctx, err)
	}
	out := &pb.RouteDryRunResponse{AgentId: d.AgentID, Rule: d.Rule, CatalogVersion: settings.Version}
	for _, e := range d.Errors {
		out.Errors = append(out.Errors, &pb.RuleError{Rule: e.Rule, Error: e.Err})
	}
	return out, nil
}

// StreamCatalog implements pb.CatalogServiceServer: a snapshot, then a
// delta after each change.
func (c *Service) StreamCatalog(_ *pb.StreamCatalogRequest, ss grpc.ServerStreamingServer[pb.CatalogEvent]) error {
	ctx := ss.Context()
	tenant := c.o.Core.TenantOf(ctx)
	changed, stop := c.o.Tenants.Watch(tenant) // before the snapshot: no change falls between
	defer stop()
	prev, err := c.load(ctx, tenant)
	if err != nil {
		return c.o.Core.StatusOf(ctx, err)
	}
	first := prev.event(c.o.Core.AgentInfo)
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
			return c.o.Core.StatusOf(ctx, err)
		}
		if cur.version == prev.version {
			continue
		}
		if err := ss.Send(cur.delta(prev, c.o.Core.AgentInfo)); err != nil {
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

func (c *Service) load(ctx context.Context, tenant string) (catalogState, error) {
	r, err := c.o.Store.TenantSettings(ctx, tenant)
	if err != nil {
		return catalogState{}, err
	}
	agents, err := c.o.Store.ListAgents(ctx, tenant)
	if err != nil {
		return catalogState{}, err
	}
	return catalogState{version: r.Version, defaultAgent: r.DefaultAgent, agents: agents, rules: r.Rules}, nil
}

// agentInfo is the core's conversion of an agent (Core.AgentInfo).
type agentInfo func(a agent.Agent, isDefault bool) *pb.AgentInfo

func (s catalogState) event(info agentInfo) *pb.CatalogEvent {
	ev := &pb.CatalogEvent{CatalogVersion: s.version, DefaultAgent: s.defaultAgent, Rules: toPBRules(s.rules), RulesChanged: true}
	for _, a := range s.agents {
		ev.Agents = append(ev.Agents, info(a, a.ID == s.defaultAgent))
	}
	return ev
}

func (s catalogState) delta(prev catalogState, info agentInfo) *pb.CatalogEvent {
	ev := &pb.CatalogEvent{CatalogVersion: s.version, DefaultAgent: s.defaultAgent}
	old := map[string]int{}
	for _, a := range prev.agents {
		old[a.ID] = a.Version
	}
	for _, a := range s.agents {
		if v, ok := old[a.ID]; !ok || v != a.Version {
			ev.Agents = append(ev.Agents, info(a, a.ID == s.defaultAgent))
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
