package tools

import (
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
)

// DelegateToAgent returns the delegate_to_agent kind (seed 004 §5.5): the
// model hands a sub-task to another agent of the same tenant. Its calls
// are not tool calls: the AgentTurn workflow runs each as a child
// AgentTurn (same workers and task queue, history "fresh", the turn's
// context, one delegation deeper, within what is left of the turn's token
// budget and time) and gives the model the child's answer, bounded, with
// its result_ref and data ref. Arguments: agent_id, prompt, and optionally
// context (background sent with the prompt) and refs (data the child may
// read). Config (agent.DelegateConfig): agents it may delegate to
// (default: any agent of the tenant but the caller) and max_depth
// (default 2, at most 5).
//
// The kind's Build checks the config when a catalog is applied; its Run
// only refuses, for a call that reaches the tool runtime anyway (a worker
// whose workflow code predates delegation): delegating from inside an
// activity would leave the child outside the turn's cancellation, budget
// and event log.
func DelegateToAgent() Kind {
	return Kind{
		Name: agent.KindDelegate,
		Description: "Hand a sub-task to another agent and get its answer. The agent sees only the prompt and context you give it. " +
			"Its answer comes back with a result_ref; pass that as input_ref to read its result again.",
		Parameters: json.RawMessage(agent.DelegateParameters),
		Config:     json.RawMessage(agent.DelegateConfigSchema),
		Build: buildWorkflowRun(agent.ParseDelegateConfig,
			agent.KindDelegate+" calls run as child turns of the agent's workflow, not as tool calls; "+
				"this worker's workflow did not run it, and no agent was asked"),
	}
}
