package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/jqproc"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Tool is a runnable tool instance built from an agent.Tool spec. Run may
// be called concurrently: one built tool serves every call of its spec.
type Tool interface {
	// Run executes one call. call.Args is a JSON object (the registry
	// checks that); an error the model can fix carries agent.CodeInvalid.
	Run(ctx context.Context, call Call) (Output, error)
}

// Call is one call of a tool: the model's arguments, and what the runtime
// offers the call on behalf of its tenant. A tool uses these rather than
// reaching for the network, the store or the environment itself.
type Call struct {
	// Args is the model's arguments, a JSON object.
	Args json.RawMessage
	// TenantID, JobID and CallID say whose call this is; WorkflowID is
	// the turn's workflow.
	TenantID, JobID, CallID string
	WorkflowID              string
	// HTTP calls out under the tenant's egress policy (internal/egress).
	HTTP *http.Client
	// Data reads data by ref (cas://…, artifact://…) that the tenant may
	// read, whole; another tenant's ref is agent.CodeNotFound. A ref may
	// also name an input of the turn by index, "previous_results[i]": the
	// result_ref of the request's context.previous_results[i] (an index
	// past the end is agent.CodeInvalid). Data larger than
	// store.MaxDataBytes is refused: read it with OpenBlob.
	Data func(ctx context.Context, ref string) ([]byte, error)
	// OpenBlob reads binary data the tenant may read — a file by its
	// cas:// ref, or "previous_results[i]" as Data takes it — as a
	// stream: the stored bytes a chunk at a time, never whole in memory.
	// Close it when done. Another tenant's ref is agent.CodeNotFound.
	OpenBlob func(ctx context.Context, ref string) (Blob, error)
	// WriteBlob stores the bytes r yields as a blob of the tenant's — a
	// file, an image, a download — as it reads them: content-addressed
	// (the sha256 computed on the way), at most MaxBlobBytes, and nothing
	// visible until all of it is stored, so that a call that fails midway
	// leaves no partial blob and its retry writes the same ref.
	// contentType "" is sniffed from the first bytes. Name the blob in
	// Output.Files (File.Ref) to hand it to the turn as a file.
	WriteBlob func(ctx context.Context, r io.Reader, contentType string) (agent.BlobInfo, error)
	// Cache keeps results of pure calls for the tenant.
	Cache Cache
	// Progress reports what the call is doing: the turn's stream shows it
	// as tool_progress events. Reports are batched; the latest wins.
	Progress func(message string)
	// Emit sends application data for the turn's clients — a chart, a
	// citation, a figure that grows — as a custom event of the call: a
	// name, an optional id (a later event with the same name and id
	// replaces the value, for clients and for events not yet sent), and a
	// JSON value of at most agent.MaxCustomValueBytes. Every event is
	// delivered, in order, after the call's tool_start and before its
	// tool_end. It returns an agent.CodeInvalid error and sends nothing
	// when the event is not of its shape (agent.CustomEvent.Validate) or
	// the call has emitted all it may (eventlog.MaxCustomBytes); a tool
	// that gets one goes on with its work.
	Emit func(c agent.CustomEvent) error
	// Granted reports whether the calling agent has the named tool.
	Granted func(name string) bool
	// AgentID is the calling agent's id.
	AgentID string
	// Caller returns who asked for the turn, from its credential (nil
	// for a turn without one): the owner of the memories remember and
	// recall use.
	Caller func(ctx context.Context) (*agent.Caller, error)
}

// Blob is a stored blob opened for reading (Call.OpenBlob): a stream that
// seeks, and what is stored.
type Blob interface {
	io.ReadSeekCloser
	Info() agent.BlobInfo
}

// MaxBlobBytes bounds a blob a call writes (Call.WriteBlob): 1 GiB.
const MaxBlobBytes = 1 << 30

// Cache keeps a tenant's tool results by key for a while.
type Cache interface {
	Get(ctx context.Context, key string) (Output, bool, error)
	Put(ctx context.Context, key string, out Output, ttl time.Duration) error
}

// WithDefaults returns c with nil fields replaced by ones that do nothing
// or refuse: no egress, no data, no blobs, no cache, progress dropped,
// custom events checked and dropped.
func (c Call) WithDefaults() Call {
	if c.HTTP == nil {
		c.HTTP = &http.Client{Transport: refuseTransport{}}
	}
	if c.Data == nil {
		c.Data = func(context.Context, string) ([]byte, error) {
			return nil, agent.Errorf(agent.CodeNotFound, "no data can be read by ref here")
		}
	}
	if c.OpenBlob == nil {
		c.OpenBlob = func(context.Context, string) (Blob, error) {
			return nil, agent.Errorf(agent.CodeNotFound, "no data can be read by ref here")
		}
	}
	if c.WriteBlob == nil {
		c.WriteBlob = func(context.Context, io.Reader, string) (agent.BlobInfo, error) {
			return agent.BlobInfo{}, agent.Errorf(agent.CodeInvalid, "no files can be stored here")
		}
	}
	if c.Granted == nil {
		c.Granted = func(string) bool { return false }
	}
	if c.Cache == nil {
		c.Cache = noCache{}
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	if c.Emit == nil {
		c.Emit = func(e agent.CustomEvent) error { return e.Validate() }
	}
	return c
}

type refuseTransport struct{}

func (refuseTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, agent.Errorf(agent.CodeInvalid, "this tool may not call %s: no egress is configured", r.URL.Host)
}

type noCache struct{}

func (noCache) Get(context.Context, string) (Output, bool, error)        { return Output{}, false, nil }
func (noCache) Put(context.Context, string, Output, time.Duration) error { return nil }

// Output is the result of a tool call.
type Output struct {
	// Text is what the model sees of the call. The runtime adds what it
	// keeps of Data: its ref and a preview, and the data itself when
	// ShowData is set and it is small.
	Text string
	// Data is an optional structured result, for callers and later calls.
	// A dataset (a JSON array of objects) is always kept by reference, so
	// that later steps, turns and workflows can use it; other data when
	// it is large.
	Data json.RawMessage
	// ShowData says the model needs Data itself, not only Text: a tool
	// whose Text is a summary sets it; one whose Text says it all (the
	// calculator's) leaves it unset.
	ShowData bool
	// Preview, when the tool knows the shape of its Data (a pipeline
	// does), describes it, and the runtime need not read the data back to
	// find out: Type, RowCount, Fields and Sample (agent.SampleRows rows).
	Preview *agent.DataPreview
	// CacheHit says the output came from the tenant's cache.
	CacheHit bool
	// Files are images and other files the call produced (a chart, a
	// screenshot, a PDF): the runtime stores each as the tenant's blob,
	// shows the model the images, and gives the turn's result an image
	// or file block by cas:// ref. At most MaxFiles, each of Data at most
	// MaxFileBytes (one by Ref at most MaxBlobBytes); an output with
	// files is not cached.
	Files []File
	// Citations name the chunks of documents the output quotes (the
	// retrieve kind's): the turn's result cites them when its answer
	// draws on them (agent.Cited).
	Citations []agent.Citation
}

// File is a file a tool produced: its bytes, or the ref of a blob the
// call stored with Call.WriteBlob (a file of any size, which the runtime
// takes as it is).
type File struct {
	Name     string // optional
	MIMEType string // e.g. image/png; sniffed when empty, the blob's when Ref is set
	Data     []byte
	// Ref, when set, is the cas:// ref of a blob of the tenant's the call
	// stored; Data is then empty.
	Ref string
}

// Bounds of a call's files.
const (
	MaxFiles     = 8
	MaxFileBytes = 20 << 20
)

// Kind is a tool kind: the builder a catalog names with `kind:`.
type Kind struct {
	Name        string
	Description string // default description of tools of this kind
	// Parameters is the default JSON Schema of the arguments (an object
	// schema); a catalog may override it.
	Parameters json.RawMessage
	// Config is the JSON Schema of the kind's `config` in the catalog,
	// checked when a catalog is applied and published in
	// catalog/schema.json; nil: the kind takes no config.
	Config json.RawMessage
	// Build validates spec.Config and returns a tool. A bad config is an
	// agent.CodeInvalid error. Build must not do I/O: the catalog loader
	// calls it to validate config long before any call is made.
	Build func(spec agent.Tool, deps Deps) (Tool, error)
	// Local marks kinds whose calls are quick and in-process (no network,
	// milliseconds of CPU): their tools run as local activities unless the
	// catalog says `execution: activity`.
	Local bool
	// Approval is the approval policy of this kind's tools whose catalog
	// entry gives none: never, always or a CEL expression over args.
	// Empty: never. A kind whose calls can change things elsewhere asks
	// for approval of those calls, so that the safe policy is the default.
	// See approval.go for the whole rule.
	Approval string
	// ApprovalFloor, when set, is a policy every tool of the kind is held
	// to whatever its own says (the strictest of the two applies): for
	// kinds whose tools are made rather than written (composites), so that
	// nothing that derives one can weaken it.
	ApprovalFloor string
	// ApprovalArgs, when set, presents a call's arguments to approval
	// policies (the view they evaluate args over), for kinds whose calls
	// stand for another kind's: a composite's call as the pipeline it
	// binds. Default: the arguments as the model wrote them.
	ApprovalArgs func(spec agent.Tool, args json.RawMessage) (json.RawMessage, error)
	// RefinesApproval says Resolve replaces the kind's default policy with
	// a finer one derived from what it fetched (DerivedApproval); a policy
	// the catalog wrote is kept as a floor either way.
	RefinesApproval bool
	// Resolve, when set, runs when a catalog is applied (after Build and
	// the config schema accepted the entry): it may reach out, through
	// env, for what the entry's tools need — a server's tool list, an
	// API's document — and returns the tools the entry stands for, each a
	// complete spec of this kind, named as the model will call them; an
	// agent granted the entry gets them all. What Resolve fetched is in
	// the specs, so it is pinned with the agent's version. Errors fail the
	// apply: agent.CodeUnavailable when the far side could not be reached
	// (with env.AllowUnreachable, return what can be had without it,
	// perhaps nothing, instead), agent.CodeInvalid for what the catalog
	// must fix.
	Resolve func(ctx context.Context, spec agent.Tool, env ResolveEnv) ([]agent.Tool, error)
	// Admit, when set, says whether the operator lets the tenant have
	// the entry (k8s_job: the namespaces and images AGENTFLOW_K8S_JOBS
	// allows it); checked when a catalog is applied, after Build accepted
	// the entry. A refusal is an agent.CodeInvalid error that says why.
	Admit func(tenantID string, spec agent.Tool) error
}

// ResolveEnv is what Kind.Resolve may use, on behalf of the tenant whose
// catalog is being applied.
type ResolveEnv struct {
	TenantID string
	// HTTP calls out under the egress policy the catalog sets (or the
	// stored one when it sets none).
	HTTP *http.Client
	// AllowUnreachable says that a far side that cannot be reached now
	// must not fail the apply.
	AllowUnreachable bool
	// Deps are the dependencies the kinds' Build gets (the registry's), so
	// that Resolve checks what the worker allows and resolves secrets the
	// same way.
	Deps Deps
}

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
	// MCPSessions keeps sessions with MCP servers open between calls.
	// Default: none, and each call connects anew.
	MCPSessions *MCPSessions
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
	// Default (0): DefaultOpenAPIMaxSpecBytes.
	OpenAPIMaxSpecBytes int64
	// ModelProviders are the model providers of the worker's own beside
	// the built-in ones (llm.Config.Providers): a catalog's agents may
	// name them. Default: none.
	ModelProviders []string
	// OpenAPIDocuments keeps the documents openapi_action calls name by
	// URL. Default: a cache of the deps' own, with their clock.
	OpenAPIDocuments *OpenAPIDocuments
	// Knowledge searches tenants' collections, for the retrieve kind.
	Knowledge Knowledge
	// Memories keeps the long-term memories of remember and recall.
	// Default: none, and their calls fail.
	Memories Memories
}

func (d Deps) openAPIMaxSpecBytes() int64 {
	return agent.OrDefault(d.OpenAPIMaxSpecBytes, DefaultOpenAPIMaxSpecBytes)
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
	if d.OpenAPIDocuments == nil {
		d.OpenAPIDocuments = NewOpenAPIDocuments(d.Now)
	}
	return d
}

// Builtin returns the kinds every worker offers.
func Builtin() []Kind {
	return []Kind{Calculator(), ExecutePipeline(), CompositePipeline(), SearchTools(), OpenAPIAction(), PatchWorkflow(), MCP(), DelegateToAgent(), AskUser(), Retrieve(), Remember(), Recall()}
}

// decodeArgs decodes a call's arguments strictly into v; want shows
// their shape in the error.
func decodeArgs(args json.RawMessage, v any, want string) error {
	if err := decodeStrict(args, v); err != nil {
		return agent.Errorf(agent.CodeInvalid, "arguments: %v; want %s", err, want)
	}
	return nil
}

// decodeConfig decodes a tool spec's config strictly into v; kind names
// the tool kind in the error.
func decodeConfig(raw json.RawMessage, v any, kind string) error {
	if err := decodeStrict(raw, v); err != nil {
		return agent.Errorf(agent.CodeInvalid, "%s config: %v", kind, err)
	}
	return nil
}

// decodeStrict decodes one JSON value into v, refusing fields v does not
// have and anything after the value.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("one JSON object expected, and more follows it")
	}
	return nil
}
