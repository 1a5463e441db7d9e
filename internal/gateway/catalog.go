package gateway

import (
	"context"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/gateway/catalogapi"
	"github.com/agentflow/agentflow/internal/gateway/usageapi"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/tools"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// CatalogService is what the catalog API (internal/gateway/catalogapi,
// with internal/gateway/usageapi's GetUsage) is served over: NewGRPCServer
// serves it for the caller's tenant.
type CatalogService struct {
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

// api is the catalog API of c, whose callers s authenticates; its errors
// are logged by c's logger.
func (c *CatalogService) api(s *Service) *catalogapi.Service {
	core := catalogCore{apiCore: apiCore{s}, logger: c.logger}
	o := catalogapi.Options{Store: c.store, Kinds: c.kinds, Usage: usageapi.New(c.store, core), Core: core,
		ResolveEnv: func(ctx context.Context, allowUnreachable bool) func(agent.TenantCatalog) (tools.ResolveEnv, error) {
			return tenant.ResolveEnvOf(ctx, c.store, c.kinds.Deps().Egress, allowUnreachable)
		}}
	// A nil pointer in an interface is not a nil interface: the API
	// tells "no cache" by the interface.
	if c.tenants != nil {
		o.Tenants = c.tenants
	}
	return catalogapi.New(o)
}

// catalogCore is the core as the catalog API sees it.
type catalogCore struct {
	apiCore
	logger *zap.Logger
}

func (c catalogCore) StatusOf(ctx context.Context, err error) error {
	return Status(ctx, c.logger, err)
}
func (c catalogCore) Caller(ctx context.Context) *agent.Caller { return CallerOf(ctx).Caller() }
func (c catalogCore) AgentInfo(a agent.Agent, isDefault bool) *pb.AgentInfo {
	return toPBAgent(a, isDefault)
}
func (c catalogCore) TurnContext(tc *pb.TurnContext) agent.TurnContext { return toContext(tc) }

// catalogServer is CatalogService as served: catalogapi's methods, and
// the processes' (processes.go), which stay with the core's conversions.
type catalogServer struct {
	*catalogapi.Service
	c *CatalogService
}

func (s catalogServer) GetProcess(ctx context.Context, in *pb.GetProcessRequest) (*pb.Process, error) {
	return s.c.GetProcess(ctx, in)
}

func (s catalogServer) ListProcesses(ctx context.Context, in *pb.ListProcessesRequest) (*pb.ListProcessesResponse, error) {
	return s.c.ListProcesses(ctx, in)
}

func (s catalogServer) ListProcessVersions(ctx context.Context, in *pb.ListProcessVersionsRequest) (*pb.ListProcessVersionsResponse, error) {
	return s.c.ListProcessVersions(ctx, in)
}
