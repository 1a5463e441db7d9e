package agent

import (
	"encoding/json"
	"time"
)

// Statuses of a TurnResult.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusRejected  = "rejected" // the request was invalid; nothing ran
	StatusCanceled  = "canceled" // someone cancelled the turn
)

// TurnResult is the v1 job protocol's output.
type TurnResult struct {
	Version       string          `json:"version"`
	JobID         string          `json:"job_id"`
	Status        string          `json:"status"`
	Output        string          `json:"output,omitempty"`
	ResultRef     string          `json:"result_ref,omitempty"`
	ResultPreview json.RawMessage `json:"result_preview,omitempty"`
	// DataRef names the data the turn's last tool produced (a dataset or a
	// document, stored by reference), when its answer rests on it;
	// ResultPreview then describes that data.
	DataRef string `json:"data_ref,omitempty"`
	// OutputJSON is the answer as a JSON object, when the turn had an
	// output schema (TurnRequest.OutputSchemaOf) and the answer matched
	// it; Output keeps the answer's text.
	OutputJSON json.RawMessage `json:"output_json,omitempty"`
	// Blocks are the answer's content blocks, in order: the model's
	// reasoning, the images and files its tools produced (by cas:// ref),
	// its JSON (OutputJSON) and its text (Output).
	Blocks []Block `json:"blocks,omitempty"`
	// Steered are the ids of the messages the turn took in while it ran
	// (SteerMessage), in order.
	Steered []string `json:"steered,omitempty"`
	// Partial says the turn was stopped while its model wrote its answer
	// (StatusCanceled): Output is what it had written, kept — in the
	// result, the session's transcript and the stream's last events.
	Partial bool `json:"partial,omitempty"`
	// Channel is the door the turn came through (TurnRequest.Channel).
	Channel  string         `json:"channel,omitempty"`
	Metadata ResultMetadata `json:"metadata"`
	Error    *TurnError     `json:"error,omitempty"`
	// CompletedAt is when the turn ended, by its workflow's clock (to the
	// microsecond, as stored); zero only in results stored before it was
	// kept.
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// SessionID is the session the turn ran in, as its request named it
	// (session_id or context.session_id); empty for a turn without one.
	// A caller that did not keep the request knows where to continue.
	SessionID string `json:"session_id,omitempty"`
	// StreamTail, on the value an AgentTurn workflow returns (not on a
	// stored result), is the end of the turn's event log: the events its
	// last workflow task logged, through the terminal status, when they
	// are small. A follower of the stream that has every event before
	// them ends with them when the workflow closes, instead of reading
	// the log from a closed workflow (a query its worker answers by
	// replaying the whole history). On the value the SaveResult activity
	// returns, it is the closing events SaveResult published on the live
	// path, which the turn logs as they are.
	StreamTail []Event `json:"stream_tail,omitempty"`
	// Citations are the chunks of documents the answer drew on, from the
	// turn's retrievals (retrieve calls, the prepare phase): those its
	// markers [n] cite, else all retrieved (Cited).
	Citations []Citation `json:"citations,omitempty"`
}

// ResultMetadata describes how a result was produced.
type ResultMetadata struct {
	AgentID      string           `json:"agent_id,omitempty"`
	AgentVersion int              `json:"agent_version,omitempty"`
	RouteRule    string           `json:"route_rule,omitempty"`
	ToolCalls    []ToolCallRecord `json:"tool_calls"`
	// ToolCallsOmitted counts the earliest tool calls of a turn that made
	// more than MaxResultToolCalls, which ToolCalls leaves out (the turn's
	// steps and its tool_end events hold them): a result stays bounded
	// however long the turn.
	ToolCallsOmitted int `json:"tool_calls_omitted,omitempty"`
	TokensUsed       int `json:"tokens_used"`
	// CacheHit says a tool call's result came from the tenant's cache or
	// the provider read part of a prompt from its prompt cache.
	CacheHit bool `json:"cache_hit"`
	// CachedTokens is how many prompt tokens the provider read from its
	// prompt cache, over the turn's model calls (delegated turns included).
	CachedTokens    int    `json:"cached_tokens,omitempty"`
	ExecutionTimeMS int64  `json:"execution_time_ms"`
	LLMModel        string `json:"llm_model,omitempty"`
}

// MaxResultToolCalls is how many of a turn's tool calls its result lists,
// the latest (ResultMetadata.ToolCallsOmitted).
const MaxResultToolCalls = 1000

// ToolCallRecord is one tool call of a turn, as reported in the result.
type ToolCallRecord struct {
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args,omitempty"`
	Status string          `json:"status"` // ok | error | rejected | timed_out | canceled | unknown
	// CacheHit says the tool's result came from the tenant's cache.
	CacheHit bool `json:"cache_hit,omitempty"`
	// Step is the pipeline step (its op, such as http_request) that
	// failed the call, when the tool is a pipeline and says so.
	Step string `json:"step,omitempty"`
}

// Tool call statuses.
const (
	ToolOK       = "ok"
	ToolError    = "error"
	ToolRejected = "rejected"
	ToolTimedOut = "timed_out"
	ToolCanceled = "canceled" // the turn was cancelled before the call ran
	// ToolUnknown: an earlier attempt of the call may have sent its
	// write, and it was not sent again: it may or may not have taken
	// effect (internal/effects).
	ToolUnknown = "unknown"
)

// TurnError says why a turn did not complete.
type TurnError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	// Tool is the tool of the call that caused the failure, when one did:
	// the call the turn's timeout interrupted, the delegation whose tokens
	// took the turn over its budget, or the failing call the model kept
	// making until max_iterations. Step is the pipeline step that failed
	// that call, when it is known.
	Tool string `json:"tool,omitempty"`
	Step string `json:"step,omitempty"`
}
