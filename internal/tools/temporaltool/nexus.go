package temporaltool

import (
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// nexusSchema is the JSON Schema of the nexus kind's config.
const nexusSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["endpoint", "service", "operation"],
  "properties": {
    "endpoint": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "the Nexus endpoint, as the operator created it"},
    "service": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "the service the endpoint's handler registered"},
    "operation": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "the operation of the service"},
    "schedule_to_close_sec": {"type": "integer", "minimum": 1, "maximum": 2592000, "description": "the operation's schedule-to-close timeout; default the tool's timeout"}
  }
}`

// Nexus returns the nexus kind, within the operator's allow list (nil:
// closed, and every entry is refused when a catalog is applied).
func Nexus(allow *reach.Policy) kind.Kind {
	parse := func(spec agent.Tool) (agent.NexusTool, error) {
		return agent.ParseNexusTool(spec.Config, spec.CallTimeout(0))
	}
	return kind.Kind{
		Name:        agent.KindNexus,
		Description: "Calls an operation of a Nexus service on an endpoint, in another namespace or team.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
		Config:      json.RawMessage(nexusSchema),
		Approval:    agent.ApprovalAlways, // as every kind whose calls can change things
		Build: func(spec agent.Tool, _ kind.Deps) (kind.Tool, error) {
			if _, err := parse(spec); err != nil {
				return nil, err
			}
			if err := checkParameters(spec); err != nil {
				return nil, err
			}
			return scheduled{}, nil
		},
		Admit: func(tenantID string, spec agent.Tool) error {
			n, err := parse(spec)
			if err != nil {
				return err
			}
			return allow.Check(tenantID, "config.endpoint", reach.Target{Kind: reach.NexusEndpoint, Name: n.Endpoint})
		},
	}
}
