package temporaltool

import (
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

// Nexus returns the nexus kind, within the operator's allow list.
func Nexus(allow *reach.Policy) kind.Kind {
	return scheduledKind(agent.KindNexus, "Calls an operation of a Nexus service on an endpoint, in another namespace or team.", nexusSchema, allow,
		func(spec agent.Tool) (agent.NexusTool, error) {
			return agent.ParseNexusTool(spec.Config, spec.CallTimeout(0))
		},
		func(n agent.NexusTool) []target {
			return []target{{"config.endpoint", reach.Target{Kind: reach.NexusEndpoint, Name: n.Endpoint}}}
		})
}
