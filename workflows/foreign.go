package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/asked"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/toolargs"
)

// foreign runs call i on a team's own worker, which polls the entry's
// task queue in any SDK: an activity of the entry's type
// (agent.KindActivity), or a child workflow of it (agent.KindWorkflow),
// for tools that wait. The turn schedules it itself, so the call is part
// of the turn's history like its own calls (the Web UI shows it, a
// cancelled turn cancels it), with the entry's timeouts; what it came to
// is then stored through ExecuteTool (in.Foreign), whose tool hooks
// redact and screen it as every tool's result, before the model reads
// it. A turn continues as new only between steps, so a call, however
// long it waits, ends in the run that made it.
func (r *toolRound) foreign(ctx workflow.Context, i int, spec agent.Tool) {
	f, settle := workflow.NewFuture(ctx)
	r.futures[i] = f
	in := r.in[i]
	call, err := r.foreignCall(asked.With(r.callCtx, r.askedOf(in)), spec, in)
	if err != nil {
		settle.SetError(err)
		return
	}
	// store stores what the call came to through ExecuteTool, whose tool
	// hooks redact and screen it. The call is made (or refused): storing
	// it outlasts a database outage, as the turn's own steps do.
	store := func(ctx workflow.Context, outcome contract.ForeignOutcome) {
		in.Foreign = &outcome
		var res contract.ExecuteToolResult
		err := dbStep(ctx, contract.ExecuteTool, r.t.deadline, in, &res)
		settle.Set(res, err)
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		// Arguments that do not fit the tool's schema never reach the
		// team's code: the model reads why, as the tool's error. The
		// check reads only its input; workflowcheck cannot tell.
		if err := toolargs.Check(spec.Parameters, in.Call.Arguments); err != nil { //workflowcheck:ignore
			store(ctx, contract.ForeignOutcome{Error: contract.ErrorOf(err).Message})
			return
		}
		if err := r.admitForeign(ctx, spec, in, call.hold); err != nil {
			settle.SetError(err) // cancelled while it waited, or the limit could not be read
			return
		}
		var out json.RawMessage
		watching, stopWatching := workflow.WithCancel(r.callCtx)
		r.watchForeign(watching, in, call)
		err := call.start().Get(ctx, &out)
		stopWatching()
		if temporal.IsCanceledError(err) {
			settle.SetError(err) // cancelled with the turn, as a call in flight is
			return
		}
		outcome := contract.ForeignOutcome{Output: out}
		var timedOut *temporal.TimeoutError
		switch {
		case errors.As(err, &timedOut):
			// The call ran out of time (or its worker was lost): the team's
			// code may have done its work; it is not sent again.
			outcome.Unknown = fmt.Sprintf("%s ran past %s: it may or may not have taken effect, and it was not sent again",
				call.target, timeoutWhat(timedOut.TimeoutType()))
		case err != nil:
			outcome.Error = contract.ErrorOf(err).Message
		}
		store(ctx, outcome)
	})
}

// foreignCall is a call on a team's worker, ready to make.
type foreignCall struct {
	target string        // what the call runs, for what the model is told
	hold   time.Duration // how long it may run at most, all attempts
	start  func() workflow.Future
	// watch is the activity id whose heartbeats are the call's progress
	// (an activity tool with heartbeat_sec); "" for none.
	watch string
}

// foreignCall checks spec's entry and prepares call in on ctx, which
// carries who asked.
func (r *toolRound) foreignCall(ctx workflow.Context, spec agent.Tool, in contract.ExecuteToolInput) (foreignCall, error) {
	t, c := r.t, in.Call
	timeout := toolTimeout(spec, turnTimeout(t.req, t.agent.Limits.WithDefaults()))
	summary := contract.OneLine(c.Name+" "+c.Arguments, 120)
	args := json.RawMessage(c.Arguments)
	// Decoding JSON into structs is deterministic; workflowcheck cannot
	// tell.
	if spec.Kind == agent.KindWorkflow {
		cfg, err := agent.ParseWorkflowTool(spec.Config, timeout) //workflowcheck:ignore
		if err != nil {
			return foreignCall{}, err
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			// The call's own id: a retried task starts no second child,
			// and the Web UI finds it under its turn.
			WorkflowID:               foreignWorkflowID(t.workflowID, in),
			TaskQueue:                cfg.TaskQueue,
			WorkflowExecutionTimeout: cfg.ExecutionTimeout,
			ParentClosePolicy:        parentClose(cfg.ParentClose),
			StaticSummary:            summary,
			// A cancelled turn asks the child to cancel and ends without
			// waiting for it: a workflow that waits for days may take as
			// long to stop, and what it comes to is its own.
			WaitForCancellation: false,
		})
		return foreignCall{target: cfg.String(), hold: cfg.ExecutionTimeout + time.Minute, start: func() workflow.Future {
			return workflow.ExecuteChildWorkflow(cctx, cfg.WorkflowType, args)
		}}, nil
	}
	if spec.Kind == agent.KindNexus {
		cfg, err := agent.ParseNexusTool(spec.Config, timeout) //workflowcheck:ignore
		if err != nil {
			return foreignCall{}, err
		}
		opts := workflow.NexusOperationOptions{
			ScheduleToCloseTimeout: cfg.ScheduleToClose,
			// A cancelled turn asks the operation to cancel and ends
			// without waiting, as for a workflow tool's child.
			CancellationType: workflow.NexusOperationCancellationTypeTryCancel,
			Summary:          summary,
		}
		return foreignCall{target: cfg.String(), hold: cfg.ScheduleToClose + time.Minute, start: func() workflow.Future {
			return workflow.NewNexusClient(cfg.Endpoint, cfg.Service).ExecuteOperation(ctx, cfg.Operation, args, opts)
		}}, nil
	}
	cfg, err := agent.ParseActivityTool(spec.Config, timeout, spec.Delivery == agent.DeliveryIdempotent) //workflowcheck:ignore
	if err != nil {
		return foreignCall{}, err
	}
	// An id of the call's: the Web UI shows it, and WatchForeign finds
	// the call's heartbeats by it.
	id := fmt.Sprintf("tool-%d-%s", in.Seq, c.ID)
	if in.Resend != nil {
		id += "-" + in.Resend.ApprovalID
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          id,
		TaskQueue:           cfg.TaskQueue,
		StartToCloseTimeout: cfg.StartToClose,
		HeartbeatTimeout:    cfg.Heartbeat,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: int32(cfg.MaxAttempts)},
		Summary:             summary,
		// As every tool call: one in flight when the turn ends is waited
		// for, and its outcome is what happened.
		WaitForCancellation: true,
	})
	call := foreignCall{target: "the last attempt of " + cfg.String(), hold: cfg.StartToClose*time.Duration(cfg.MaxAttempts) + time.Minute,
		start: func() workflow.Future { return workflow.ExecuteActivity(actx, cfg.ActivityType, args) }}
	if cfg.Heartbeat > 0 {
		call.watch = id
	}
	return call, nil
}

// askedOf is who asked for call in, for the team's code to scope, key
// and audit it by (internal/asked): names only, never a credential.
func (r *toolRound) askedOf(in contract.ExecuteToolInput) asked.Asked {
	t, c := r.t, in.Call
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
	return who
}

// foreignWorkflowID is the id of the child workflow of call in of turn
// turnID: under the turn's, and another for a second delivery.
func foreignWorkflowID(turnID string, in contract.ExecuteToolInput) string {
	id := fmt.Sprintf("%s/tool/%d/%s", turnID, in.Seq, in.Call.ID)
	if in.Resend != nil {
		id += "/" + in.Resend.ApprovalID
	}
	return id
}

// parentClose is Temporal's parent close policy of a workflow tool's.
func parentClose(p string) enumspb.ParentClosePolicy {
	switch p {
	case agent.ParentCloseTerminate:
		return enumspb.PARENT_CLOSE_POLICY_TERMINATE
	case agent.ParentCloseAbandon:
		return enumspb.PARENT_CLOSE_POLICY_ABANDON
	}
	return enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL
}

// timeoutWhat says which of its timeouts a call ran past.
func timeoutWhat(tt enumspb.TimeoutType) string {
	switch tt {
	case enumspb.TIMEOUT_TYPE_HEARTBEAT:
		return "its heartbeat timeout (no heartbeat came: its worker may have died)"
	case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
		return "its start-to-close timeout"
	}
	return "its " + strings.ToLower(tt.String()) + " timeout"
}

// admitForeign waits, for a tool entry with a rate limit, until the limit
// admits call in (AdmitTool): an activity of its own, since the wait may
// be long and shows as the call's progress, and since the team's worker,
// not agentflow's, makes the call. The ExecuteTool that stores its
// outcome releases the admission, or it lapses after hold. A tool without
// a limit costs nothing.
func (r *toolRound) admitForeign(ctx workflow.Context, spec agent.Tool, in contract.ExecuteToolInput, hold time.Duration) error {
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
	return workflow.ExecuteActivity(actx, contract.AdmitTool, contract.AdmitToolInput{Tool: in, Hold: hold}).Get(ctx, nil)
}

// watchForeign starts WatchForeign beside an activity tool's call that
// heartbeats (call.watch): what the team's activity says in its
// heartbeats becomes the call's progress. It is not waited for: ctx is
// cancelled once the call ends, and a watcher that fails shows nothing.
func (r *toolRound) watchForeign(ctx workflow.Context, in contract.ExecuteToolInput, call foreignCall) {
	if call.watch == "" {
		return
	}
	wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: call.hold,
		HeartbeatTimeout:    toolHeartbeat,
		RetryPolicy:         toolRetry(),
		Summary:             "progress of " + in.Call.Name,
	})
	workflow.ExecuteActivity(wctx, contract.WatchForeign, contract.WatchForeignInput{Tool: in, ActivityID: call.watch})
}
