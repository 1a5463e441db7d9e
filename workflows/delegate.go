package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/signals"
	"github.com/agentflow/agentflow/internal/words"
)

// Delegation (delegate_to_agent, seed 004 §5.5): the turn runs the call
// as a child AgentTurn of the same tenant, on the same task queue, with a
// job id made of its own and the call's (agent.ChildJobID), so that a
// retried or replayed turn finds the same child and its stored result.
// The child starts fresh (no session) with the turn's context, one
// delegation deeper (agent.ParentRef), within the time the turn has left
// and its share of the tokens the turn has left; its tokens count as the
// turn's. While it runs, its token batches (the turn is its notify
// workflow) and its tool and approval events (it sends them) enter the
// turn's log as child events. Its result is stored as the call's
// (ExecuteTool with Delegated): the model reads the answer, bounded, and
// its refs. Cancelling the turn cancels the child; so does the turn's end,
// whatever it is (PARENT_CLOSE_POLICY_REQUEST_CANCEL).

// delegating is the turn's child turns: the signal their batches come
// by, the children in the order they started, and what they used.
type delegating struct {
	t               *turn // the core: its request, agent, usage, deadline and log
	children        workflow.ReceiveChannel
	delegations     []*delegation
	delegatedTokens int
}

// start registers the signal that brings the child turns' batches, and
// takes back the tokens the turn's earlier runs delegated. Every child
// has ended at a step boundary, where the turn continues as new.
func (d *delegating) start(ctx workflow.Context, t *turn, carried *contract.TurnCarry) error {
	d.t = t
	d.children = workflow.GetSignalChannelWithOptions(ctx, contract.SignalNotifyTokens, workflow.SignalChannelOptions{
		Description: "token batches and tool events of the turn's child turns (delegate_to_agent calls)",
	})
	if carried != nil {
		d.delegatedTokens = carried.DelegationCarry.DelegatedTokens
	}
	return nil
}

func (d *delegating) carry(c *contract.TurnCarry) error {
	c.DelegationCarry = contract.DelegationCarry{DelegatedTokens: d.delegatedTokens}
	return nil
}

// delegation is a child turn the turn started for one call.
type delegation struct {
	callID   string
	streamID string
	stop     workflow.CancelFunc
	done     bool
}

// delegate starts call i of the round, a delegate_to_agent call, as a
// child turn in a coroutine of its own; its future settles with the
// stored result once the child has ended, or with the refusal the model
// reads.
func (r *toolRound) delegate(ctx workflow.Context, i int, spec agent.Tool) {
	t, c := r.t, r.calls[i]
	f, settle := workflow.NewFuture(ctx)
	r.futures[i] = f
	req, err := t.childRequest(ctx, spec, c, r.limits, r.delegations)
	if err != nil {
		settle.SetError(err)
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		res := t.runChild(ctx, c, req)
		if res.Status == agent.StatusCanceled && (t.canceled != nil || ctx.Err() != nil) {
			// The turn's end stopped the child: the call was cancelled
			// with the turn, as a tool call in flight is.
			settle.SetError(temporal.NewCanceledError())
			return
		}
		res.Output = words.Clip(res.Output, agent.MaxDelegateOutputBytes)
		res.Metadata.ToolCalls = nil
		in := r.in[i]
		in.Delegated = &res
		var out contract.ExecuteToolResult
		// The child's work is done: storing what it came to outlasts a
		// database outage, as the turn's own steps do.
		err := dbStep(ctx, contract.ExecuteTool, t.deadline, in, &out)
		settle.Set(out, err)
	})
}

// childRequest is the request of the child turn that answers call c, or
// why the call is refused: an error the model reads as the call's result.
// The turn's tokens left are shared among the round's delegations
// (shares of them), so that children running side by side cannot spend
// more than the turn has.
func (d *delegating) childRequest(ctx workflow.Context, spec agent.Tool, c agent.ToolCall, limits agent.Limits, shares int) (agent.TurnRequest, error) {
	// Decoding JSON into structs is deterministic; workflowcheck cannot
	// tell.
	cfg, err := agent.ParseDelegateConfig(spec.Config) //workflowcheck:ignore
	if err != nil {
		return agent.TurnRequest{}, err
	}
	args, err := agent.ParseDelegateArgs(c.Arguments) //workflowcheck:ignore
	if err != nil {
		return agent.TurnRequest{}, err
	}
	if err := cfg.Allows(d.t.agent.ID, args.AgentID); err != nil {
		return agent.TurnRequest{}, err
	}
	depth := d.t.req.Depth() + 1
	if depth > cfg.MaxDepth {
		return agent.TurnRequest{}, agent.Errorf(agent.CodeInvalid,
			"delegation refused: this turn is %d delegation(s) deep, and %s allows chains of at most %d; answer without delegating",
			depth-1, spec.Name, cfg.MaxDepth)
	}
	budget := 0
	if b := d.t.req.Budget(limits); b > 0 {
		budget = (b - d.t.usage.TotalTokens) / max(shares, 1)
		if budget <= 0 {
			return agent.TurnRequest{}, agent.Errorf(agent.CodeTokenBudget,
				"delegation refused: this turn has used %d of its %d tokens and has none to give; answer without delegating", d.t.usage.TotalTokens, b)
		}
	}
	left := d.t.deadline.Sub(workflow.Now(ctx)) / time.Second
	if left < 1 {
		return agent.TurnRequest{}, agent.Errorf(agent.CodeTimeout, "delegation refused: the turn has no time left")
	}
	cc := d.t.req.Context
	cc.PreviousResults = append([]agent.PreviousResult(nil), cc.PreviousResults...)
	for _, ref := range args.Refs {
		cc.PreviousResults = append(cc.PreviousResults, agent.PreviousResult{NodeID: c.ID, ResultRef: ref})
	}
	req := agent.TurnRequest{
		Version:  agent.ProtocolVersion,
		JobID:    agent.ChildJobID(d.t.req.JobID, c.ID),
		TenantID: d.t.req.TenantID, AgentID: args.AgentID,
		Prompt: args.ChildPrompt(), History: agent.HistoryFresh, Context: cc,
		TimeoutSec: int(left), TokenBudget: budget,
		RunID: d.t.req.RunID, WorkflowTag: d.t.req.WorkflowTag, Stream: d.t.req.Stream,
		Parent: &agent.ParentRef{WorkflowID: d.t.workflowID, CallID: c.ID, Depth: depth},
		// The child acts for the same person: policies over caller.roles
		// apply to its tools as to the parent's.
		Caller:  d.t.req.Caller,
		Channel: agent.ChannelDelegate,
	}
	if d.t.req.Streaming() {
		req.Notify = d.t.workflowID
	}
	if err := req.Validate(); err != nil {
		return agent.TurnRequest{}, agent.Errorf(agent.CodeInvalid, "delegation refused: %s", contract.ErrorOf(err).Message)
	}
	if err := req.Context.Bounded(); err != nil {
		return agent.TurnRequest{}, agent.Errorf(agent.CodeInvalid, "delegation refused: %s", contract.ErrorOf(err).Message)
	}
	return req, nil
}

// runChild runs the child turn to its end and returns its result, as
// stored, or as much as is known of why it did not finish. Its tokens are
// the turn's.
func (d *delegating) runChild(ctx workflow.Context, c agent.ToolCall, req agent.TurnRequest) agent.TurnResult {
	id := contract.TurnWorkflowID(req.TenantID, req.JobID)
	cctx, stop := workflow.WithCancel(ctx)
	child := &delegation{callID: c.ID, streamID: id, stop: stop}
	d.delegations = append(d.delegations, child)
	cctx = workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{
		WorkflowID:          id,
		WorkflowTaskTimeout: contract.TurnTaskTimeout,
		StaticSummary:       contract.TurnSummary(req),
		StaticDetails:       contract.TurnDetails(req),
		// The child stores a canceled result when the turn ends first,
		// and the turn waits for it, so that its tokens are counted.
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
	})
	var res agent.TurnResult
	err := workflow.ExecuteChildWorkflow(cctx, contract.AgentTurn, req).Get(ctx, &res)
	child.done = true
	if err != nil {
		failed, ok := contract.FailedResult(err)
		if !ok {
			// It did not start (its id is taken by a run still going), or
			// it ended without a result (terminated).
			failed = agent.TurnResult{Version: agent.ProtocolVersion, JobID: req.JobID, Status: agent.StatusFailed,
				Error: agent.TurnErrorOf(contract.ErrorOf(err))}
		}
		res = failed
	}
	d.t.usage = d.t.usage.Add(agent.Usage{TotalTokens: res.Metadata.TokensUsed, CachedTokens: res.Metadata.CachedTokens})
	d.delegatedTokens += res.Metadata.TokensUsed
	return res
}

// stopDelegations cancels the child turns still running.
func (d *delegating) stopDelegations() {
	for _, c := range d.delegations {
		if !c.done {
			c.stop()
		}
	}
}

// delegationOf returns the call whose child turn has the given stream.
func (d *delegating) delegationOf(streamID string) (string, bool) {
	for _, c := range d.delegations {
		if c.streamID == streamID {
			return c.callID, true
		}
	}
	return "", false
}

// acceptChild logs a child's batch (token batches, or one of its tool
// events) as child events, if the child is one of the turn's.
func (d *delegating) acceptChild(ctx workflow.Context, b agent.TokenBatch) {
	callID, ok := d.delegationOf(b.StreamID)
	if !ok {
		workflow.GetLogger(ctx).Debug("batch of an unknown child refused", "stream_id", b.StreamID)
		return
	}
	d.t.log.AppendChild(b, callID)
}

// drainChildren logs the child batches already received.
func (d *delegating) drainChildren(ctx workflow.Context) {
	signals.Drain(d.children, func(b agent.TokenBatch) { d.acceptChild(ctx, b) })
}
