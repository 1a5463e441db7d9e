package agent

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/words"
)

// ProtocolVersion is the version of the turn protocol this build speaks.
// Requests with the same major version are accepted (minor versions only
// add optional fields).
const ProtocolVersion = "1.0"

// History modes of a TurnRequest.
const (
	HistoryLoad  = "load"  // prepend the session's transcript
	HistoryFresh = "fresh" // start without history
)

// Limits on request fields, so that a mistaken caller gets a clear error
// instead of a workflow history full of megabytes.
const (
	MaxPromptBytes = 256 << 10
	MaxKeyLength   = 200
	// MaxToolArgumentBytes bounds the arguments a model passes to a tool,
	// MaxToolOutputBytes what a tool returns: a call over either is the
	// tool's error, which the model reads.
	MaxToolArgumentBytes = 256 << 10
	MaxToolOutputBytes   = 1 << 20
	// Bounds of a request's context.
	MaxContextMetadata = 64
	MaxContextBytes    = 64 << 10
	MaxPreviousResults = 100
)

// TurnRequest is the v1 job protocol's input: one agent turn.
type TurnRequest struct {
	Version   string `json:"version,omitempty"`
	JobID     string `json:"job_id,omitempty"` // idempotency key; defaults to the workflow id
	TenantID  string `json:"tenant_id"`
	AgentID   string `json:"agent_id,omitempty"` // empty: routed
	SessionID string `json:"session_id,omitempty"`
	Prompt    string `json:"prompt"`
	// Parts go with the prompt: images and files (by cas:// ref or https
	// URL) and more text. A model whose provider cannot take a part
	// refuses the turn, naming it.
	Parts   []Part      `json:"parts,omitempty"`
	History string      `json:"history,omitempty"` // load | fresh
	Context TurnContext `json:"context,omitzero"`
	// TimeoutSec lowers the agent's turn timeout for this request; 0 = the agent's.
	TimeoutSec int `json:"timeout_sec,omitempty"`
	// Model is the model this turn calls instead of its agent's,
	// "provider:model": one its agent lists in models_allowed (a scheduled
	// run on a cheaper model, say), else the turn is rejected
	// PermissionDenied. Empty: the agent's.
	Model string `json:"model,omitempty"`
	// AgentVersion pins the turn to that version of its agent (AgentID
	// is then required) instead of the active one: a fork run with an
	// earlier version, say. 0: the active version.
	AgentVersion int `json:"agent_version,omitempty"`

	// What the caller's system says of the job (the v1 job protocol's
	// envelope): stored with the turn's request and shown in its details,
	// never used to decide anything. Who asks, for policies and rules, is
	// Caller.
	WorkflowOwner string `json:"workflow_owner,omitempty"`
	UserID        string `json:"user_id,omitempty"`
	// RetryCount is the caller's attempt number for the job (0: the
	// first). A retry keeps the job id and is the same request: the count
	// is not part of the request's Hash.
	RetryCount int `json:"retry_count,omitempty"`
	// CreatedAt is when the caller made the job, an RFC 3339 time; not
	// part of the request's Hash either.
	CreatedAt string `json:"created_at,omitempty"`

	// Set by process callers (other workflows).
	RunID       string `json:"run_id,omitempty"`
	NodeID      string `json:"node_id,omitempty"`
	WorkflowTag string `json:"workflow_tag,omitempty"`
	// Notify names a workflow that receives the turn's token batches as signals.
	Notify string `json:"notify,omitempty"`
	// Deliver names targets of the agent (Agent.Deliver) the turn's
	// result is pushed to when it ends, beside the agent's own Always
	// ones: a webhook or a Telegram chat, outside Temporal. Unlike
	// Notify, nothing is sent while the turn runs.
	Deliver []DeliverTo `json:"deliver,omitempty"`
	// SessionEnd, for a turn in a session, is what its end does to the
	// session once its result is saved: SessionEndClose or SessionEndMark
	// (a schedule's runs set it); empty leaves the session as it is.
	SessionEnd string `json:"session_end,omitempty"`
	// ForwardEvents, with Notify naming the workflow that started the
	// turn as its child, makes the turn send that workflow its own tool
	// and approval events too, as a delegated turn sends its parent: a
	// Conversation sets it on the turn of each message, whose events its
	// log then carries. The turn ignores it when Notify is not its parent.
	ForwardEvents bool `json:"forward_events,omitempty"`
	// Stream, when false, turns token streaming off: the turn's history
	// then holds no token signals. Default on.
	Stream *bool `json:"stream,omitempty"`
	// StreamWindowSec keeps the turn answering Workflow Streams polls
	// until this many seconds after it started, at most
	// MaxStreamWindowSec, however soon it ends: a subscriber whose first
	// poll comes within it gets every item, where one that polls a closed
	// turn gets none. The turn's workflow closes, and so returns its
	// result, only when the window has passed; its log (through its final
	// status) and its stored result do not wait. 0: no window.
	StreamWindowSec int `json:"stream_window_sec,omitempty"`
	// TokenBudget caps the turn's tokens below its agent's token_budget
	// (the lower of the two applies); 0: the agent's alone. A delegating
	// turn gives its child what it has left.
	TokenBudget int `json:"token_budget,omitempty"`
	// Parent is set on a turn that another turn delegated to (a
	// delegate_to_agent call): which turn and call, and how deep.
	Parent *ParentRef `json:"parent,omitempty"`
	// Caller is who asks, from the credential the request came with: the
	// gateway sets it from the bearer token and ignores what a body says;
	// a delegated turn and a conversation's turns carry it on. Approval
	// policies and routing rules about identity read it (caller.name,
	// caller.roles), never Context. Nil for turns started through
	// Temporal directly (the CLI, other workflows): whoever can start
	// workflows on the server is trusted as the operator is.
	Caller *Caller `json:"caller,omitempty"`
	// OutputSchema, when set, is the JSON Schema (of a JSON object) the
	// turn's answer must match, in place of its agent's output_schema
	// (Agent.OutputSchema); the result then carries the answer as
	// output_json.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Channel is the door the turn came through, one of Channels: the
	// gateway sets its door's and no client body names it; a workflow
	// that starts turns sets its own (delegate, eval, schedule,
	// process). Empty, the turn sets ChannelTemporal (ChannelProcess when
	// another workflow started it as its child). Not part of the
	// request's Hash: the same job retried through another door is the
	// same request.
	Channel string `json:"channel,omitempty"`
	// Replay makes the turn a replay of one of its tenant's recorded
	// turns (Replay): set by the Evaluation workflow and by a retry only,
	// and refused on any other channel.
	Replay *Replay `json:"replay,omitempty"`

	decodeErr string // set by UnmarshalJSON when the JSON had the wrong shape
}

// Streaming reports whether the turn streams its model's tokens.
func (r TurnRequest) Streaming() bool { return r.Stream == nil || *r.Stream }

// MaxStreamWindowSec bounds TurnRequest.StreamWindowSec: a window holds
// the turn's workflow open, and its result, that long.
const MaxStreamWindowSec = 60

// StreamWindow is how long after its start the turn answers Workflow
// Streams polls at least: StreamWindowSec, or none when it is out of its
// bounds (the turn rejects the request).
func (r TurnRequest) StreamWindow() time.Duration {
	if r.StreamWindowSec < 0 || r.StreamWindowSec > MaxStreamWindowSec {
		return 0
	}
	return time.Duration(r.StreamWindowSec) * time.Second
}

// TurnContext is what the client says about the situation of the request.
// Its fields are hints: nothing in them is checked against the credential,
// so policies and rules expose them as client.* (client.user_role) and
// read who asks from Caller.
type TurnContext struct {
	// SessionID is where the v1 job protocol's envelope names the
	// session (context.session_id): a request that names it only here
	// runs in that session (Normalize moves it to TurnRequest.SessionID);
	// one that names two sessions is refused.
	SessionID       string            `json:"session_id,omitempty"`
	UserRole        string            `json:"user_role,omitempty"`
	UIPage          string            `json:"ui_page,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	PreviousResults []PreviousResult  `json:"previous_results,omitempty"`
	// WorkflowState is where the caller's workflow stands (a JSON object,
	// e.g. {"current_step": 5, "total_steps": 10}): stored and shown with
	// the turn, as the rest of the context counted against
	// MaxContextBytes.
	WorkflowState json.RawMessage `json:"workflow_state,omitempty"`
}

// PreviousResult points at the result of an earlier node of a process.
type PreviousResult struct {
	NodeID    string `json:"node_id"`
	ResultRef string `json:"result_ref"`
	// Preview is what the caller says of the result (the job protocol's
	// {"count": 150}): kept with the request, counted in its context's
	// size, never read as the result.
	Preview json.RawMessage `json:"preview,omitempty"`
}

// Normalize fills defaults that do not depend on where the request runs.
func (r *TurnRequest) Normalize() {
	if !HasOutputSchema(r.OutputSchema) {
		r.OutputSchema = nil // null is none
	}
	r.Version = cmp.Or(r.Version, ProtocolVersion)
	// The envelope's context.session_id names the session as session_id
	// does: one field after this, so that both spellings are one request
	// (and one hash). Two different sessions are left for Validate.
	if r.SessionID == "" || r.SessionID == r.Context.SessionID {
		r.SessionID, r.Context.SessionID = cmp.Or(r.SessionID, r.Context.SessionID), ""
	}
	// Empty is none: a request that sent "previous_results": [] or
	// "metadata": {} is the same request after any JSON round trip.
	if len(r.Context.PreviousResults) == 0 {
		r.Context.PreviousResults = nil
	}
	if len(r.Context.Metadata) == 0 {
		r.Context.Metadata = nil
	}
	if len(r.Parts) == 0 {
		r.Parts = nil
	}
	if r.History == "" {
		if r.SessionID != "" {
			r.History = HistoryLoad
		} else {
			r.History = HistoryFresh
		}
	}
}

// Validate reports the first problem with the request as a CodeInvalid
// error whose message names the field: ValidateBase's, then
// ValidateEnvelope's.
func (r *TurnRequest) Validate() error {
	if err := r.ValidateBase(); err != nil {
		return err
	}
	return r.ValidateEnvelope()
}

// ValidateBase is Validate without the job envelope's checks
// (ValidateEnvelope): what requests were checked for before the envelope
// was read, which a turn from then replays.
func (r *TurnRequest) ValidateBase() error {
	if r.decodeErr != "" {
		return Errorf(CodeInvalid, "malformed request: %s", r.decodeErr)
	}
	major, _, _ := strings.Cut(r.Version, ".")
	if r.Version != "" && major != "1" {
		return Errorf(CodeInvalid, "version %q is not supported: this service speaks %s", r.Version, ProtocolVersion)
	}
	if strings.TrimSpace(r.TenantID) == "" {
		return Errorf(CodeInvalid, "tenant_id is required")
	}
	if strings.TrimSpace(r.Prompt) == "" {
		return Errorf(CodeInvalid, "prompt is required and must not be blank")
	}
	if len(r.Prompt) > MaxPromptBytes {
		return Errorf(CodeInvalid, "prompt is %d bytes; the limit is %d", len(r.Prompt), MaxPromptBytes)
	}
	if !utf8.ValidString(r.Prompt) {
		return Errorf(CodeInvalid, "prompt is not valid UTF-8")
	}
	for _, f := range []struct{ name, value string }{
		{"tenant_id", r.TenantID}, {"agent_id", r.AgentID}, {"session_id", r.SessionID},
	} {
		if err := ValidateID(f.name, f.value); err != nil {
			return err
		}
	}
	// A job id may contain '/': it defaults to the workflow id, which
	// often does ("turn/<tenant>/<job>").
	if err := validateKey("job_id", r.JobID); err != nil {
		return err
	}
	switch r.History {
	case "", HistoryLoad, HistoryFresh:
	default:
		return Errorf(CodeInvalid, "history %q: want %q or %q", r.History, HistoryLoad, HistoryFresh)
	}
	if r.TimeoutSec < 0 {
		return Errorf(CodeInvalid, "timeout_sec must not be negative")
	}
	if err := r.Context.validate(); err != nil {
		return err
	}
	if r.TokenBudget < 0 {
		return Errorf(CodeInvalid, "token_budget must not be negative")
	}
	if r.StreamWindowSec < 0 || r.StreamWindowSec > MaxStreamWindowSec {
		return Errorf(CodeInvalid, "stream_window_sec is %d: want 0 to %d", r.StreamWindowSec, MaxStreamWindowSec)
	}
	if err := r.Caller.validate(); err != nil {
		return err
	}
	if err := CheckOutputSchema(r.OutputSchema); err != nil {
		return err
	}
	return r.Parent.validate()
}

// MaxRetryCount bounds a request's retry_count: a larger one is a
// caller's mistake, not a retry.
const MaxRetryCount = 10000

// ValidateEnvelope checks the model override and what the caller says of
// the job: the owner, the user, the retry count, the time it was made and
// the state of its workflow (context.workflow_state).
func (r *TurnRequest) ValidateEnvelope() error {
	if c := r.Context.SessionID; c != "" && r.SessionID != "" && c != r.SessionID {
		return Errorf(CodeInvalid, "context.session_id %q and session_id %q name two sessions: name one", words.Clip(c, 100), words.Clip(r.SessionID, 100))
	}
	if err := ValidateParts(r.Parts); err != nil {
		return err
	}
	if err := validateChannel(r.Channel); err != nil {
		return err
	}
	if r.Replay != nil {
		// An evaluation replays its cases, a person a turn to try again
		// from: no other door may make a turn a replay.
		if r.Channel != ChannelEval && r.Channel != ChannelRetry || r.Replay.JobID == "" {
			return Errorf(CodeInvalid, "replay: only an evaluation replays a recorded turn (or a person's retry)")
		}
		if err := r.Replay.Validate(); err != nil {
			return err
		}
	}
	if r.Model != "" {
		provider, _, err := ParseModel(r.Model)
		if err != nil {
			return Errorf(CodeInvalid, "model %q: want \"provider:model\", e.g. \"openai:gpt-4o-mini\"", words.Clip(r.Model, 100))
		}
		if !slices.Contains(Providers(), provider) {
			return Errorf(CodeInvalid, "model %q: unknown provider %q (known: %s)", words.Clip(r.Model, 100), words.Clip(provider, 50), strings.Join(Providers(), ", "))
		}
		if err := validateKey("model", r.Model); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, value string }{{"workflow_owner", r.WorkflowOwner}, {"user_id", r.UserID}} {
		if err := validateKey(f.name, f.value); err != nil {
			return err
		}
	}
	if r.AgentVersion < 0 || r.AgentVersion > 0 && r.AgentID == "" {
		return Errorf(CodeInvalid, "agent_version %d: want a version of the agent agent_id names (0: its active one)", r.AgentVersion)
	}
	if r.RetryCount < 0 || r.RetryCount > MaxRetryCount {
		return Errorf(CodeInvalid, "retry_count %d: want 0 (the first attempt) to %d", r.RetryCount, MaxRetryCount)
	}
	if r.CreatedAt != "" {
		if _, err := time.Parse(time.RFC3339, r.CreatedAt); err != nil {
			return Errorf(CodeInvalid, "created_at %q: want an RFC 3339 time such as 2024-10-12T10:30:00Z", words.Clip(r.CreatedAt, 100))
		}
	}
	if st := r.Context.WorkflowState; len(st) > 0 {
		trimmed := bytes.TrimSpace(st)
		if !json.Valid(trimmed) || len(trimmed) == 0 || trimmed[0] != '{' {
			return Errorf(CodeInvalid, "context.workflow_state must be a JSON object, such as {\"current_step\": 5, \"total_steps\": 10}")
		}
	}
	if err := checkSessionEnd(r.SessionEnd, r.SessionID); err != nil {
		return err
	}
	return checkDeliverTo(r.Deliver)
}

// CheckNotify refuses a notify workflow the turn may not signal. A turn
// sends its token batches only to a workflow of its own tenant: one whose
// id follows the scheme <kind>/<tenant>/<id> (turn/…, conv/…, or an
// application's workflows named the same way), or the workflow that
// started the turn as its child (parent, "" when none). Anything else is
// CodePermissionDenied: a tenant must not put signals into another's
// histories.
func (r TurnRequest) CheckNotify(parent string) error {
	if r.Notify == "" || (parent != "" && r.Notify == parent) {
		return nil
	}
	kind, rest, _ := strings.Cut(r.Notify, "/")
	tenant, id, _ := strings.Cut(rest, "/")
	if kind != "" && tenant == r.TenantID && id != "" {
		return nil
	}
	return Errorf(CodePermissionDenied, "notify %q is not a workflow of tenant %q: name one as <kind>/%s/<id> (such as turn/%s/<job_id>), or start the turn as a child of the workflow to notify",
		words.Clip(r.Notify, 100), r.TenantID, r.TenantID, r.TenantID)
}

// Depth is how many delegations lead to the turn: 0 for a turn a client
// or a process started.
func (r TurnRequest) Depth() int {
	if r.Parent == nil {
		return 0
	}
	return r.Parent.Depth
}

// Budget is the turn's token budget: the lower of its agent's and the
// request's, where set; 0: none.
func (r TurnRequest) Budget(l Limits) int {
	switch {
	case r.TokenBudget <= 0:
		return l.TokenBudget
	case l.TokenBudget <= 0:
		return r.TokenBudget
	}
	return min(r.TokenBudget, l.TokenBudget)
}

// validate checks the context's fields (Bounded checks its size).
func (c TurnContext) validate() error {
	for i, p := range c.PreviousResults {
		if p.ResultRef == "" {
			return Errorf(CodeInvalid, "context.previous_results[%d].result_ref is required", i)
		}
		if len(p.Preview) > 0 && !json.Valid(p.Preview) {
			return Errorf(CodeInvalid, "context.previous_results[%d].preview is not valid JSON", i)
		}
	}
	return nil
}

// Bounded checks the size of a request's context, so that what the caller
// knows cannot outgrow the request.
func (c TurnContext) Bounded() error {
	if len(c.Metadata) > MaxContextMetadata {
		return Errorf(CodeInvalid, "context.metadata has %d keys; the limit is %d", len(c.Metadata), MaxContextMetadata)
	}
	size := len(c.UserRole) + len(c.UIPage)
	// A sum does not depend on the order: safe in workflow code.
	//workflowcheck:ignore
	for k, v := range c.Metadata {
		size += len(k) + len(v)
	}
	if len(c.PreviousResults) > MaxPreviousResults {
		return Errorf(CodeInvalid, "context.previous_results has %d entries; the limit is %d", len(c.PreviousResults), MaxPreviousResults)
	}
	for _, p := range c.PreviousResults {
		size += len(p.NodeID) + len(p.ResultRef) + len(p.Preview)
	}
	size += len(c.WorkflowState)
	if size > MaxContextBytes {
		return Errorf(CodeInvalid, "context is %d bytes; the limit is %d", size, MaxContextBytes)
	}
	return nil
}

// ValidateID checks an identifier that becomes part of workflow ids and
// keys: printable, no slashes or whitespace, bounded length. Empty is
// allowed here; required fields are checked by the caller.
func ValidateID(field, v string) error {
	if strings.Contains(v, "/") {
		return Errorf(CodeInvalid, "%s %q may not contain '/'", field, v)
	}
	return validateKey(field, v)
}

// validateKey checks a key: printable, no whitespace, bounded length.
func validateKey(field, v string) error {
	if len(v) > MaxKeyLength {
		return Errorf(CodeInvalid, "%s is %d bytes; the limit is %d", field, len(v), MaxKeyLength)
	}
	if !utf8.ValidString(v) {
		return Errorf(CodeInvalid, "%s is not valid UTF-8", field)
	}
	for _, c := range v {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return Errorf(CodeInvalid, "%s %q may not contain spaces or control characters", field, v)
		}
	}
	return nil
}
