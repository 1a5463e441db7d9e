package temporaltool

import (
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// Kinds is every kind of this package, within the operator's allow list.
func Kinds(allow *reach.Policy) []kind.Kind {
	return []kind.Kind{Activity(allow), Workflow(allow), Nexus(allow)}
}
