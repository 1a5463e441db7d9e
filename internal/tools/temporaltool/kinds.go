package temporaltool

import (
	"context"
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/toolargs"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// Kinds is every kind of this package, within the operator's allow list
// (nil: closed, and every entry is refused when a catalog is applied).
func Kinds(allow *reach.Policy) []kind.Kind {
	return []kind.Kind{Activity(allow), Workflow(allow), Nexus(allow)}
}

// scheduledKind is a kind whose calls the turn makes itself on a team's
// worker: parse checks an entry's config (the domain type the turn reads
// too), targets names what it reaches, each checked against the
// operator's allow list when a catalog is applied. What a team's code
// does is the team's: its calls wait for a person unless the catalog
// writes another policy.
func scheduledKind[T any](name, description, schema string, allow *reach.Policy,
	parse func(agent.Tool) (T, error), targets func(T) []target) kind.Kind {
	return kind.Kind{
		Name:        name,
		Description: description,
		Parameters:  json.RawMessage(defaultParameters),
		Config:      json.RawMessage(schema),
		Approval:    agent.ApprovalAlways,
		Build: func(spec agent.Tool, _ kind.Deps) (kind.Tool, error) {
			if _, err := parse(spec); err != nil {
				return nil, err
			}
			// Every call is checked against the entry's parameters before
			// it leaves (toolargs): a schema the check cannot use is refused.
			if _, err := toolargs.Compile(spec.Parameters); err != nil {
				return nil, err
			}
			return scheduled{}, nil
		},
		Admit: func(tenantID string, spec agent.Tool) error {
			cfg, err := parse(spec)
			if err != nil {
				return err
			}
			for _, t := range targets(cfg) {
				if err := allow.Check(tenantID, t.field, t.Target); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// defaultParameters is the kinds' parameters: an entry writes its own,
// or an activity entry takes what the worker publishes.
const defaultParameters = `{"type":"object","properties":{}}`

// target is what an entry reaches, and the config field that names it.
type target struct {
	field string
	reach.Target
}

// scheduled is the runner of a tool the turn schedules itself: the
// tool runtime never runs its calls. Asked to (a code-mode program's
// call), it says so as the tool's error, which retrying would not mend.
type scheduled struct{}

func (scheduled) Run(context.Context, kind.Call) (kind.Output, error) {
	return kind.Output{}, agent.Errorf(agent.CodeInvalid, "this tool runs on the team's own worker and only the turn itself calls it: call it as a tool, not from a program")
}
