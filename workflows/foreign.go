package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/asked"
	"github.com/agentflow/agentflow/internal/contract"
)

// foreign runs call i on a team's own worker: an activity of the entry's
// type on its task queue (agent.KindActivity), which that worker, in any
// SDK, polls. The turn schedules it itself, so the call is an activity of
// the turn's history like its own (the Web UI shows it, a cancelled turn
// cancels it), with the entry's timeouts and attempts; what it came to is
// then stored through ExecuteTool (in.Foreign), whose tool hooks redact
// and screen it as every tool's result, before the model reads it.
func (r *toolRound) foreign(ctx workflow.Context, i int, spec agent.Tool) {
	t, c := r.t, r.calls[i]
	f, settle := workflow.NewFuture(ctx)
	r.futures[i] = f
	// Decoding JSON into structs is deterministic; workflowcheck cannot
	// tell.
	cfg, err := agent.ParseActivityTool(spec.Config, toolTimeout(spec, turnTimeout(t.req, t.agent.Limits.WithDefaults())), spec.Delivery == agent.DeliveryIdempotent) //workflowcheck:ignore
	if err != nil {
		settle.SetError(err)
		return
	}
	actx := workflow.WithActivityOptions(r.callCtx, workflow.ActivityOptions{
		TaskQueue:           cfg.TaskQueue,
		StartToCloseTimeout: cfg.StartToClose,
		HeartbeatTimeout:    cfg.Heartbeat,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: int32(cfg.MaxAttempts)},
		Summary:             contract.OneLine(c.Name+" "+c.Arguments, 120),
		// As every tool call: one in flight when the turn ends is waited
		// for, and its outcome is what happened.
		WaitForCancellation: true,
	})
	// Who asked, for the team's code to scope, key and audit the call by
	// (internal/asked): names only, never a credential.
	in := r.in[i]
	key := fmt.Sprintf("%s:tool:%d:%s", t.req.JobID, in.Seq, c.ID)
	if in.Resend != nil {
		// A person approved sending it again after an unknown outcome: a
		// delivery of its own, which the team's deduplication must not
		// take for the first.
		key += ":resend:" + in.Resend.ApprovalID
	}
	who := asked.Asked{TenantID: t.req.TenantID, AgentID: t.agent.ID, TurnID: t.workflowID, JobID: t.req.JobID,
		CallID: c.ID, Tool: c.Name, Key: key}
	if cl := t.req.Caller; cl != nil {
		who.Caller, who.Issuer, who.Subject = cl.Name, cl.Issuer, cl.Subject
	}
	actx = asked.With(actx, who)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := r.admitForeign(ctx, spec, in, cfg); err != nil {
			settle.SetError(err) // cancelled while it waited, or the limit could not be read
			return
		}
		var out json.RawMessage
		err := workflow.ExecuteActivity(actx, cfg.ActivityType, json.RawMessage(c.Arguments)).Get(ctx, &out)
		if temporal.IsCanceledError(err) {
			settle.SetError(err) // cancelled with the turn, as a call in flight is
			return
		}
		in.Foreign = &contract.ForeignOutcome{Output: out}
		var timedOut *temporal.TimeoutError
		switch {
		case errors.As(err, &timedOut):
			// The last attempt ran out of time (or its worker was lost):
			// the team's code may have done its work; it is not sent again.
			what := "its start-to-close timeout"
			if timedOut.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
				what = "its heartbeat timeout (no heartbeat came: its worker may have died)"
			}
			in.Foreign.Unknown = fmt.Sprintf("the last attempt of %s ran past %s: it may or may not have taken effect, and it was not sent again", cfg, what)
		case err != nil:
			in.Foreign.Error = contract.ErrorOf(err).Message
		}
		var res contract.ExecuteToolResult
		// The call is made: storing what it came to outlasts a database
		// outage, as the turn's own steps do.
		err = dbStep(ctx, contract.ExecuteTool, t.deadline, in, &res)
		settle.Set(res, err)
	})
}

// admitForeign waits, for a tool entry with a rate limit, until the limit
// admits call in (AdmitTool): an activity of its own, since the wait may
// be long and shows as the call's progress, and since the team's worker,
// not agentflow's, makes the call. The ExecuteTool that stores its
// outcome releases the admission. A tool without a limit costs nothing.
func (r *toolRound) admitForeign(ctx workflow.Context, spec agent.Tool, in contract.ExecuteToolInput, cfg agent.ActivityTool) error {
	if spec.RateLimit == nil {
		return nil
	}
	t := r.t
	actx := workflow.WithActivityOptions(r.callCtx, workflow.ActivityOptions{
		StartToCloseTimeout: toolTimeout(spec, turnTimeout(t.req, t.agent.Limits.WithDefaults())),
		HeartbeatTimeout:    toolHeartbeat,
		RetryPolicy:         toolRetry(),
		Summary:             "rate limit of " + spec.Entry(),
		WaitForCancellation: true,
	})
	hold := cfg.StartToClose*time.Duration(cfg.MaxAttempts) + time.Minute
	return workflow.ExecuteActivity(actx, contract.AdmitTool, contract.AdmitToolInput{Tool: in, Hold: hold}).Get(ctx, nil)
}
