package tools

import (
	"context"
	"encoding/json"
	"net/http"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
)

// Tool is a runnable tool instance built from an agent.Tool spec. Run may
// be called concurrently: one built tool serves every call of its spec.
type Tool interface {
	// Run executes one call. args is a JSON object (the registry checks
	// that); an error the model can fix carries agent.CodeInvalid.
	Run(ctx context.Context, args json.RawMessage) (Output, error)
}

// Output is the result of a tool call.
type Output struct {
	// Text is what the model sees.
	Text string
	// Data is an optional structured result for callers and transcripts.
	Data json.RawMessage
}

// Kind is a tool kind: the builder a catalog names with `kind:`.
type Kind struct {
	Name        string
	Description string // default description of tools of this kind
	// Parameters is the default JSON Schema of the arguments (an object
	// schema); a catalog may override it.
	Parameters json.RawMessage
	// Build validates spec.Config and returns a tool. A bad config is an
	// agent.CodeInvalid error. Build must not do I/O: the catalog loader
	// calls it to validate config long before any call is made.
	Build func(spec agent.Tool, deps Deps) (Tool, error)
	// Local marks kinds whose calls are quick and in-process (no network,
	// milliseconds of CPU): their tools run as local activities unless the
	// catalog says `execution: activity`.
	Local bool
}

// Deps are the dependencies injected into builders. Fields are filled with
// defaults by WithDefaults; new dependencies are added here.
type Deps struct {
	// Logger for builders and tools. Default: a no-op logger.
	Logger *zap.Logger
	// HTTPClient for tools that call out. Default: a client without its
	// own timeout; calls are bounded by their context.
	HTTPClient *http.Client
}

// WithDefaults returns d with nil fields replaced by their defaults.
func (d Deps) WithDefaults() Deps {
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{}
	}
	return d
}

// Builtin returns the kinds every worker offers.
func Builtin() []Kind {
	return []Kind{Calculator()}
}
