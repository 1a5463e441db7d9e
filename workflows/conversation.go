package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
)

// Conversation limits.
const (
	defaultMaxHistoryEvents = 2000
	// rollHeadroom: a run rolls over while its history still has room for
	// another turn and the updates that come with it, so that no run ever
	// passes MaxHistoryEvents.
	rollHeadroom = 60
	windowTurns  = 10   // turns kept in full in workflow state
	digestBytes  = 2048 // the digest of older turns
	recentJobs   = 500  // job ids remembered for idempotency
)

// Conversation (contract.Conversation) serialises a session's messages: each becomes a child
// AgentTurn, run one after the other. Workflow state holds ids, a short
// window and a digest; turns read the transcript from the store, so the
// history each turn adds does not grow with the conversation. It continues
// as new when the server suggests it or its history reaches
// MaxHistoryEvents — only between turns and once every handler has
// returned — carrying the messages not yet answered.
//
// It keeps an event log (stream.go) and serves it with Workflow Streams:
// each message's start, its turn's events, its answer and its end, at
// offsets that go on across runs.
func Conversation(ctx workflow.Context, in agent.ConversationInput) error {
	if err := in.Validate(); err != nil {
		return contract.Failure(err)
	}
	c := &conversation{in: in, started: map[string]bool{}, refused: map[string]error{}, recent: map[string]string{}}
	if carry := in.Carry; carry != nil {
		c.carry = *carry
		for _, id := range carry.Recent {
			c.recent[id] = carry.RecentHashes[id]
		}
	}
	c.in.Carry = nil
	if err := c.startStream(ctx, in.Carry); err != nil {
		return err
	}
	if err := c.register(ctx); err != nil {
		return err
	}
	if c.carry.Runs == 0 {
		if err := workflow.UpsertTypedSearchAttributes(ctx,
			contract.SearchTenant.ValueSet(in.TenantID), contract.SearchSession.ValueSet(in.SessionID)); err != nil {
			return fmt.Errorf("set search attributes: %w", err)
		}
	}
	for {
		if err := c.awaitMessage(ctx); err != nil {
			return err
		}
		if c.shouldRoll(ctx) {
			// Release the handlers waiting for their turn to start (the next
			// run starts them) and the polls waiting for events (the next
			// run answers them), let every handler return, then roll over.
			c.rolling = true
			c.detachPollers()
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			next := c.in
			carry := c.carry
			carry.Runs++
			stream, err := c.handOn(ctx)
			if err != nil {
				return err
			}
			carry.Stream = stream
			next.Carry = &carry
			return workflow.NewContinueAsNewError(ctx, contract.Conversation, next)
		}
		c.loadAgentOnBusy(ctx)
		msg := c.carry.Pending[0]
		c.carry.Pending = c.carry.Pending[1:]
		c.runTurn(ctx, msg)
		c.noteTurn(msg)
		c.summarize(ctx)
	}
}

// summarizeEvery is how many turns a Conversation answers between two
// looks at its session's memory (Summarize).
const summarizeEvery = 4

// summarize has the session's older messages folded into its summary when
// they have outgrown the agent's memory window (contract.Summarize), every
// summarizeEvery turns of a conversation that loads its history
// (memoryChange). A failure leaves the summary as it was: the next look
// tries again, and turns read what fits meanwhile.
func (c *conversation) summarize(ctx workflow.Context) {
	if c.in.History == agent.HistoryFresh || c.carry.Turns == 0 || c.carry.Turns%summarizeEvery != 0 ||
		workflow.GetVersion(ctx, memoryChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:             "summarize the session's older messages",
	})
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%d turns; keeping the session's memory", c.carry.Turns))
	var res contract.SummarizeResult
	err := workflow.ExecuteActivity(actx, contract.Summarize, contract.SummarizeInput{
		TenantID: c.in.TenantID, SessionID: c.in.SessionID, AgentID: c.in.AgentID,
	}).Get(ctx, &res)
	if err != nil {
		workflow.GetLogger(ctx).Warn("summarizing the session failed; its turns read what fits until the next try", "error", contract.ErrorOf(err).Message)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%d turns; waiting for a message", c.carry.Turns))
}

type conversation struct {
	in      agent.ConversationInput
	carry   agent.ConversationCarry
	memory  memoryTurns     // long-term memory's (memory.go)
	started map[string]bool // job ids whose turn started in this run (lookups only)
	// refused holds, by job id, why a message accepted in this run was
	// refused when its turn was to start (jobTakenChange), for its
	// send_message handler to return (lookups only).
	refused map[string]error
	// recent holds the job ids accepted lately, each with the hash of its
	// turn's request ("": accepted before hashes were kept) (lookups only).
	recent  map[string]string
	rolling bool
	// agentOnBusy is the conversation's agent's on_busy, once read in
	// this run (onBusyLoaded).
	agentOnBusy  string
	onBusyLoaded bool
	// running is the turn answering a message, while it runs.
	running *runningTurn

	// The event log (stream.go): streams says this run keeps it
	// (conversationStreamsChange); turns receives the batches of the
	// running message's turn; span is the most history events one
	// message's turn added to this run.
	streams bool
	log     *eventlog.Log
	turns   workflow.ReceiveChannel
	span    int
}

// runningTurn is the turn answering a message, and the on_busy policy of
// a later message that stopped it (interrupt or rollback), if one did.
type runningTurn struct {
	jobID, workflowID string
	stoppedBy         string
	// steered are the messages added to it (on_busy steer), and taken
	// those it took in, once it has ended (agent.TurnResult.Steered).
	steered []agent.PendingMessage
	taken   []string
}

// onBusy is the policy a message follows if a turn runs when it arrives:
// the message's, else the conversation's, else its agent's.
func (c *conversation) onBusy(m agent.SendMessage) string {
	switch {
	case m.OnBusy != "":
		return m.OnBusy
	case c.in.OnBusy != "":
		return c.in.OnBusy
	case c.agentOnBusy != "":
		return c.agentOnBusy
	}
	return agent.OnBusyEnqueue
}

// loadAgentOnBusy reads the conversation's agent's on_busy (AgentOnBusy),
// once a run, before its first turn, when the conversation sets none
// (agentOnBusyChange); a catalog change reaches the next run. A failure
// leaves the default.
func (c *conversation) loadAgentOnBusy(ctx workflow.Context) {
	if c.onBusyLoaded || c.in.OnBusy != "" {
		return
	}
	c.onBusyLoaded = true
	if workflow.GetVersion(ctx, agentOnBusyChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	opts := localOptions()
	opts.Summary = contract.AgentOnBusy
	opts.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 3}
	var res contract.AgentOnBusyResult
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, opts), contract.AgentOnBusy,
		contract.AgentOnBusyInput{TenantID: c.in.TenantID, AgentID: c.in.AgentID, AgentVersion: c.in.AgentVersion}).Get(ctx, &res)
	if err != nil {
		workflow.GetLogger(ctx).Warn("the agent's on_busy is unknown; messages that name none are queued", "error", contract.ErrorOf(err).Message)
		return
	}
	c.agentOnBusy = res.OnBusy
}

func (c *conversation) maxPending() int {
	return agent.OrDefault(c.in.MaxPending, agent.DefaultMaxPending)
}

func (c *conversation) shouldRoll(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	max := c.in.MaxHistoryEvents
	max = agent.OrDefault(max, defaultMaxHistoryEvents)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength()+c.headroom() >= max
}

func (c *conversation) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryTranscript, func() (agent.Transcript, error) {
		return agent.Transcript{
			TenantID: c.in.TenantID, SessionID: c.in.SessionID, Turns: c.carry.Turns, Digest: c.carry.Digest,
			Window: append([]agent.TranscriptEntry{}, c.carry.Window...), Pending: append([]agent.PendingMessage{}, c.carry.Pending...),
			Runs: c.carry.Runs,
		}, nil
	}, workflow.QueryHandlerOptions{Description: "the recent turns, a digest of earlier ones and the messages waiting"}); err != nil {
		return err
	}
	if err := c.serveStream(ctx); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateSendMessage, c.send, workflow.UpdateHandlerOptions{
		Validator:   func(_ workflow.Context, m agent.SendMessage) error { return contract.Failure(c.validate(m)) },
		Description: `send a message: {"prompt","job_id"?,"context"?} → {"turn_workflow_id","job_id"}`,
	})
}

// maxDefaultJobSuffix is the room a default job id ("<session>-<n>")
// needs beyond the session id: a dash and a message count of up to 20
// digits.
const maxDefaultJobSuffix = 21

// validate refuses a message the conversation could not run. A message
// without a job id gets "<session>-<n>", which must fit a job id: a long
// session id needs job ids given. A job id accepted lately for another
// message is a Conflict: a job id names one request. (Update validators
// do not run on replay, so these checks can change without a version.)
func (c *conversation) validate(m agent.SendMessage) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.JobID == "" && len(c.in.SessionID)+maxDefaultJobSuffix > agent.MaxKeyLength {
		return agent.Errorf(agent.CodeInvalid,
			"session_id is %d bytes, too long to number its messages (at most %d): give each message a job_id",
			len(c.in.SessionID), agent.MaxKeyLength-maxDefaultJobSuffix)
	}
	hash, seen := c.recent[m.JobID]
	seen = seen && m.JobID != ""
	if seen && hash != "" && hash != c.hash(m.JobID, m) {
		return agent.Errorf(agent.CodeConflict, "job id %q names another message of this session; use a new job id", m.JobID)
	}
	if seen {
		return nil // accepted before: the same answer again
	}
	if r := c.running; r != nil && c.onBusy(m) == agent.OnBusyReject {
		return agent.Errorf(agent.CodeConflict,
			"turn %s is answering message %q, and this message asks to be refused while a turn runs (on_busy %q): send it again once it ends, or with on_busy %q",
			r.workflowID, r.jobID, agent.OnBusyReject, agent.OnBusyEnqueue)
	}
	if n := len(c.carry.Pending); n >= c.maxPending() {
		return agent.Errorf(agent.CodeRateLimited, "%d messages of session %q are waiting for their turn, its limit (max_pending): send this one once fewer wait",
			n, c.in.SessionID)
	}
	return nil
}

// hash is the hash of the turn a message becomes (agent.TurnRequest.Hash).
func (c *conversation) hash(jobID string, m agent.SendMessage) string {
	// JSON encoding sorts map keys and SHA-256 is a function of its
	// input: deterministic, which workflowcheck cannot tell.
	return c.request(jobID, m).Hash() //workflowcheck:ignore
}

// request is the turn a message becomes.
func (c *conversation) request(jobID string, m agent.SendMessage) agent.TurnRequest {
	req := agent.TurnRequest{
		TenantID: c.in.TenantID, SessionID: c.in.SessionID, AgentID: c.in.AgentID, AgentVersion: c.in.AgentVersion, JobID: jobID,
		Prompt: m.Prompt, History: c.in.History, Context: m.Context, Caller: m.Caller,
		// The door the message came through; a message sent with the
		// temporal CLI names none.
		Channel: cmp.Or(m.Channel, agent.ChannelTemporal),
		// Where its answer is pushed: a message of an older run has none,
		// and a child's input is not compared on replay.
		Deliver: m.Deliver,
	}
	req.Normalize()
	return req
}

// send accepts a message and returns once its turn has started (or the run
// rolls over: the next run starts it). A job id seen lately (for the same
// message: validate refuses another) returns the same answer without a
// second turn.
func (c *conversation) send(ctx workflow.Context, m agent.SendMessage) (agent.SendMessageResult, error) {
	jobID := m.JobID
	if jobID == "" {
		jobID = fmt.Sprintf("%s-%d", c.in.SessionID, c.carry.Accepted+1)
	}
	res := agent.SendMessageResult{TurnWorkflowID: contract.TurnWorkflowID(c.in.TenantID, jobID), JobID: jobID}
	if _, ok := c.recent[jobID]; ok {
		return res, nil
	}
	c.carry.Accepted++
	hash := c.hash(jobID, m)
	c.recent[jobID] = hash
	c.carry.Recent = append(c.carry.Recent, jobID)
	if c.carry.RecentHashes == nil {
		c.carry.RecentHashes = map[string]string{}
	}
	c.carry.RecentHashes[jobID] = hash
	if n := len(c.carry.Recent); n > recentJobs {
		for _, old := range c.carry.Recent[:n-recentJobs] {
			delete(c.recent, old)
			delete(c.carry.RecentHashes, old)
		}
		c.carry.Recent = append([]string(nil), c.carry.Recent[n-recentJobs:]...)
	}
	pending := agent.PendingMessage{SendMessage: m, JobID: jobID}
	if r := c.running; r != nil {
		pending.Busy = c.onBusy(m)
	}
	switch pending.Busy {
	case agent.OnBusyInterrupt, agent.OnBusyRollback:
		// The message is answered next, once the running turn has stopped
		// at its next safe point.
		c.carry.Pending = append([]agent.PendingMessage{pending}, c.carry.Pending...)
		c.stopRunning(ctx, pending)
	case agent.OnBusySteer:
		if turnID, ok := c.steer(ctx, pending); ok {
			res.TurnWorkflowID, res.Steered = turnID, true
			return res, nil
		}
	default:
		c.carry.Pending = append(c.carry.Pending, pending)
	}
	if err := workflow.Await(ctx, func() bool {
		_, refused := c.refused[jobID]
		return c.started[jobID] || refused || c.rolling
	}); err != nil {
		return res, err
	}
	if err, ok := c.refused[jobID]; ok {
		delete(c.refused, jobID)
		return agent.SendMessageResult{}, contract.Failure(err)
	}
	return res, nil
}

// stopRunning stops the running turn for a message that interrupts it or
// rolls it back: a cancellation that keeps its partial answer
// (interrupt) or discards it (rollback). A turn already stopped stays
// stopped as it was.
func (c *conversation) stopRunning(ctx workflow.Context, by agent.PendingMessage) {
	r := c.running
	if r == nil || r.stoppedBy != "" {
		return
	}
	r.stoppedBy = by.Busy
	req := agent.CancelRequest{Reason: fmt.Sprintf("message %q came with on_busy %q", by.JobID, by.Busy),
		Discard: by.Busy == agent.OnBusyRollback, AtBoundary: by.StopAt == agent.StopAtBoundary}
	if by.Caller != nil {
		req.RequestedBy = by.Caller.Name
	}
	// A turn that ended meanwhile has nothing to stop: the signal's
	// failure says only that.
	_ = workflow.SignalExternalWorkflow(ctx, r.workflowID, "", contract.SignalCancelTurn, req).Get(ctx, nil)
}

// steer adds a message to the running turn, which takes it in at its
// next step boundary, and returns the turn's id; false when no turn took
// it (none runs, a message stopped it, or it ended first), and the
// message is then answered on its own, queued once.
func (c *conversation) steer(ctx workflow.Context, m agent.PendingMessage) (string, bool) {
	r := c.running
	if r == nil || r.stoppedBy != "" {
		c.carry.Pending = append(c.carry.Pending, m)
		return "", false
	}
	// Kept before the signal goes: a turn that ends without taking it in
	// leaves it to be answered next (runTurn), whenever that is.
	r.steered = append(r.steered, m)
	err := workflow.SignalExternalWorkflow(ctx, r.workflowID, "", contract.SignalSteer,
		agent.SteerMessage{ID: m.JobID, Prompt: m.Prompt}).Get(ctx, nil)
	switch {
	case c.running != r:
		// The turn ended while the signal went: it took the message in,
		// or runTurn has queued it.
		if slices.Contains(r.taken, m.JobID) {
			c.started[m.JobID] = true
			return r.workflowID, true
		}
		return "", false
	case err != nil:
		r.steered = slices.DeleteFunc(r.steered, func(p agent.PendingMessage) bool { return p.JobID == m.JobID })
		c.carry.Pending = append(c.carry.Pending, m)
		return "", false
	}
	c.started[m.JobID] = true
	return r.workflowID, true
}

// unanswered are the messages added to a turn that it did not take in
// (it ended first): they are answered next, in order.
func unanswered(steered []agent.PendingMessage, taken []string) []agent.PendingMessage {
	var out []agent.PendingMessage
	for _, m := range steered {
		if !slices.Contains(taken, m.JobID) {
			out = append(out, m)
		}
	}
	return out
}

// runTurn runs one message's turn as a child and remembers its outcome.
func (c *conversation) runTurn(ctx workflow.Context, msg agent.PendingMessage) {
	req := c.request(msg.JobID, msg.SendMessage)
	c.followTurn(ctx, &req)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          contract.TurnWorkflowID(req.TenantID, req.JobID),
		WorkflowTaskTimeout: contract.TurnTaskTimeout,
		StaticSummary:       contract.TurnSummary(req),
		StaticDetails:       contract.TurnDetails(req),
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_ABANDON,
		// As turnclient.StartOptions: a job whose turn completed keeps it;
		// only a failed one may run again (jobTakenChange).
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
	})
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("turn %d: %s", c.carry.Turns+1, contract.OneLine(msg.Prompt, 80)))
	child := workflow.ExecuteChildWorkflow(cctx, contract.AgentTurn, req)
	end := c.startMessage(ctx, msg, contract.TurnWorkflowID(req.TenantID, req.JobID))
	entry := agent.TranscriptEntry{JobID: msg.JobID, Prompt: contract.OneLine(msg.Prompt, 500)}
	var exec workflow.Execution
	if err := child.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		if c.refuseTaken(ctx, msg.JobID, err) {
			end(agent.StatusRejected, "", "")
			return
		}
		entry.Status = agent.StatusFailed
		entry.Output = "the turn could not start: " + contract.ErrorOf(err).Message
		end(entry.Status, "", "")
	} else {
		c.started[msg.JobID] = true
		c.running = &runningTurn{jobID: msg.JobID, workflowID: exec.ID}
		c.awaitTurn(ctx, child)
		var res agent.TurnResult
		if err := child.Get(ctx, &res); err != nil {
			failed, ok := contract.FailedResult(err)
			if !ok {
				failed = agent.TurnResult{Status: agent.StatusFailed, Error: &agent.TurnError{Message: contract.ErrorOf(err).Message}}
			}
			res = failed
		}
		stoppedBy := c.running.stoppedBy
		c.running.taken = res.Steered
		if left := unanswered(c.running.steered, res.Steered); len(left) > 0 {
			c.carry.Pending = append(left, c.carry.Pending...)
		}
		c.running = nil
		end(res.Status, res.Output, stoppedBy)
		entry.Status, entry.ResultRef = res.Status, res.ResultRef
		entry.Output = contract.OneLine(res.Output, 500)
		if res.Error != nil {
			entry.Output = contract.OneLine(res.Error.Message, 500)
		}
		if stoppedBy == agent.OnBusyRollback && res.Status == agent.StatusCanceled {
			// Rolled back: left out of the transcript, as its session's
			// is (the turn kept nothing).
			c.started[msg.JobID] = true
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("%d turns; waiting for a message", c.carry.Turns))
			return
		}
	}
	c.started[msg.JobID] = true
	c.remember(entry)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%d turns; waiting for a message", c.carry.Turns))
}

// refuseTaken refuses a message whose turn could not start because its
// job id's workflow has a run of another request (jobTakenChange): the
// job id names that request, so this message is answered with Conflict
// and leaves no trace, and a later message may not reuse it as its own
// either. It reports whether it refused the message.
func (c *conversation) refuseTaken(ctx workflow.Context, jobID string, startErr error) bool {
	if !temporal.IsWorkflowExecutionAlreadyStartedError(startErr) ||
		workflow.GetVersion(ctx, jobTakenChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	delete(c.recent, jobID)
	delete(c.carry.RecentHashes, jobID)
	c.carry.Recent = slices.DeleteFunc(c.carry.Recent, func(id string) bool { return id == jobID })
	c.refused[jobID] = agent.Errorf(agent.CodeConflict,
		"job id %q names a turn that another request started; use a new job id", jobID)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%d turns; waiting for a message", c.carry.Turns))
	return true
}

// remember keeps the last turns in full and folds older ones into the digest.
func (c *conversation) remember(e agent.TranscriptEntry) {
	c.carry.Turns++
	c.carry.Window = append(c.carry.Window, e)
	for len(c.carry.Window) > windowTurns {
		old := c.carry.Window[0]
		c.carry.Window = c.carry.Window[1:]
		c.carry.Digest += fmt.Sprintf("user: %s / agent: %s\n", contract.OneLine(old.Prompt, 80), contract.OneLine(old.Output, 80))
		if len(c.carry.Digest) > digestBytes {
			cut := strings.Index(c.carry.Digest[len(c.carry.Digest)-digestBytes:], "\n")
			c.carry.Digest = c.carry.Digest[len(c.carry.Digest)-digestBytes+cut+1:]
		}
	}
}
