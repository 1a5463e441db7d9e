package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
)

// ToolCheck is what a tool guard's tool is called with: its arguments,
// which the tool's input schema must accept.
type ToolCheck struct {
	Stage   string `json:"stage"` // input | output
	Text    string `json:"text"`
	AgentID string `json:"agent_id"`
	JobID   string `json:"job_id"`
}

// CallTool asks a tool guard's tool about a text, within the guard's
// timeout: run calls the tool with the check as its arguments (through
// the tool runtime) and returns its text output, the verdict. It returns
// the rule the text broke ("" when allowed). A call that fails, does not
// end in time, or answers what is not a verdict is a refusal when the
// guard fails closed (the default), and nothing when it fails open: then
// err says what happened, for the log. run's errors must not quote the
// tool (a tool's error may quote the text it was asked about, which must
// reach neither the log nor, through the rule, a client).
func CallTool(ctx context.Context, g agent.ToolGuard, check ToolCheck, run func(ctx context.Context, args json.RawMessage) (string, error)) (rule string, err error) {
	args, err := json.Marshal(check)
	if err != nil {
		return decide("tool guard "+g.Name, g.GuardCall, Verdict{}, err), err
	}
	ctx, cancel := context.WithTimeout(ctx, g.Timeout())
	defer cancel()
	out, err := run(ctx, args)
	var v Verdict
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("no answer within %s", g.Timeout())
	case err == nil:
		v, err = ReadVerdict([]byte(out))
	}
	return decide("tool guard "+g.Name, g.GuardCall, v, err), err
}
