package k8sjob

import (
	"encoding/json"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
)

// KindName is the name catalogs give the kind.
const KindName = "k8s_job"

// Options configure the kind: the operator's, never a catalog's.
type Options struct {
	// Client talks to the cluster (Client builds one from the
	// environment; tests pass client-go's fake clientset).
	Client kubernetes.Interface
	// Allow is what each tenant's Jobs may use (AGENTFLOW_K8S_JOBS).
	Allow Allow
	// Poll is how often a call reads its Job while waiting. Default: 2 s.
	Poll time.Duration
	// MaxLogBytes is how much of the end of a Job's logs a call returns.
	// Default: DefaultMaxLogBytes.
	MaxLogBytes int
}

// DefaultMaxLogBytes is how much of the end of its logs a call returns by
// default: 1 MiB, kept by reference as any large result is.
const DefaultMaxLogBytes = 1 << 20

// configSchema is the JSON Schema of the kind's config, which the catalog
// checks and publishes to editors.
const configSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["namespace", "image"],
  "properties": {
    "namespace": {"type": "string", "description": "namespace the Job runs in; the operator's AGENTFLOW_K8S_JOBS must allow it"},
    "image": {"type": "string", "description": "container image; the operator's AGENTFLOW_K8S_JOBS must allow it"},
    "command": {"type": "array", "items": {"type": "string"}, "description": "entrypoint, fixed"},
    "args": {"type": "array", "items": {"type": "string"}, "description": "arguments; {{args.NAME}} is the model's argument NAME"},
    "env": {"type": "array", "items": {"type": "object", "additionalProperties": false, "required": ["name", "value"],
      "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
    "resources": {"type": "object", "additionalProperties": false, "properties": {
      "requests": {"type": "object", "additionalProperties": {"type": "string"}},
      "limits": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 3580, "description": "the Job's activeDeadlineSeconds; at most the entry's timeout_sec less 20 (default: exactly that)"},
    "service_account": {"type": "string"}
  }
}`

// Kind returns the k8s_job kind, running Jobs through opts.Client within
// opts.Allow.
func Kind(opts Options) tools.Kind {
	opts.Poll = agent.OrDefault(opts.Poll, 2*time.Second)
	opts.MaxLogBytes = agent.OrDefault(opts.MaxLogBytes, DefaultMaxLogBytes)
	return tools.Kind{
		Name:        KindName,
		Description: "Runs a container job and returns its exit code and logs.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
		Config:      json.RawMessage(configSchema),
		// A Job changes things elsewhere: its calls wait for a person
		// unless the catalog writes another policy.
		Approval: agent.ApprovalAlways,
		Build: func(spec agent.Tool, deps tools.Deps) (tools.Tool, error) {
			c, err := parseConfig(spec.Config, spec.Parameters, spec.CallTimeout(0))
			if err != nil {
				return nil, err
			}
			return &tool{opts: opts, spec: spec, config: c, deps: deps}, nil
		},
		Admit: func(tenantID string, spec agent.Tool) error {
			c, err := parseConfig(spec.Config, spec.Parameters, spec.CallTimeout(0))
			if err != nil {
				return err
			}
			return opts.Allow.Check(tenantID, c.Namespace, c.ServiceAccount, c.Image)
		},
	}
}
