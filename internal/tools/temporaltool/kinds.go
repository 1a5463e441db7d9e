package temporaltool

import (
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/toolargs"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// Kinds is every kind of this package, within the operator's allow list.
func Kinds(allow *reach.Policy) []kind.Kind {
	return []kind.Kind{Activity(allow), Workflow(allow), Nexus(allow)}
}

// checkParameters refuses an entry whose parameters schema the turn could
// not check a call's arguments against (toolargs): every call of these
// kinds is checked before it leaves for the team's code.
func checkParameters(spec agent.Tool) error {
	_, err := toolargs.Compile(spec.Parameters)
	return err
}
