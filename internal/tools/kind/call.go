package kind

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
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
