package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/words"
)

// reconciledPrefix and notMadePrefix open what the model reads of a
// reconciled call: the read found the write, or found it was not made.
const (
	reconciledPrefix = "reconciled: the write of an earlier attempt took effect; the API's record of it: "
	notMadePrefix    = "not made: the write of an earlier attempt did not take effect, and it was not sent again; call again to make it"
)

// reconcile answers a call of a reconciled tool (agent.DeliveryReconciled)
// whose write may or may not have taken effect (unknown, what the model
// would read otherwise) from a read of the far side: the read's answer
// when the write took effect, a failure saying it was not made when it
// did not. The write is never sent again. A read that cannot be made or
// says nothing clear leaves the call unknown, with why.
func (a *Activities) reconcile(ctx context.Context, ag agent.Agent, spec agent.Tool, in contract.ExecuteToolInput, unknown agent.Message) (agent.Message, string) {
	rec := spec.Reconcile
	read := spec
	if rec.Spec != nil {
		read = *rec.Spec
	}
	var args any
	if err := json.Unmarshal([]byte(cmp.Or(in.Call.Arguments, "{}")), &args); err != nil {
		return unknown, agent.ToolUnknown
	}
	input := map[string]any{"args": args, "key": tools.CallKey(in.TenantID, in.JobID, in.Call.ID)}
	keep := func(why string, err error) (agent.Message, string) {
		a.log(ctx).Warn("reconcile: the call stays unknown", zap.String("tool", spec.Name), zap.String("why", why), zap.Error(err))
		return unknownMessage(in.Call, "the write may have been sent by an earlier attempt; checking with "+read.Name+" told nothing: "+why), agent.ToolUnknown
	}
	readArgs, ok, err := a.tools.Reconcile(ctx, rec.Arguments, input)
	switch {
	case err != nil:
		return keep("its arguments program failed", err)
	case !ok:
		return unknown, agent.ToolUnknown // the entry does not reconcile this call
	}
	raw, err := json.Marshal(readArgs)
	if _, isObject := readArgs.(map[string]any); err != nil || !isObject {
		return keep("its arguments program did not make an object", err)
	}
	if need, _ := a.gate.NeedsApproval(read, raw, contract.CallModelInput{TenantID: in.TenantID, JobID: in.JobID}); need {
		return keep("the read's approval policy asks for approval, which a reconcile cannot wait for", nil)
	}
	answer, err := a.readBack(ctx, ag, read, in, raw)
	if err != nil {
		return keep("the read failed ("+telemetry.ErrorType(err)+")", err)
	}
	input["answer"] = answer.value
	found, ok, err := a.tools.Reconcile(ctx, rec.Found, input)
	switch {
	case err != nil || !ok:
		return keep("its found program gave no answer", err)
	case found == true:
		return agent.Message{Content: reconciledPrefix + answer.text}, agent.ToolOK
	case found == false || found == nil:
		return agent.Message{Content: notMadePrefix}, agent.ToolError
	}
	return keep(fmt.Sprintf("its found program gave %T, not true or false", found), nil)
}

// readAnswer is a reconcile read's answer: its JSON value (the data, else
// the text when it is JSON, else the text as a string) and its text.
type readAnswer struct {
	value any
	text  string
}

// readBack makes a reconcile's read, as askGuardTool makes a guard's
// call: through the tool runtime, with no write gate (a read is sent
// again freely) and no events of its own.
func (a *Activities) readBack(ctx context.Context, ag agent.Agent, read agent.Tool, in contract.ExecuteToolInput, args json.RawMessage) (readAnswer, error) {
	rin := in
	rin.Call = agent.ToolCall{ID: in.Call.ID + "-reconcile", Name: read.Name, Arguments: string(args)}
	ctx = effects.Without(ctx)
	call, err := a.call(ctx, ag, rin, nil, nil)
	if err != nil {
		return readAnswer{}, err
	}
	out, toolErr, err := a.runTool(ctx, &toolRun{spec: read, in: rin, call: call, report: func(string) {}})
	if err = cmp.Or(err, toolErr); err != nil {
		return readAnswer{}, err
	}
	raw := out.Data
	if len(raw) == 0 && json.Valid([]byte(out.Text)) {
		raw = json.RawMessage(out.Text)
	}
	ans := readAnswer{value: out.Text, text: words.Clip(out.Text, agent.MaxToolArgumentBytes)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &ans.value); err != nil {
			return readAnswer{}, err
		}
		ans.text = words.Clip(string(raw), agent.MaxToolArgumentBytes)
	}
	return ans, nil
}
