package catalog

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/structured"
)

// checkGuardTool says why a tool cannot be a tool guard's (nil when it
// can): its calls must run where the guard asks, in the model call (not
// as a child turn or a question to a person, which the turn's workflow
// runs), without waiting for approval, and with the guard's arguments
// {"stage", "text", "agent_id", "job_id"}, which its input schema must
// accept when it says what it takes.
func checkGuardTool(g agent.ToolGuard, spec agent.Tool) error {
	switch {
	case spec.Kind == agent.KindDelegate || spec.Kind == agent.KindAskUser:
		return fmt.Errorf("tool %q is of kind %s, whose calls the turn runs itself: a guard's tool is called as the model's answer is checked", spec.Name, spec.Kind)
	case strings.TrimSpace(spec.Approval) == agent.ApprovalAlways:
		return fmt.Errorf("tool %q needs approval of every call, and a guard cannot wait for a person: give it approval: never (or a policy its guard's calls pass)", spec.Name)
	}
	sch, err := structured.Compile(spec.Parameters)
	if err != nil || sch == nil {
		return nil // a schema that says nothing we can read is the tool's to apply
	}
	for _, stage := range g.Stages() {
		args, err := json.Marshal(guard.ToolCheck{Stage: stage, Text: "Some text to check.", AgentID: "agent", JobID: "job"})
		if err != nil {
			return err
		}
		if _, problems := sch.Check(string(args)); len(problems) > 0 {
			return fmt.Errorf(`tool %q cannot take a guard's arguments {"stage", "text", "agent_id", "job_id"} (stage %s): its input schema says %s`, spec.Name, stage, problems)
		}
	}
	return nil
}
