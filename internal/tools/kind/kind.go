package kind

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/agentflow/agentflow/internal/agent"
)

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
	// See package tools' approval.go for the whole rule.
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
