package kind

import (
	"context"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/jqproc"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Deps are the dependencies injected into builders. Fields are filled with
// defaults by WithDefaults; new dependencies are added here.
type Deps struct {
	// Logger for builders and tools. Default: a no-op logger.
	Logger *zap.Logger
	// Secrets resolves secrets named by reference in a tool's config
	// (`secret: env:NAME`), at call time only. Default: refuses every
	// reference.
	Secrets Secrets
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Describe asks the team's worker on a task queue how it describes
	// its activities as tools (its agentflow.tools activity), for
	// activity entries that write no description or parameters of their
	// own. Default (nil): such entries keep the kind's defaults.
	Describe func(ctx context.Context, taskQueue string) (agent.PublishedTools, error)
	// MCPCommands are the commands stdio MCP servers may run on this
	// worker (AGENTFLOW_MCP_COMMANDS): executable names, looked up in
	// PATH, or absolute paths. A catalog names one, never chooses it.
	// Default: none, and stdio servers are refused.
	MCPCommands []string
	// JQ runs execute_pipeline's jq_transform programs in memory-capped
	// child processes, a few at once (internal/jqproc). Default (nil): the
	// process's shared pool with jqproc's defaults.
	JQ *jqproc.Pool
	// SecretGrants are the secret references each tenant's catalog may
	// name (AGENTFLOW_SECRETS), checked when a catalog is applied; the
	// resolver in Secrets refuses the rest when a call is made
	// (secrets.Scoped). Default (nil): no check at apply.
	SecretGrants *secrets.Grants
	// Egress is the operator's egress policy (AGENTFLOW_EGRESS_ALLOW),
	// which every tenant's allowlist can only narrow: a catalog's entries
	// are checked against it when it is applied, and tools' clients are
	// built under it. Default (nil): the default operator policy, which
	// opens no loopback, private, link-local or metadata address.
	Egress *egress.Operator
	// MCPEnv is the environment a stdio MCP server starts with, before
	// the variables its config adds from secret references: a few
	// harmless ones (PATH, HOME, LANG, TMPDIR), never the worker's
	// secrets. Default: empty.
	MCPEnv []string
	// MCPSessions keeps sessions with MCP servers open between calls: a
	// pool the mcp kind makes (mcptool.NewSessions). Default: none, and
	// each call connects anew.
	MCPSessions MCPSessions
	// Processes stores the tenants' process definitions, for
	// patch_workflow. Default: refuses every call.
	Processes Processes
	// Composites records pipeline runs and promotes a pipeline run often
	// enough into a tool of the tenant's (a composite). Default: none, no
	// promotion.
	Composites Composites
	// ToolSearch finds a tenant's tools for search_tools. Default: none.
	ToolSearch ToolSearch
	// OpenAPIMaxSpecBytes bounds an API document openapi_action reads
	// from spec_url or openapi_url (AGENTFLOW_OPENAPI_MAX_SPEC_BYTES).
	// Default (0): openapitool.DefaultMaxSpecBytes.
	OpenAPIMaxSpecBytes int64
	// ModelProviders are the model providers of the worker's own beside
	// the built-in ones (llm.Config.Providers): a catalog's agents may
	// name them. Default: none.
	ModelProviders []string
	// Knowledge searches tenants' collections, for the retrieve kind.
	Knowledge Knowledge
	// Memories keeps the long-term memories of remember and recall.
	// Default: none, and their calls fail.
	Memories Memories
}

// Composites keeps the tenant's composite tools (internal/store).
type Composites interface {
	// RecordPipelineRun records that a call (tenant, job, call) ran a
	// pipeline of the given shape; a retried call counts once. When the
	// tenant has now run the shape as often as it promotes after and has
	// no composite of it yet, it stores composite as a new tool of the
	// tenant, grants it to the agents that take composites, and returns
	// its name (which may differ from composite.Name); else "".
	RecordPipelineRun(ctx context.Context, tenantID, jobID, callID, shape string, composite agent.Tool) (string, error)
}

// ToolSearch finds tools of a tenant (internal/store).
type ToolSearch interface {
	// SearchTools returns the tenant's tools that match query, best first,
	// at most limit.
	SearchTools(ctx context.Context, tenantID, query string, limit int) ([]agent.Tool, error)
}

// Processes reads and patches process definitions
// (internal/store.Store implements it).
type Processes interface {
	// Process returns a version of a tenant's process; version 0 is the
	// latest. agent.CodeNotFound says what the tenant has instead.
	Process(ctx context.Context, tenantID, tag string, version int) (agent.ProcessVersion, error)
	// ProcessPatchOf returns the patch a tool call made;
	// agent.CodeNotFound when it made none.
	ProcessPatchOf(ctx context.Context, tenantID, jobID, callID string) (agent.ProcessPatch, error)
	// PatchProcess stores def as the version after p.FromVersion and
	// records p, with the call's approver; the call's earlier patch if it
	// made one. agent.CodeConflict when p.FromVersion is no longer the
	// latest.
	PatchProcess(ctx context.Context, p agent.ProcessPatch, def json.RawMessage) (agent.ProcessPatch, error)
}

type noProcesses struct{}

func (noProcesses) Process(context.Context, string, string, int) (agent.ProcessVersion, error) {
	return agent.ProcessVersion{}, errNoProcesses
}

func (noProcesses) ProcessPatchOf(context.Context, string, string, string) (agent.ProcessPatch, error) {
	return agent.ProcessPatch{}, errNoProcesses
}

func (noProcesses) PatchProcess(context.Context, agent.ProcessPatch, json.RawMessage) (agent.ProcessPatch, error) {
	return agent.ProcessPatch{}, errNoProcesses
}

var errNoProcesses = agent.Errorf(agent.CodeInvalid, "process definitions cannot be read or patched here")

// Secrets resolves secret references (internal/secrets.Resolver).
type Secrets interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

type noSecrets struct{}

func (noSecrets) Resolve(_ context.Context, ref string) (string, error) {
	return "", agent.Errorf(agent.CodeInvalid, "secret %s cannot be resolved here", ref)
}

// WithDefaults returns d with nil fields replaced by their defaults.
func (d Deps) WithDefaults() Deps {
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.Secrets == nil {
		d.Secrets = noSecrets{}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Processes == nil {
		d.Processes = noProcesses{}
	}
	return d
}

// Knowledge searches a tenant's collections (knowledge.Searcher: the
// store with the model layer's embedder).
type Knowledge interface {
	// Collection returns the tenant's collection; agent.CodeNotFound for
	// another tenant's, as for a missing one.
	Collection(ctx context.Context, tenant, name string) (agent.Collection, error)
	// Retrieve searches the retrieval's collections of the tenant for
	// query: the best chunks within its top_k and token budget.
	Retrieve(ctx context.Context, tenant, query string, r agent.Retrieval) ([]agent.Hit, agent.Usage, error)
}

// Memories keeps long-term memories (internal/knowledge.Memories).
type Memories interface {
	Remember(ctx context.Context, scope agent.MemoryScope, m agent.MemoryRecord) (agent.MemoryRecord, bool, error)
	Recall(ctx context.Context, scope agent.MemoryScope, text string, topK int) ([]agent.MemoryRecord, agent.Usage, error)
}

// MCPSessions is the mcp kind's pool of sessions with MCP servers
// (mcptool.Sessions), which Deps only carries from the worker that makes
// it and closes it when it stops to the kind that uses it: a pool of
// another type is none.
type MCPSessions interface {
	// Len is the number of sessions open.
	Len() int
	// Close ends every session.
	Close()
}
