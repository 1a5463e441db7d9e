package timeline

import (
	"encoding/json"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// Timeline is one page of a turn's timeline: the turn's header and
// totals on every page, and Items, the steps of the page in the order
// the turn took them (by Seq). It is the JSON of
// GET /v1/turn/{tenant}/{job}/timeline (docs/api/timeline.md).
type Timeline struct {
	StreamID     string `json:"stream_id"`
	TenantID     string `json:"tenant_id"`
	JobID        string `json:"job_id"`
	AgentID      string `json:"agent_id"`
	AgentVersion int    `json:"agent_version"`
	SessionID    string `json:"session_id,omitempty"`
	Channel      string `json:"channel,omitempty"`
	// Model is the model the turn asked for, when it named one.
	Model string `json:"model,omitempty"`
	// Status is running until the turn stores its result, then the
	// result's: completed, failed or rejected (canceled is failed with
	// Error.Code canceled).
	Status    string     `json:"status"`
	Error     *Error     `json:"error,omitempty"`
	Prompt    string     `json:"prompt"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Totals    Totals     `json:"totals"`
	// Runs are the turn's workflow runs, the first first: a turn that
	// continued as new has more than one. Empty when Temporal's
	// visibility could not be read (the page says so; the steps are
	// still shown).
	Runs  []Run `json:"runs"`
	Links Links `json:"links"`
	// ForkedFrom names the turn this one retried ("try again from
	// here"), when it is such a turn.
	ForkedFrom *ForkOrigin `json:"forked_from,omitempty"`
	Items      []Item      `json:"items"`
	// NextAfter, when set, is the after= of the next page: the turn has
	// more steps than this page holds.
	NextAfter *int `json:"next_after,omitempty"`
}

// Error is a failed turn's error, as its clients were told it.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Totals sum the whole turn, whatever the page.
type Totals struct {
	Steps           int     `json:"steps"`
	ModelCalls      int     `json:"model_calls"`
	ToolCalls       int     `json:"tool_calls"`
	Retries         int     `json:"retries"`
	Approvals       int     `json:"approvals"`
	InputTokens     int64   `json:"input_tokens"`
	OutputTokens    int64   `json:"output_tokens"`
	CachedTokens    int64   `json:"cached_tokens"`
	ReasoningTokens int64   `json:"reasoning_tokens"`
	CostUSD         float64 `json:"cost_usd"`
	// DurationMs is from the turn's start to its end, or to now while it
	// runs.
	DurationMs int64 `json:"duration_ms"`
}

// Run is one workflow run of the turn.
type Run struct {
	RunID     string     `json:"run_id"`
	Status    string     `json:"status"` // Temporal's: Running, Completed, ContinuedAsNew, ...
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	WebUI     string     `json:"web_ui,omitempty"`
}

// Links lead to the turn elsewhere: empty when the operator configured
// no such place (server.Config.WebUIURL, TraceURL).
type Links struct {
	WebUI string `json:"web_ui,omitempty"`
	Trace string `json:"trace,omitempty"`
	// Conversation is the conversation page of the turn's session.
	Conversation string `json:"conversation,omitempty"`
}

// ForkOrigin is the turn a retried turn was forked from, and at which
// step.
type ForkOrigin struct {
	JobID string `json:"job_id"`
	Seq   int    `json:"seq"`
}

// Item kinds.
const (
	KindPrompt    = "prompt"     // the turn's prompt (seq 0)
	KindModelCall = "model_call" // a model call and its reply
	KindToolCall  = "tool_call"  // a tool call and its result
	KindMessage   = "message"    // a message added to the running turn (steered in)
)

// Item is one step of the timeline. Every kind has Seq, Kind, Run and
// the times; the rest is set by kind.
type Item struct {
	Seq  int    `json:"seq"`
	Kind string `json:"kind"`
	// Run is the index in Timeline.Runs of the run the step was stored
	// in; -1 when unknown.
	Run int `json:"run"`
	// StartedAt is when the step began (the end of the step it follows),
	// EndedAt when it was stored; DurationMs between them. A waterfall
	// draws StartedAt..EndedAt against Timeline.StartedAt.
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at"`
	DurationMs int64     `json:"duration_ms"`

	// Text is a prompt's or message's text, or a model call's answer.
	Text string `json:"text,omitempty"`

	// Model call.
	Model string `json:"model,omitempty"`
	// Attempt is the attempt whose reply was stored; Retries the attempts
	// before it that failed (Attempt - 1).
	Attempt         int      `json:"attempt,omitempty"`
	Retries         int      `json:"retries,omitempty"`
	InputTokens     int64    `json:"input_tokens,omitempty"`
	OutputTokens    int64    `json:"output_tokens,omitempty"`
	CachedTokens    int64    `json:"cached_tokens,omitempty"`
	ReasoningTokens int64    `json:"reasoning_tokens,omitempty"`
	CostUSD         *float64 `json:"cost_usd,omitempty"`
	Reasoning       []string `json:"reasoning,omitempty"`
	// Calls are the tool calls the reply asked for.
	Calls []CallRef `json:"calls,omitempty"`
	// Request says what the call read: its step range (the steps before
	// WholeFrom, after the prompt, went as a digest). The request itself
	// is GET .../timeline/steps/{seq}/request.
	Request *RequestShape `json:"request,omitempty"`

	// Tool call.
	Tool *ToolCall `json:"tool,omitempty"`
}

// CallRef names a tool call a model call asked for.
type CallRef struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
}

// RequestShape is what a model call read of its turn.
type RequestShape struct {
	// WholeFrom is the first step sent whole; DigestFrom the first step
	// the digest describes (0 and 0: every step whole).
	WholeFrom  int `json:"whole_from"`
	DigestFrom int `json:"digest_from"`
}

// ToolCall is a tool call's arguments, result and what became of it.
type ToolCall struct {
	CallID string          `json:"call_id"`
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args,omitempty"`
	// Result is the result as the model read it, clipped to
	// MaxResultPreview bytes (ResultClipped then says so).
	Result        string `json:"result"`
	ResultClipped bool   `json:"result_clipped,omitempty"`
	// ResultRef is where the call's whole data is kept, when it produced
	// data beside its text (opened on demand with GET /v1/results).
	ResultRef string `json:"result_ref,omitempty"`
	Error     bool   `json:"error,omitempty"`
	CacheHit  bool   `json:"cache_hit,omitempty"`
	// Program is the run_program call whose program made this call.
	Program string `json:"program,omitempty"`
	// Delivery is the call's write to the far side, for tools with side
	// effects (agent.Tool delivery): its state and HTTP status.
	Delivery *Delivery `json:"delivery,omitempty"`
	Approval *Approval `json:"approval,omitempty"`
}

// Delivery is what the side-effects ledger (tool_effects) holds of a
// call's write.
type Delivery struct {
	State  string `json:"state"` // sending, delivered
	Status int    `json:"status,omitempty"`
	Target string `json:"target,omitempty"`
}

// Approval is how a call behind approval was decided.
type Approval struct {
	Outcome     string    `json:"outcome"` // approved, rejected, timed_out
	Approver    string    `json:"approver,omitempty"`
	Via         string    `json:"via,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	GrantID     string    `json:"grant_id,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	DecidedAt   time.Time `json:"decided_at"`
}

// MaxResultPreview is how much of a tool's result an item carries.
const MaxResultPreview = 4096

// Request is what the model call at step Seq read: the JSON of
// GET /v1/turn/{tenant}/{job}/timeline/steps/{seq}/request. The system
// prompt and tools are those of the turn's agent version; Messages are
// the turn's prompt, then the steps the call read whole (a step a
// program's call stored is left out: the model read its program's
// result). The steps a digest described are named by Digest, not shown.
type Request struct {
	Seq   int    `json:"seq"`
	Model string `json:"model"`
	// SystemPrompt is shown to callers with the admin role only;
	// SystemPromptHidden says it was left out.
	SystemPrompt       string          `json:"system_prompt,omitempty"`
	SystemPromptHidden bool            `json:"system_prompt_hidden,omitempty"`
	Tools              []ToolOffered   `json:"tools"`
	Digest             string          `json:"digest,omitempty"`
	Messages           []agent.Message `json:"messages"`
}

// ToolOffered is a tool the model call was offered.
type ToolOffered struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}
