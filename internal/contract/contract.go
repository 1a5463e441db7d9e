// Package contract is agentflow's Temporal contract, declared once: the
// task queue, workflow, activity, signal, query and update names, the
// workflow ids, the search attributes, and the inputs and results of the
// activities. Users type these names in the temporal CLI and in workflows
// of any SDK language, and histories store them, so they never change.
//
// The turn's own input and output (agent.TurnRequest, agent.TurnResult)
// and the payloads of signals, queries and updates (agent.TokenBatch,
// agent.EventsQuery, agent.ApprovalDecision, agent.SendMessage, …) are
// domain types; this package names where each one travels.
//
// It links only the standard library, the domain (internal/agent) and the
// SDK's temporal package (error and search-attribute types), so that the
// workflows, the activities, the gateway and the starter can all depend
// on it without depending on each other's adapters. Failure and ErrorOf
// convert errors between the domain and Temporal with agent's one table.
package contract

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Product is the product's name, which names what it owns outside
// Temporal too: the local stack's bucket, the Kubernetes objects it
// manages, the server's name to other agents' clients.
const Product = "agentflow"

// TaskQueue is the default task queue of workers and starters.
const TaskQueue = Product

// Workflow types.
const (
	// AgentTurn runs one turn: input agent.TurnRequest (and, in a run
	// after the first, the TurnCarry its previous run handed on), result
	// agent.TurnResult. A turn that cannot complete fails with a
	// non-retryable application error whose type is one of agent.ErrType*
	// and whose details hold the TurnResult (status rejected or failed).
	AgentTurn = "AgentTurn"
	// Conversation serialises a session's turns: input
	// agent.ConversationInput.
	Conversation = "Conversation"
	// Evaluation runs a dataset's cases against one or two versions of an
	// agent as child AgentTurns and scores them: input agent.EvalInput,
	// result agent.EvalRun (its totals; the cases are in the store).
	Evaluation = "Evaluation"
	// Delivery pushes an ended turn's result to its deliver targets
	// (agent.Delivery), retrying each: input DeliveryInput, no result.
	// SaveResult starts it, id DeliveryWorkflowID, so that the turn's
	// close does not wait for a receiver.
	Delivery = "Delivery"
	// DescribeTools asks the team's worker on a task queue how it
	// describes its activities as tools (agent.PublishedToolsActivity),
	// when a catalog is applied: input DescribeToolsInput, result
	// agent.PublishedTools.
	DescribeTools = "DescribeTools"
)

// Activity types. AgentTurn runs Route, LoadAgent, SaveResult,
// RecordApproval, SealStream and RunProgram as local activities, and CallModel and ExecuteTool as
// activities (ExecuteTool as a local activity for tools whose execution
// is local), and ObserveEvents as one when the worker has Event hooks. A Conversation runs Summarize between turns.
const (
	Route          = "Route"          // RouteInput → RouteResult
	LoadAgent      = "LoadAgent"      // LoadAgentInput → LoadAgentResult
	CallModel      = "CallModel"      // CallModelInput → CallModelResult
	AwaitModel     = "AwaitModel"     // CallModelInput → CallModelResult (a local call handed off)
	ExecuteTool    = "ExecuteTool"    // ExecuteToolInput → ExecuteToolResult
	RunProgram     = "RunProgram"     // RunProgramInput → RunProgramResult (program.go)
	SaveResult     = "SaveResult"     // SaveResultInput → agent.TurnResult
	RecordApproval = "RecordApproval" // agent.ApprovalRecord → nothing
	SealStream     = "SealStream"     // SealStreamInput → *agent.TokenBatch
	Summarize      = "Summarize"      // SummarizeInput → SummarizeResult
	AgentOnBusy    = "AgentOnBusy"    // AgentOnBusyInput → AgentOnBusyResult (local, a Conversation's)
	InterruptModel = "InterruptModel" // InterruptModelInput → nothing (local: a steer stops the call in flight)
	ObserveEvents  = "ObserveEvents"  // ObserveEventsInput → nothing (the worker's Event hooks read the ended turn's log)
	AdmitTool      = "AdmitTool"      // AdmitToolInput → nothing (a rate-limited call on a team's worker waits for its limit)
	WatchForeign   = "WatchForeign"   // WatchForeignInput → nothing (a team's activity's heartbeats as its call's progress)

	// An Evaluation's activities.
	BeginEval       = "BeginEval"       // agent.EvalInput → nothing
	PrepareEvalCase = "PrepareEvalCase" // PrepareEvalCaseInput → nothing
	PrepareReplay   = "PrepareReplay"   // PrepareReplayInput → PrepareReplayResult
	ScoreEvalCase   = "ScoreEvalCase"   // ScoreEvalCaseInput → agent.EvalCaseResult
	FinishEval      = "FinishEval"      // FinishEvalInput → nothing

	// A Delivery's activity: one attempt at one target.
	Deliver = "Deliver" // DeliverInput → nothing
)

// Signals, queries and updates of AgentTurn.
const (
	// SignalTokens carries an agent.TokenBatch from a streaming CallModel.
	SignalTokens = "tokens"
	// QueryEvents answers an agent.EventsQuery with an agent.EventsPage.
	QueryEvents = "events"
	// SignalApprove and UpdateApprove carry an agent.ApprovalDecision; the
	// update answers with an ApprovalAck and refuses unknown and already
	// decided calls, and a decision whose approval_id is another call's.
	// {"call_id","approved","reason","approver"} is all an operator needs;
	// "approval_id" binds the decision to the call that waits with it,
	// and "scope", "match" and "expires_in_sec" remember an approval as a
	// grant (agent.Grant).
	SignalApprove = "approve"
	UpdateApprove = SignalApprove
	// QueryPendingApprovals answers with []agent.PendingApproval.
	QueryPendingApprovals = "pending_approvals"
	// SignalAnswer and UpdateAnswer carry an agent.Answer to an ask_user
	// call; the update answers with an AnswerAck and refuses answers to
	// calls that do not wait, from a token without the question's role,
	// and outside its choices.
	SignalAnswer = "answer"
	UpdateAnswer = SignalAnswer
	// QueryPendingQuestions answers with []agent.PendingQuestion.
	QueryPendingQuestions = "pending_questions"
	// QueryStatus answers with an agent.TurnStatus.
	QueryStatus = "status"
	// SignalToolProgress carries an agent.ToolProgress from a running
	// ExecuteTool: the turn logs it as a tool_progress event.
	SignalToolProgress = "tool_progress"
	// SignalCancelTurn carries an agent.CancelRequest: the turn stops at
	// its next safe point, stores a canceled result and ends CANCELED, as
	// it does when the workflow itself is cancelled.
	SignalCancelTurn = "cancel_turn"
	// SignalSteer carries an agent.SteerMessage: the turn adds it to
	// what its model reads before its next call, and logs a steered
	// event (a Conversation's on_busy "steer").
	SignalSteer = "steer"
)

// Workflow Streams: the protocol of Temporal's workflowstreams packages
// (go.temporal.io/sdk/contrib/workflowstreams and its Python and
// TypeScript twins), so that their clients in any language can follow a
// turn. AgentTurn answers the poll update (an eventlog.PollInput, answered
// with an eventlog.PollResult) and the offset query (the next offset, a
// number) over its event log; internal/eventlog states the topics, the
// offsets and how they map to event indices.
const (
	UpdateStreamPoll  = "__temporal_workflow_stream_poll"
	QueryStreamOffset = "__temporal_workflow_stream_offset"
	// SignalStreamPublish is the protocol's publish signal. A turn takes
	// no events from it: its log is written by the turn and its model
	// calls only (internal/eventlog says why); it logs and drops each one.
	SignalStreamPublish = "__temporal_workflow_stream_publish"
	// StreamTopicEvents carries every event of the log, each as the JSON
	// of an agent.Event: what the events query pages, hence the same word.
	StreamTopicEvents = QueryEvents
	// StreamTopicText carries the text of each model reply once it is
	// final: a JSON string per reply that has text.
	StreamTopicText = "text"
)

// SignalNotifyTokens is the signal a turn's notify workflow
// (agent.TurnRequest.Notify) receives: the same agent.TokenBatch. A turn
// that delegates (delegate_to_agent) is its children's notify workflow:
// it receives their token batches, and a child (agent.TurnRequest.Parent
// set) also sends its tool_start, tool_end and approval_required events
// this way, in order, one signal at a time; the parent's log carries them
// as child events.
const SignalNotifyTokens = "agent_tokens"

// Updates and queries of Conversation.
const (
	// UpdateSendMessage takes an agent.SendMessage and answers with an
	// agent.SendMessageResult.
	UpdateSendMessage = "send_message"
	// QueryTranscript answers with an agent.Transcript.
	QueryTranscript = "transcript"
)

// Search attributes (Keyword) set on every turn and conversation. The
// namespace must have them registered; internal/devstack does so for the
// dev server. SearchChannel is a turn's channel (agent.TurnRequest.Channel,
// one of agent.Channels): `AgentflowChannel = 'a2a'` lists the turns A2A
// started.
var (
	SearchTenant  = temporal.NewSearchAttributeKeyKeyword("AgentflowTenant")
	SearchAgent   = temporal.NewSearchAttributeKeyKeyword("AgentflowAgent")
	SearchSession = temporal.NewSearchAttributeKeyKeyword("AgentflowSession")
	SearchChannel = temporal.NewSearchAttributeKeyKeyword("AgentflowChannel")
)

// SearchAttributes are the names of the search attributes above, which a
// namespace must have registered (Keyword) before a worker runs turns.
func SearchAttributes() []string {
	return []string{SearchTenant.GetName(), SearchAgent.GetName(), SearchSession.GetName(), SearchChannel.GetName()}
}

// MemoRequestHash is the memo field of a turn started through turnclient:
// the hash of its request (agent.TurnRequest.Hash), set with the start, so
// that a second start of the job can tell its own request from another
// one's; the Web UI shows it with the workflow.
const MemoRequestHash = "agentflow_request_hash"

// TurnTaskTimeout is the workflow task timeout every AgentTurn is started
// with (by the gateway, the CLI, schedules, conversations, delegations and
// evaluations). It is how long a turn whose worker died in the middle of a
// workflow task waits before another worker takes the task over: most of
// a killed worker's pause. 3 s, not Temporal's 10 s: a turn holds a task
// about a second at most (its local model calls hand off to an activity
// after that, and the calls of one task start the next call in a task of
// its own: workflows' handOffAfter), so the SDK, which carries a task
// that runs local activities into the next at 0.8 of the timeout, seldom
// has to. What it costs and what it gains: docs/concepts/reliability.md,
// "Back in seconds".
const TurnTaskTimeout = 3 * time.Second

// TurnWorkflowID is the id of the AgentTurn for a tenant's job.
func TurnWorkflowID(tenantID, jobID string) string { return "turn/" + tenantID + "/" + jobID }

// DeliveryWorkflowID is the id of the Delivery of a turn's result.
func DeliveryWorkflowID(turnWorkflowID string) string { return "deliver/" + turnWorkflowID }

// DeliveryInput is a Delivery's: the ended turn (its result is read from
// the store by job id: history carries no answers) and where it goes.
type DeliveryInput struct {
	TenantID   string           `json:"tenant_id"`
	JobID      string           `json:"job_id"`
	StreamID   string           `json:"stream_id"` // the turn's workflow id
	SessionID  string           `json:"session_id,omitempty"`
	Deliveries []agent.Delivery `json:"deliveries"`
}

// DeliverInput is one Deliver activity: a Delivery's target i.
type DeliverInput struct {
	TenantID  string         `json:"tenant_id"`
	JobID     string         `json:"job_id"`
	StreamID  string         `json:"stream_id"`
	SessionID string         `json:"session_id,omitempty"`
	Delivery  agent.Delivery `json:"delivery"`
}

// EvalWorkflowID is the id of an evaluation's Evaluation workflow.
func EvalWorkflowID(tenantID, evalID string) string { return "eval/" + tenantID + "/" + evalID }

// ConversationWorkflowID is the id of a session's Conversation.
func ConversationWorkflowID(tenantID, sessionID string) string {
	return "conv/" + tenantID + "/" + sessionID
}

// TurnSummary is the one-line StaticSummary shown in the Web UI for a
// turn, e.g. "assistant: What is 12.5 * 4?".
func TurnSummary(req agent.TurnRequest) string {
	who := cmp.Or(req.AgentID, "routed")
	return OneLine(who+": "+req.Prompt, 100)
}

// TurnDetails is the StaticDetails shown in the Web UI under a turn's
// summary (Markdown): who and what it is for, then the prompt in full (up
// to detailsPrompt runes), which the summary shortens to one line.
func TurnDetails(req agent.TurnRequest) string {
	who := cmp.Or(req.AgentID, "routed")
	facts := []string{"tenant `" + req.TenantID + "`", "agent `" + who + "`"}
	if req.JobID != "" {
		facts = append(facts, "job `"+req.JobID+"`")
	}
	if req.SessionID != "" {
		facts = append(facts, "session `"+req.SessionID+"`")
	}
	if req.RunID != "" {
		facts = append(facts, "process run `"+req.RunID+"` node `"+req.NodeID+"`")
	}
	if req.Model != "" {
		facts = append(facts, "model `"+req.Model+"`")
	}
	facts = append(facts, jobFacts(req)...)
	prompt := []rune(req.Prompt)
	if len(prompt) > detailsPrompt {
		prompt = append(prompt[:detailsPrompt-1], '…')
	}
	return strings.Join(facts, " · ") + "\n\n" + string(prompt)
}

// detailsPrompt bounds the prompt in a turn's details: they travel with
// every start.
const detailsPrompt = 2000

// detailsState bounds the workflow state shown in a turn's details.
const detailsState = 300

// jobFacts are what the caller's system says of the job, for a turn's
// details: its owner, user, attempt, when it was made and where the
// caller's workflow stands.
func jobFacts(req agent.TurnRequest) []string {
	var facts []string
	if req.WorkflowOwner != "" {
		facts = append(facts, "owner `"+req.WorkflowOwner+"`")
	}
	if req.UserID != "" {
		facts = append(facts, "user `"+req.UserID+"`")
	}
	if req.RetryCount > 0 {
		facts = append(facts, "retry "+strconv.Itoa(req.RetryCount))
	}
	if req.CreatedAt != "" {
		facts = append(facts, "created "+req.CreatedAt)
	}
	if st := req.Context.WorkflowState; len(st) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, st) != nil {
			b.Reset()
			b.Write(st)
		}
		facts = append(facts, "workflow state `"+words.Clip(b.String(), detailsState)+"`")
	}
	return facts
}

// OneLine shortens s to at most n runes on one line, for summaries and
// previews.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
