package openapitool

import (
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// What the tests of package openapitool_test, which run the kind through
// tools.Registry (it imports this package), use of its insides.
const (
	OpenAPIApproval    = openapiApproval
	OpenAPIDescription = openapiDescription
	OpenAPIParameters  = openapiParameters
)

type OpenAPIConfig = openapiConfig

// BuildOpenAPI builds a tool of spec, with a cache of documents of its own.
func BuildOpenAPI(spec agent.Tool, deps kind.Deps) (kind.Tool, error) {
	return build(spec, deps, newDocuments())
}
