package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/nexusdoor"
)

// teamsNamespace is the namespace up makes beside agentflow's for other
// teams' code, and teamEndpoints the Nexus endpoints into it: agents call
// the warehouse team's Nexus service (examples/nexustools) through
// "warehouse".
const teamsNamespace = "teams"

var teamEndpoints = []devstack.NexusEndpoint{{Name: "warehouse", Namespace: teamsNamespace, TaskQueue: "warehouse"}}

// agentsBinding is the Nexus endpoint "agents" of up's stack: workflows
// of namespace teams call tenant demo's agents through it
// (agentflow.v1.Agents), with the roles of a user and an approver.
var agentsBinding = nexusdoor.Binding{TaskQueue: "agents-demo", TenantID: "demo", Roles: []string{nexusdoor.RoleUser, nexusdoor.RoleApprover}, Name: "teams"}

// servesAgents reports whether this stack binds the endpoint "agents"'s
// queue (it does unless the operator named bindings of their own).
func (l *local) servesAgents() bool {
	return slices.ContainsFunc(l.cfg.NexusBindings, func(b nexusdoor.Binding) bool { return b.TaskQueue == agentsBinding.TaskQueue })
}

// nexusEndpoints are the endpoints up makes: the teams' services', and
// "agents" into agentflow's namespace when this stack serves it.
func (l *local) nexusEndpoints(namespace string) []devstack.NexusEndpoint {
	if !l.servesAgents() {
		return teamEndpoints
	}
	return append(slices.Clone(teamEndpoints), devstack.NexusEndpoint{Name: "agents", Namespace: namespace, TaskQueue: agentsBinding.TaskQueue})
}

// teamsNote says where other teams' code runs: the namespace and the
// Nexus endpoint made on a Temporal server started here.
func (l *local) teamsNote() string {
	if os.Getenv("TEMPORAL_ADDRESS") != "" {
		return "(none made: TEMPORAL_ADDRESS names a server of yours)"
	}
	note := fmt.Sprintf("namespace %s, Nexus endpoint %s (examples/nexustools)", teamsNamespace, teamEndpoints[0].Name)
	if l.servesAgents() {
		note += fmt.Sprintf("; its workflows call tenant %s's agents through endpoint agents (agentflow.v1.Agents)", agentsBinding.TenantID)
	}
	return note
}
