package activities

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// asked is what the model reads of an ask_user call: the person's answer,
// or why there is none.
func asked(o contract.AskedOutcome) (agent.Message, string) {
	if o.Outcome != agent.QuestionAnswered {
		return agent.Message{Content: o.Message}, agent.ToolError
	}
	return agent.Message{Content: o.Answer}, agent.ToolOK
}

// delegated is what the model reads of a delegate_to_agent call, which the
// turn ran as a child turn: the child's answer (the workflow bounded it),
// its result_ref, and the data the answer rests on, by ref; or why the
// child did not finish.
func delegated(call agent.ToolCall, res agent.TurnResult) (agent.Message, string) {
	who := res.Metadata.AgentID
	if who == "" {
		// A child rejected before it loaded an agent: the one it was asked for.
		args, _ := agent.ParseDelegateArgs(call.Arguments)
		who = args.AgentID
	}
	var b strings.Builder
	if res.Status != agent.StatusCompleted {
		fmt.Fprintf(&b, "agent %q did not finish (%s)", who, res.Status)
		if e := res.Error; e != nil {
			fmt.Fprintf(&b, ": %s: %s", e.Type, e.Message)
		}
		if res.ResultRef != "" {
			fmt.Fprintf(&b, " (its result: %s)", res.ResultRef)
		}
		return agent.Message{Content: b.String()}, agent.ToolError
	}
	fmt.Fprintf(&b, "agent %q answered:\n%s\n\n", who, res.Output)
	if res.ResultRef != "" {
		fmt.Fprintf(&b, "result_ref: %s (the whole answer; pass it as input_ref to read it in a later call)\n", res.ResultRef)
	}
	msg := agent.Message{}
	var p agent.DataPreview
	if res.DataRef != "" && json.Unmarshal(res.ResultPreview, &p) == nil {
		p = p.Bounded()
		p.Ref = res.DataRef
		msg.Data = &p
		b.WriteString(describeData("", p, nil, false, false))
	}
	msg.Content = strings.TrimRight(b.String(), "\n")
	return msg, agent.ToolOK
}
