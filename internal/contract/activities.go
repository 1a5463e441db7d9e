package contract

import (
	"encoding/json"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// RouteInput asks which agent should answer a request.
type RouteInput struct {
	TenantID string            `json:"tenant_id"`
	AgentID  string            `json:"agent_id,omitempty"`
	Prompt   string            `json:"prompt"`
	Context  agent.TurnContext `json:"context"`
	// Caller is who the turn acts for, from the credential (rules over
	// caller.*).
	Caller *agent.Caller `json:"caller,omitempty"`
}

// RouteResult names the chosen agent and the rule that chose it.
type RouteResult struct {
	AgentID string `json:"agent_id"`
	// Rule is RuleExplicit when the request named the agent, RuleDefault
	// for the tenant's default agent, else the name of the routing rule
	// that matched.
	Rule string `json:"rule"`
	// CatalogVersion is the tenant's catalog version the rules came from.
	CatalogVersion int64 `json:"catalog_version,omitempty"`
	// RuleErrors are rules skipped because their condition failed.
	RuleErrors []agent.RuleError `json:"rule_errors,omitempty"`
}

// RouteResult.Rule values that are not routing rules' names.
const (
	RuleExplicit = "explicit"
	RuleDefault  = "default"
)

// LoadAgentInput names the turn and the agent it will run.
type LoadAgentInput struct {
	Request    agent.TurnRequest `json:"request"`
	WorkflowID string            `json:"workflow_id"`
	AgentID    string            `json:"agent_id"`
}

// LoadAgentResult is the pinned agent version as the turn reads it
// (agent.Agent.ForTurn), or the stored result of an earlier run of the
// same job.
type LoadAgentResult struct {
	Agent    agent.Agent       `json:"agent"`
	Existing *agent.TurnResult `json:"existing,omitempty"`
	// Compiled is the compiled agent the turn began with
	// (agent.CompiledRef): what its model calls send, kept by its hash.
	Compiled string `json:"compiled,omitempty"`
	// ObserveEvents says the worker has Event hooks: the turn runs
	// ObserveEvents once its log has ended. Recorded here, so that the
	// turn's replay schedules what its run did.
	ObserveEvents bool `json:"observe_events,omitempty"`
}

// ObserveEventsInput names the turn whose log the worker's Event hooks
// read, from its first event to its terminal one.
type ObserveEventsInput struct {
	TenantID   string `json:"tenant_id"`
	AgentID    string `json:"agent_id"`
	JobID      string `json:"job_id"`
	WorkflowID string `json:"workflow_id"`
}

// CallModelInput names everything the model call needs by reference: the
// pinned agent version, the turn (whose steps are read from the store) and
// the session. Workflow history therefore does not grow with the length of
// the conversation.
type CallModelInput struct {
	TenantID     string `json:"tenant_id"`
	JobID        string `json:"job_id"`
	AgentID      string `json:"agent_id"`
	AgentVersion int    `json:"agent_version"`
	SessionID    string `json:"session_id,omitempty"`
	History      string `json:"history,omitempty"` // agent.HistoryLoad or agent.HistoryFresh
	// Seq is the step number the reply is stored under; steps 0..Seq-1 are
	// the turn so far.
	Seq int `json:"seq"`
	// Model is the model to call, one of the agent's fallback models
	// (agent.Agent.FallbackModels) after the model before it failed for
	// good; empty for the agent's own. A reply already stored for the
	// step is returned whichever model is asked for: it is never paid
	// for twice.
	Model string `json:"model,omitempty"`
	// AttemptBase is how many attempts the step's earlier model calls
	// may have made: this call's attempt n is the step's attempt
	// AttemptBase+n, as its events, its budget reservation and its ledger
	// row are keyed, so that a fallback's attempts follow the failed
	// call's instead of repeating their numbers.
	AttemptBase int `json:"attempt_base,omitempty"`
	// ToolFailures are tool calls whose ExecuteTool gave up; they are stored
	// as the calls' results before the model is called.
	ToolFailures []ToolFailure `json:"tool_failures,omitempty"`

	// Stream asks for what the model streams — its text, its reasoning,
	// its tool calls' argument fragments — as token batches (token,
	// reasoning and tool_args_delta events), signalled to the turn
	// StreamID (SignalTokens); FirstIndex is the log index of the first
	// of them.
	Stream     bool   `json:"stream,omitempty"`
	StreamID   string `json:"stream_id,omitempty"`
	FirstIndex int64  `json:"first_index,omitempty"`
	// Notify is a workflow that also receives the batches (SignalNotifyTokens).
	Notify string `json:"notify,omitempty"`
	// TailInResult asks for the reply's last batch in the result (Tail)
	// instead of as a signal: the turn takes it with the completion, in one
	// workflow task instead of two. Only without Notify.
	TailInResult bool `json:"tail_in_result,omitempty"`
	// LiveFirst (with TailInResult) asks the call to stream its batches
	// on the live path only, stored there as they go (eventlog.Appender),
	// and to return all of them in Tail: the turn takes them in one
	// workflow task instead of one per batch. A worker whose live path
	// stores nothing signals them as before. When the call fails for good,
	// the turn seals what it streamed (SealStream).
	LiveFirst bool `json:"live_first,omitempty"`
	// HandOffAfterMs, on a call run as a local activity, is how long it
	// may hold the turn's workflow task: a call still running then goes on
	// in the worker, and the local activity returns HandedOff, for an
	// AwaitModel activity to take the call's result over (handoff.go in
	// activities). 0: the call runs to its end inside the task.
	HandOffAfterMs int `json:"hand_off_after_ms,omitempty"`
	// Context is the turn's context and Caller who it acts for, for
	// tools' approval policies.
	Context agent.TurnContext `json:"context,omitzero"`
	Caller  *agent.Caller     `json:"caller,omitempty"`
	// OutputSchema is the turn request's own output schema
	// (agent.TurnRequest.OutputSchema), which takes the place of the
	// agent's. With either, the call asks the model for an answer that
	// matches it, and checks a final answer (CallModelResult.OutputJSON,
	// OutputProblems).
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Repair, on the call that repairs a final answer which did not match
	// the output schema, is what was wrong with it (the earlier call's
	// OutputProblems): the call stores it, with what to do, as step Seq-1
	// (a user message the model reads after its answer) before it calls
	// the model.
	Repair string `json:"repair,omitempty"`
	// Steer are messages added to the turn while it ran
	// (agent.SteerMessage), each stored as a user step at its Seq, before
	// the call reads the turn so far.
	Steer []SteerStep `json:"steer,omitempty"`
	// Cut is the answer the turn's previous call was writing when a
	// steer interrupted it (InterruptModel), stored at its step as the
	// model's answer cut short (agent.Message.Partial) before the steer
	// steps: the model reads it as cut short, then the messages.
	Cut *CutStep `json:"cut,omitempty"`
	// WholeFrom is the first step the call reads whole (a model step's);
	// the steps from DigestFrom up to it it reads as a digest, one line
	// each, and those between the prompt and DigestFrom it only counts.
	// 0: every step whole (a turn's first steps, an agent whose context
	// compaction is none). The turn moves both a block of steps at a time
	// (agent.ContextPolicy).
	WholeFrom  int `json:"whole_from,omitempty"`
	DigestFrom int `json:"digest_from,omitempty"`
	// Channel is the turn's (agent.TurnRequest.Channel), for the usage
	// ledger's rows of the call.
	Channel string `json:"channel,omitempty"`
	Live
}

// CutStep is a model's answer cut short, as the step it is stored under.
type CutStep struct {
	Seq  int    `json:"seq"`
	Text string `json:"text"`
}

// InterruptModelInput names the turn whose model call in flight is to
// stop now: the call fails with ErrTypeInterrupted and its turn goes on.
type InterruptModelInput struct {
	StreamID string `json:"stream_id"`
}

// SteerStep is a message added to a running turn, as the step it is
// stored under.
type SteerStep struct {
	Seq    int    `json:"seq"`
	Prompt string `json:"prompt"`
}

// Live is what a turn hands an activity to publish on the live path of its
// stream before the activity's own work: the turn's events since the last
// it handed on. They are already in the log, and the activity runs only
// after the workflow task that logged them completed, so the live path
// never shows what the log will not hold. Wake asks for a wake-up instead,
// when the events were too large to hand on.
type Live struct {
	Events []agent.Event `json:"live_events,omitempty"`
	Wake   bool          `json:"live_wake,omitempty"`
}

// ToolFailure is the result of a tool call that could not run.
type ToolFailure struct {
	Seq     int    `json:"seq"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Message string `json:"message"`
	// Program is the run_program call whose program made the call, when
	// a program did (agent.Message.Program), and Args the call's
	// arguments, which its step keeps.
	Program string `json:"program,omitempty"`
	Args    string `json:"args,omitempty"`
	// Unknown says the call may have made its write: its worker was lost
	// mid-call and no attempt answered (agent.ToolUnknown). The model
	// reads it as an unknown outcome, with Args, not as an error.
	Unknown bool `json:"unknown,omitempty"`
}

// CallModelResult is the model's reply. Content is the final answer when
// there are no tool calls. Like every activity result it is checked
// against the worker's payload budget (1 MiB by default) before it is
// returned: a reply over it fails the call for good (ModelRejected,
// saying how large it was), never a completion the server refuses.
type CallModelResult struct {
	Content string `json:"content,omitempty"`
	// Reasoning is what the model thought before this reply, for the
	// result's reasoning block: the text only, cut to
	// agent.MaxResultReasoningBytes (the step keeps all of it, with the
	// provider's signatures).
	Reasoning string           `json:"reasoning,omitempty"`
	ToolCalls []agent.ToolCall `json:"tool_calls,omitempty"`
	Usage     agent.Usage      `json:"usage"`
	// Model is the model that answered, "provider:model": the one the
	// input named, or the agent's own.
	Model string `json:"model,omitempty"`
	// FinishReason is why the model stopped (agent.FinishStop,
	// FinishToolCalls, …, or a provider's own), for the step's
	// step_finish; told from the reply when it was read back from the
	// store.
	FinishReason string `json:"finish_reason,omitempty"`
	// Stored is true when the reply was already stored by an earlier
	// attempt and the model was not called again (its usage is then not
	// known and reported as zero).
	Stored bool `json:"stored,omitempty"`
	// Approvals lists the tool calls whose tool's policy asks a person
	// first, with the reason.
	Approvals []ApprovalNeed `json:"approvals,omitempty"`
	// Tail is the streamed reply's last batch, when the input asked for it
	// (TailInResult): the turn logs it as it would the batch's signal.
	Tail *agent.TokenBatch `json:"tail,omitempty"`
	// TailLive is the index of the last of Tail's events that is on the
	// live path already (a live-first call streamed them); 0: none. The
	// turn hands on only those after it.
	TailLive int64 `json:"tail_live,omitempty"`
	// HandedOff: the local call outlasted its HandOffAfterMs and runs on
	// in the worker; nothing else in the result is set but Attempt, the
	// step's attempt it runs as. The turn awaits it with AwaitModel.
	HandedOff bool `json:"handed_off,omitempty"`
	Attempt   int  `json:"attempt,omitempty"`
	// OutputJSON is a final answer (no tool calls) that matched the turn's
	// output schema, as compact JSON; OutputProblems says what did not
	// match when it did not. Both are empty without a schema, and on a
	// reply that asks for tools.
	OutputJSON     json.RawMessage `json:"output_json,omitempty"`
	OutputProblems string          `json:"output_problems,omitempty"`
}

// ApprovalNeed says that a tool call's policy asks a person, and why;
// Grant, when set, is an approval remembered for the turn or the session
// that decides the call (agent.Grant.Covers): the call does not wait.
type ApprovalNeed struct {
	CallID string       `json:"call_id"`
	Reason string       `json:"reason"`
	Grant  *agent.Grant `json:"grant,omitempty"`
}

// ExecuteToolInput is one tool call of a turn.
type ExecuteToolInput struct {
	TenantID     string         `json:"tenant_id"`
	JobID        string         `json:"job_id"`
	AgentID      string         `json:"agent_id"`
	AgentVersion int            `json:"agent_version"`
	Seq          int            `json:"seq"` // the step the result is stored under
	Call         agent.ToolCall `json:"call"`
	// SessionID is the turn's session: the scope of its PII placeholders
	// with the job id (internal/redact.Scope).
	SessionID string `json:"session_id,omitempty"`
	// Delegated is set for a delegate_to_agent call, which the turn ran
	// as a child AgentTurn: the child's result (its output cut to
	// agent.MaxDelegateOutputBytes, without tool_calls), stored as the
	// call's result instead of running the tool.
	Delegated *agent.TurnResult `json:"delegated,omitempty"`
	// Asked is set for an ask_user call, which the turn held until a
	// person answered (or it timed out or was cancelled): what came of
	// it, stored as the call's result instead of running the tool.
	Asked *AskedOutcome `json:"asked,omitempty"`
	// Foreign is set for a call the turn scheduled on a team's own
	// worker (an activity tool's): what it came to, stored as the call's
	// result through the tool hooks instead of running the tool.
	Foreign *ForeignOutcome `json:"foreign,omitempty"`
	// Program is the run_program call whose program made this call: the
	// result is stored marked so (agent.Message.Program), for the
	// program's next run and the trace, not for the model.
	Program string `json:"program,omitempty"`
	// Replay says the turn is a replay (agent.TurnRequest.Replay), which
	// asked no one to approve the call: the call is answered from the
	// recording, never run live, even when no recording is found.
	Replay bool `json:"replay,omitempty"`
	// Resend is set for a call whose outcome was unknown and whose tool
	// asks a person: what they decided about sending it again. The
	// stored unknown outcome is replaced by the second delivery's result
	// (approved), or by the unknown outcome with the decision (not).
	Resend *Resend `json:"resend,omitempty"`
	Live
}

// Resend is a person's decision on sending again a call whose outcome
// was unknown (agent.PendingApproval.Resend).
type Resend struct {
	// ApprovalID names the decision (agent.ResendApprovalIDOf): the
	// second delivery's intent is recorded under it (effects.Key.Resend),
	// so the ledger shows who let the call past its first intent.
	ApprovalID string `json:"approval_id"`
	Approved   bool   `json:"approved"`
	// Message is what the model reads of the decision: who approved the
	// second delivery, or who decided against it and why (or that no one
	// decided in time).
	Message string `json:"message"`
}

// AskedOutcome is what came of an ask_user call.
type AskedOutcome struct {
	Outcome  string `json:"outcome"` // agent.QuestionAnswered, ApprovalTimedOut
	Answer   string `json:"answer,omitempty"`
	Answerer string `json:"answerer,omitempty"`
	// Message, for an unanswered question, is what the model reads.
	Message string `json:"message,omitempty"`
}

// ExecuteToolResult is a short account of the call for the workflow. The
// full output is stored as step Seq; when it is longer than the preview it
// is also stored as a blob and named by Ref. Data's preview is bounded
// (agent.DataPreview.Bounded), so the account stays kilobytes whatever the
// data; one over the payload budget all the same becomes the tool's error
// result, which says what was too large.
type ExecuteToolResult struct {
	CallID  string `json:"call_id"`
	Status  string `json:"status"` // agent.ToolOK, ToolError or ToolUnknown
	Preview string `json:"preview"`
	Ref     string `json:"ref,omitempty"`
	// Data describes the data the call produced, kept by reference, with
	// a bounded preview.
	Data *agent.DataPreview `json:"data,omitempty"`
	// CacheHit says the result came from the tenant's cache.
	CacheHit bool `json:"cache_hit,omitempty"`
	// Step is the pipeline step (its op) that failed an error result,
	// when the tool is a pipeline.
	Step string `json:"step,omitempty"`
	// Parts are the images and files the call produced, by cas:// ref.
	Parts []agent.Part `json:"parts,omitempty"`
	// Citations are the chunks of documents the call's output quotes, in
	// the order it numbered them (a retrieve call's).
	Citations []agent.Citation `json:"citations,omitempty"`
	// Unknown, on a result of status agent.ToolUnknown, says what may
	// have happened (the write an earlier attempt was sending), for the
	// person asked whether to send the call again.
	Unknown string `json:"unknown,omitempty"`
}

// SaveResultInput is a finished turn's result.
type SaveResultInput struct {
	Request    agent.TurnRequest `json:"request"`
	WorkflowID string            `json:"workflow_id"`
	Result     agent.TurnResult  `json:"result"`
	// ToolFailures are tool calls of the last step that did not run (the
	// turn ended first): their results are stored before the result, so
	// the turn's steps answer every call the model made.
	ToolFailures []ToolFailure `json:"tool_failures,omitempty"`
	// Reasoning is what the turn's model calls thought, joined and cut
	// to agent.MaxResultReasoningBytes; Files the images and files its
	// tool calls produced. A completed result's blocks are made of them,
	// with its JSON and its text (agent.TurnResult.Blocks).
	Reasoning string        `json:"reasoning,omitempty"`
	Files     []agent.Block `json:"files,omitempty"`
	// Retrieved are the citations of the turn's retrievals, a list each
	// as it was numbered: a completed result cites those its answer drew
	// on (agent.Cited).
	Retrieved [][]agent.Citation `json:"retrieved,omitempty"`
	// Steered are the prompts of the messages the turn took in while it
	// ran, in order: the session's transcript has them after the
	// turn's own prompt.
	Steered []string `json:"steered,omitempty"`
	// CutAt are, beside Steered, the steps at which the model's answer was
	// cut short by each message (CallModelInput.Cut; 0 for a message
	// that came at a step boundary): the transcript has each such answer,
	// as partial, before its message.
	CutAt []int `json:"cut_at,omitempty"`
	// Deliver are the turn's agent's deliver targets (agent.Agent.Deliver,
	// of the version the turn pinned): with the request's, where
	// SaveResult has the result pushed (a Delivery).
	Deliver []agent.DeliverTarget `json:"deliver,omitempty"`
	// CloseFrom, for a streamed turn, is the index of the first of the
	// events the turn logs once its result is stored (eventlog.Closing):
	// SaveResult publishes them on the live path, after the turn's events
	// since its last hand-on (Live), and returns them as the result's
	// StreamTail, which the turn logs as they are. Followers then end
	// when the result is stored, not a workflow task and the close's
	// round trip later. 0 (a turn not streamed): it publishes nothing.
	CloseFrom int64 `json:"close_from,omitempty"`
	Live
}

// SealStreamInput names a live-first model call that failed for good or
// was stopped (CallModelInput.LiveFirst).
type SealStreamInput struct {
	StreamID string `json:"stream_id"`
	Step     int    `json:"step"`
	// From is the log's head: what the call's attempts stored from there
	// on is returned for the log. VoidFrom is the call's first index.
	From     int64 `json:"from"`
	VoidFrom int64 `json:"void_from"`
}

// AnswerAck is the answer of UpdateAnswer.
type AnswerAck struct {
	CallID  string `json:"call_id"`
	Outcome string `json:"outcome"` // answered
}

// ApprovalAck is the answer of UpdateApprove.
type ApprovalAck struct {
	CallID  string `json:"call_id"`
	Outcome string `json:"outcome"` // approved | rejected
	// ApprovalID is the decided call's (agent.PendingApproval), and
	// GrantID the grant the approval made, when its scope was turn or
	// session.
	ApprovalID string `json:"approval_id,omitempty"`
	GrantID    string `json:"grant_id,omitempty"`
}

// SummarizeInput names a session whose older messages the summary of its
// transcript may take in, by the memory of agent AgentID (empty: the
// tenant's default agent).
type SummarizeInput struct {
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id,omitempty"`
}

// SummarizeResult says what the summary took in: the messages through
// Through, Folded of them this time (none when the transcript still fit
// the window).
type SummarizeResult struct {
	Through int64 `json:"through,omitempty"`
	Folded  int   `json:"folded,omitempty"`
}

// PrepareEvalCaseInput is a case's conversation before its prompt,
// stored as the case's session before its turn runs.
type PrepareEvalCaseInput struct {
	TenantID  string          `json:"tenant_id"`
	SessionID string          `json:"session_id"`
	JobID     string          `json:"job_id"`
	History   []agent.Message `json:"history"`
}

// PrepareReplayInput is a recorded case about to be replayed: its
// recording's history is stored as the case's session (SessionID, under
// JobID) before its turn runs.
type PrepareReplayInput struct {
	TenantID  string          `json:"tenant_id"`
	SessionID string          `json:"session_id"`
	JobID     string          `json:"job_id"`
	Recording agent.Recording `json:"recording"`
}

// PrepareReplayResult is what the replay's turn takes of the recording.
type PrepareReplayResult struct {
	// Prompt is the recorded prompt, as stored.
	Prompt string `json:"prompt"`
	// History is how many messages of history it stored: none, and the
	// turn runs fresh.
	History int `json:"history"`
}

// ScoreEvalCaseInput is a case's turn, ended, to score and store.
type ScoreEvalCaseInput struct {
	TenantID string           `json:"tenant_id"`
	EvalID   string           `json:"eval_id"`
	AgentID  string           `json:"agent_id"`
	Ord      int              `json:"ord"`
	Case     agent.EvalCase   `json:"case"`
	Version  int              `json:"version"`
	Result   agent.TurnResult `json:"result"`
}

// FinishEvalInput names an evaluation whose cases are all scored.
type FinishEvalInput struct {
	TenantID string `json:"tenant_id"`
	EvalID   string `json:"eval_id"`
}

// AgentOnBusyInput names a conversation's agent (empty: the tenant's
// default agent), and the version it is pinned to (0: the active one).
type AgentOnBusyInput struct {
	TenantID     string `json:"tenant_id"`
	AgentID      string `json:"agent_id,omitempty"`
	AgentVersion int    `json:"agent_version,omitempty"`
}

// AgentOnBusyResult is the agent's on_busy ("" when it sets none, or
// there is no such agent).
type AgentOnBusyResult struct {
	AgentID string `json:"agent_id,omitempty"`
	OnBusy  string `json:"on_busy,omitempty"`
}

// AdmitToolInput is a call the turn is about to make on a team's own
// worker, whose tool entry has a rate limit: AdmitTool waits until the
// limit admits it. Hold bounds how long the call may hold a concurrent
// slot if nothing releases it (its attempts' time, and a margin).
type AdmitToolInput struct {
	Tool ExecuteToolInput `json:"tool"`
	Hold time.Duration    `json:"hold"`
}

// DescribeToolsInput is the task queue whose worker DescribeTools asks.
type DescribeToolsInput struct {
	TaskQueue string `json:"task_queue"`
}

// WatchForeignInput is an activity tool's call in flight on a team's
// worker, whose heartbeats WatchForeign reports as the call's progress:
// ActivityID is the id the turn scheduled it under.
type WatchForeignInput struct {
	Tool       ExecuteToolInput `json:"tool"`
	ActivityID string           `json:"activity_id"`
}

// ForeignOutcome is what a call on a team's own worker came to: the
// activity's result, as its worker encoded it, or why it failed after
// its attempts (the message the model reads).
type ForeignOutcome struct {
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Unknown says why the call's outcome is unknown: its last attempt
	// timed out, so the team's code may or may not have taken effect
	// (agent.ToolUnknown, as for every kind's write).
	Unknown string `json:"unknown,omitempty"`
}
