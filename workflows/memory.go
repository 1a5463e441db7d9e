package workflows

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// memoryIdleAfter is how long a Conversation waits without a message
// before it has the turns since its last extraction looked at for
// durable facts (MemoryExtract), unless its input says
// (agent.ConversationInput.MemoryIdleSec).
const memoryIdleAfter = 10 * time.Minute

// memoryIdle is the conversation's idle time before an extraction. A
// timer's duration is not part of what replay matches, so runs recorded
// before the input could name it replay.
func (c *conversation) memoryIdle() time.Duration {
	if c.in.MemoryIdleSec > 0 {
		return time.Duration(c.in.MemoryIdleSec) * time.Second
	}
	return memoryIdleAfter
}

// memoryTurns is what a Conversation remembers of its turns for
// long-term memory: the caller of the latest message (whose memories the
// facts become) and the turn count it last had extracted through. Not
// carried across continue-as-new: a new run extracts after its own
// turns.
type memoryTurns struct {
	caller  *agent.Caller
	through int
}

// noteTurn records the caller of a message whose turn ran.
func (c *conversation) noteTurn(msg agent.PendingMessage) {
	c.memory.caller = msg.Caller
}

// awaitMessage waits for a message (or the time to roll over). Once the
// conversation has answered turns of an authenticated caller that were
// not extracted yet (memoryExtractChange), it waits memoryIdle at most,
// then starts MemoryExtract for them and waits on.
func (c *conversation) awaitMessage(ctx workflow.Context) error {
	ready := func() bool { return len(c.carry.Pending) > 0 || c.shouldRoll(ctx) }
	if c.memory.caller == nil || c.memory.through == c.carry.Turns || ready() ||
		workflow.GetVersion(ctx, memoryExtractChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return workflow.Await(ctx, ready)
	}
	got, err := workflow.AwaitWithTimeout(ctx, c.memoryIdle(), ready)
	if err != nil || got {
		return err
	}
	c.extractMemories(ctx)
	return workflow.Await(ctx, ready)
}

// extractMemories starts MemoryExtract for the turns so far and does not
// wait for it (it outlives this run). Its id names the position, so a
// position is extracted once; a start refused because it ran before is
// no error.
func (c *conversation) extractMemories(ctx workflow.Context) {
	in := contract.MemoryExtractInput{TenantID: c.in.TenantID, SessionID: c.in.SessionID, AgentID: c.in.AgentID,
		Caller: c.memory.caller, Through: c.carry.Turns}
	c.memory.through = c.carry.Turns
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            contract.MemoryExtractWorkflowID(in.TenantID, in.SessionID, in.Through),
		StaticSummary:         "extract long-term memories of session " + in.SessionID,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	})
	child := workflow.ExecuteChildWorkflow(cctx, contract.MemoryExtract, in)
	var exec workflow.Execution
	if err := child.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		var started *temporal.ChildWorkflowExecutionAlreadyStartedError
		if !errors.As(err, &started) {
			workflow.GetLogger(ctx).Warn("starting the memory extraction failed", "error", contract.ErrorOf(err).Message)
		}
	}
}
