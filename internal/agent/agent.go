package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Agent is one immutable version of an agent's configuration. A turn pins
// the version it loaded, so a catalog change never alters a turn in flight.
type Agent struct {
	TenantID    string `json:"tenant_id"`
	ID          string `json:"id"`
	Version     int    `json:"version"`
	Description string `json:"description,omitempty"`
	Model       string `json:"model"` // "provider:model", e.g. "openai:gpt-4o-mini"
	// FallbackModels are tried in order when a model call of the turn
	// fails for good with an error type FallbackOn names: each is
	// "provider:model", none is Model, none twice.
	FallbackModels []string `json:"fallback_models,omitempty"`
	// FallbackOn names the error types (ErrType*, one of FallbackTypes)
	// that send a turn to its next fallback model. The catalog fills in
	// DefaultFallbackOn when an agent with fallback models names none, so
	// that a stored version keeps what it meant whatever the default
	// becomes.
	FallbackOn []string `json:"fallback_on,omitempty"`
	// ModelsAllowed are the models a turn of the agent may name instead
	// of Model (TurnRequest.Model): each "provider:model", none twice.
	// Empty: a turn runs on Model (and its fallbacks) only.
	ModelsAllowed []string `json:"models_allowed,omitempty"`
	SystemPrompt  string   `json:"system_prompt,omitempty"`
	// Examples are exchanges the model reads after the system prompt, as
	// if they had happened (few-shot examples): part of the prompt's
	// stable prefix, before anything a turn varies.
	Examples []Example `json:"examples,omitempty"`
	Tools    []Tool    `json:"tools,omitempty"`
	// Composites grants the agent every composite tool of its tenant
	// (kind composite_pipeline), those promoted later included: each
	// promotion makes a new version of the agent with the new tool.
	Composites bool   `json:"composites,omitempty"`
	Limits     Limits `json:"limits"`
	// Temperature for the model; nil leaves the provider's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// OutputSchema, when set, is the JSON Schema (of a JSON object) the
	// agent's final answers must match: sent as the provider's native
	// structured-output option where it has one, checked when the answer
	// arrives, repaired once, else the turn fails InvalidOutput. A turn's
	// request may name its own (TurnRequest.OutputSchema).
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// InputSchema, when set, is the JSON Schema (of a JSON object) of the
	// arguments the agent takes as a tool of other agents' hosts (MCP's
	// tools/call) in place of {"prompt": "…"}: the arguments are checked
	// against it, and the turn's prompt is them, as compact JSON.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Thinking, when set, asks the agent's model to reason before it
	// answers (models that reason on their own do so without it).
	Thinking *Thinking `json:"thinking,omitempty"`
	// Memory is how much of a session's transcript the model reads, and
	// what writes the summary of the rest.
	Memory Memory `json:"memory,omitzero"`
	// Context is how much of a turn's own steps each of its model calls
	// reads whole, and what it reads of the rest.
	Context ContextPolicy `json:"context,omitzero"`
	// OnBusy is what a message to a conversation with this agent does
	// when it arrives while a turn runs (SendMessage.OnBusy), unless the
	// message or the conversation says; empty: enqueue.
	OnBusy string `json:"on_busy,omitempty"`
	// Guardrails is the agent's chain of guardrails, in order.
	Guardrails []Guardrail `json:"guardrails,omitempty"`
	// Expose names the protocols through which other agents and apps may
	// call the agent (ExposeMCP, ExposeA2A, ExposeAGUI): nothing is
	// exposed by default.
	Expose []string `json:"expose,omitempty"`
	// Deliver are the places the agent's answers may be pushed to when a
	// turn ends (DeliverTarget): webhooks and Telegram chats.
	Deliver []DeliverTarget `json:"deliver,omitempty"`
	// ModelExecution is ModelLocal for an agent whose model calls run as
	// local activities; empty means regular activities (ModelActivity).
	ModelExecution string `json:"model_execution,omitempty"`
	// EmptyAnswer is the answer of a turn whose model answered nothing:
	// no text, no JSON, no file. Empty: DefaultEmptyAnswer.
	EmptyAnswer string `json:"empty_answer,omitempty"`
	// Prepare, when set, is the steps a turn runs before its first model
	// call (prepare.go).
	Prepare *Prepare `json:"prepare,omitempty"`
	// CodeMode, when set, offers the model run_program, a program that
	// calls the tools it names (codemode.go).
	CodeMode *CodeMode `json:"code_mode,omitempty"`
}

// DefaultEmptyAnswer is the answer of a turn whose model answered
// nothing, unless its agent says another (Agent.EmptyAnswer): a caller
// that shows the answer shows something, as the seed's service did.
const DefaultEmptyAnswer = "No output from agent."

// MaxEmptyAnswerBytes bounds Agent.EmptyAnswer.
const MaxEmptyAnswerBytes = 1000

// EmptyAnswerText is what a turn of the agent answers when its model
// answered nothing.
func (a Agent) EmptyAnswerText() string {
	if a.EmptyAnswer == "" {
		return DefaultEmptyAnswer
	}
	return a.EmptyAnswer
}

// Model call executions (Agent.ModelExecution). A regular activity is a
// trip through the server's task queue there and back, and a workflow task
// after it: a one-tool turn makes three workflow tasks and two activity
// tasks. A local model call runs inside the workflow task that scheduled
// it, so such a turn is one workflow task, its start to its answer. Each
// call is as durable either way: its reply is stored before it returns,
// and a call run again (its worker lost) takes the stored reply instead
// of calling the model again. Local is the default: the catalog writes it
// into each agent's stored spec, so an empty field is an agent stored
// when activities were (its recorded turns replay as they ran). What a
// local call gives up: the turn sees signals and timers only between
// workflow tasks, which a long call heartbeats every 80 % of the workflow
// task timeout (8 s with Temporal's default of 10 s) — a cancellation or a
// message steered in through the gateway, and the turn's timeout, reach
// the call in the worker at once all the same (workflows' doc) —; the Web
// UI shows the call once it is done, not while it runs; a turn in a call
// holds one of its worker's workflow task slots.
const (
	ModelLocal    = "local"
	ModelActivity = "activity"
)

// LocalModelCalls reports whether the agent's model calls run as local
// activities.
func (a Agent) LocalModelCalls() bool { return a.ModelExecution == ModelLocal }

// Protocols an agent can be exposed through (Agent.Expose).
const (
	ExposeMCP  = "mcp"
	ExposeA2A  = "a2a"
	ExposeAGUI = "ag_ui"
)

// ExposeProtocols are the values Agent.Expose takes.
var ExposeProtocols = []string{ExposeMCP, ExposeA2A, ExposeAGUI}

// Exposed reports whether the agent is exposed through protocol.
func (a Agent) Exposed(protocol string) bool { return slices.Contains(a.Expose, protocol) }

// Thinking is how much a model reasons before it answers: an effort
// ("low", "medium", "high") or a budget of tokens, or both. Anthropic's
// models get budget_tokens (from the effort when no budget is given:
// ThinkingBudgets), OpenAI's reasoning models reasoning_effort (from the
// budget when no effort is given).
type Thinking struct {
	Effort       string `json:"effort,omitempty"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
}

// Thinking efforts, and the budgets they mean for models that take one.
var (
	ThinkingEfforts = []string{"low", "medium", "high"}
	ThinkingBudgets = map[string]int{"low": 1024, "medium": 4096, "high": 16384}
)

// MinThinkingBudget is the least budget Anthropic's models take.
const MinThinkingBudget = 1024

// Budget is the thinking budget in tokens; 0 without thinking.
func (t *Thinking) Budget() int {
	switch {
	case t == nil:
		return 0
	case t.BudgetTokens > 0:
		return t.BudgetTokens
	}
	return ThinkingBudgets[t.Effort]
}

// EffortLevel is the thinking effort; "" without thinking.
func (t *Thinking) EffortLevel() string {
	switch {
	case t == nil:
		return ""
	case t.Effort != "":
		return t.Effort
	case t.BudgetTokens <= ThinkingBudgets["low"]:
		return "low"
	case t.BudgetTokens <= ThinkingBudgets["medium"]:
		return "medium"
	}
	return "high"
}

// ForTurn is the agent as a turn's workflow reads it, the part of it the
// turn's history keeps: its model, fallbacks, limits, and its tools'
// names, kinds, configurations and limits. The texts and schemas only the
// model call reads (descriptions, the system prompt, examples, the tools'
// parameter schemas, the output and input schemas) and the guardrails the
// model call applies are left out: activities load the whole version by id
// and version. A catalog's prompt and tool schemas thus do not grow every
// turn's history, and stay out of it.
func (a Agent) ForTurn() Agent {
	a.Description, a.SystemPrompt, a.Examples, a.OutputSchema, a.InputSchema = "", "", nil, nil, nil
	if lim := a.ToolLimits(); lim != nil {
		a.Guardrails = []Guardrail{{ToolLimits: lim}}
	} else {
		a.Guardrails = nil
	}
	tools := make([]Tool, len(a.Tools))
	for i, t := range a.Tools {
		t.Description, t.Parameters = "", nil
		tools[i] = t
	}
	if a.Tools != nil {
		a.Tools = tools
	}
	return a
}

// Tool returns the agent's tool with the given name.
func (a *Agent) Tool(name string) (Tool, bool) {
	for _, t := range a.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// FallbackTypes are the error types a model call can fail with for good
// that a fallback model may fix, the values FallbackOn may name:
//   - ModelFailed: the provider failed (5xx, 429, a broken stream or
//     connection) on every attempt of the call's retry policy;
//   - Unavailable: the call timed out (or its worker was lost) on every
//     attempt;
//   - ContextLengthExceeded: the model refused the request as longer than
//     its context window (not retried);
//   - ModelRejected: the model refused the request for any other reason
//     (a 4xx other than 429; not retried).
func FallbackTypes() []string {
	return []string{ErrTypeModelFailed, ErrTypeUnavailable, ErrTypeContextLength, ErrTypeModelRejected}
}

// DefaultFallbackOn is what an agent with fallback models falls back on
// when it names nothing: outages and rate limits that outlasted the
// retries, and a conversation too long for the model. A request the
// model refused for another reason is likely refused by the next.
func DefaultFallbackOn() []string {
	return []string{ErrTypeModelFailed, ErrTypeUnavailable, ErrTypeContextLength}
}

// NextModel is the model a turn calls when a call of model failed for
// good with an error of type errType: the fallback after model, when the
// agent falls back on errType; "" when there is none.
func (a *Agent) NextModel(model, errType string) string {
	if !slices.Contains(a.FallbackOn, errType) {
		return ""
	}
	chain := append([]string{a.Model}, a.FallbackModels...)
	i := slices.Index(chain, model)
	if i < 0 || i+1 >= len(chain) {
		return ""
	}
	return chain[i+1]
}

// Calls reports whether the agent may call model: its own, one of its
// fallbacks, or one a turn may name instead of its own.
func (a *Agent) Calls(model string) bool {
	return model == a.Model || slices.Contains(a.FallbackModels, model) || slices.Contains(a.ModelsAllowed, model)
}

// CheckModel refuses a turn's model override (TurnRequest.Model) the
// agent does not allow: PermissionDenied, naming what it allows. Its own
// model, or none, is always allowed.
func (a *Agent) CheckModel(model string) error {
	if model == "" || model == a.Model || slices.Contains(a.ModelsAllowed, model) {
		return nil
	}
	if len(a.ModelsAllowed) == 0 {
		return Errorf(CodePermissionDenied, "model %q: agent %q does not let a turn choose its model (it runs on %s; list the models a turn may name under models_allowed)",
			Clip(model, 100), a.ID, a.Model)
	}
	return Errorf(CodePermissionDenied, "model %q: agent %q lets a turn choose only %s (models_allowed) or its own %s",
		Clip(model, 100), a.ID, strings.Join(a.ModelsAllowed, ", "), a.Model)
}

// PromptCacheKey is the key a model call of a tenant's agent version asks
// its provider to cache the prompt's prefix under (OpenAI's
// prompt_cache_key): the same for every turn of the version, another for
// the next version (whose prompt or tools may differ), and opaque, so
// that the provider learns neither the tenant's nor the agent's name.
func PromptCacheKey(tenantID, agentID string, version int) string {
	sum := sha256.Sum256([]byte(tenantID + "\x00" + agentID + "\x00" + strconv.Itoa(version)))
	return "agentflow-" + hex.EncodeToString(sum[:16])
}

// Example is one few-shot exchange of an agent's prompt: what a user
// asked and what the assistant answered.
type Example struct {
	User      string `json:"user"`
	Assistant string `json:"assistant"`
}

// MaxExamples bounds an agent's few-shot examples.
const MaxExamples = 32

// Limits bound a turn. Zero values mean "use the default" (see Defaults).
type Limits struct {
	// MaxIterations is the number of model calls a turn may make.
	MaxIterations int `json:"max_iterations,omitempty"`
	// TurnTimeoutSec bounds the whole turn, model and tool calls included.
	TurnTimeoutSec int `json:"turn_timeout_sec,omitempty"`
	// TokenBudget caps the total tokens (prompt + completion) of a turn; 0 = none.
	TokenBudget int `json:"token_budget,omitempty"`
	// ApprovalTimeoutSec bounds the wait for a human decision on a tool call.
	ApprovalTimeoutSec int `json:"approval_timeout_sec,omitempty"`
	// MaxOutputTokens is passed to the model per call; 0 = provider default.
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
	// TurnsPerMinute caps the turns the agent starts per minute (per
	// tenant); more are rejected with RateLimited. 0 = no cap.
	TurnsPerMinute int `json:"turns_per_minute,omitempty"`
	// ModelPriority orders the agent's model calls among those waiting
	// for a provider's limits (AGENTFLOW_MODEL_LIMITS): 1 first, 5 last;
	// 0 = 3.
	ModelPriority int `json:"model_priority,omitempty"`
	// HistoryEvents is how many events a run of a turn's workflow holds
	// before the turn continues as new, at its next step boundary: one
	// turn, any number of steps, each run's history bounded. 0 =
	// DefaultHistoryEvents; at least MinHistoryEvents.
	HistoryEvents int `json:"history_events,omitempty"`
	// ModelTimeoutSec bounds each attempt of each of the turn's model
	// calls: an attempt that runs longer fails as a timed-out call,
	// which is retried (and falls back, after its last attempt, as the
	// agent's fallback_on says of Unavailable). At most
	// MaxModelTimeoutSec and the turn's timeout, and the operator's
	// limit (the worker's AGENTFLOW_MAX_MODEL_TIMEOUT) lowers it. 0: the
	// turn's timeout, or the operator's limit when lower.
	ModelTimeoutSec int `json:"model_timeout_sec,omitempty"`
}

// MaxModelTimeoutSec bounds Limits.ModelTimeoutSec.
const MaxModelTimeoutSec = 3600

// ModelTimeout is how long one attempt of a model call may take: the
// agent's model timeout, or the turn's when it sets none or a longer
// one.
func (l Limits) ModelTimeout() time.Duration {
	turn := l.WithDefaults().TurnTimeout()
	if d := time.Duration(l.ModelTimeoutSec) * time.Second; d > 0 && d < turn {
		return d
	}
	return turn
}

// CapModelTimeout lowers the model timeout to max, the operator's limit
// (0: none): what a turn pins is the timeout it runs with.
func (l Limits) CapModelTimeout(max time.Duration) Limits {
	if max <= 0 {
		return l
	}
	if sec := int(max / time.Second); sec > 0 && (l.ModelTimeoutSec == 0 || l.ModelTimeoutSec > sec) {
		l.ModelTimeoutSec = sec
	}
	return l
}

// Default limits, used where an agent leaves a field at zero.
const (
	DefaultMaxIterations      = 8
	DefaultTurnTimeoutSec     = 300
	DefaultApprovalTimeoutSec = 3600
	// A run of 5,000 events is about 700 steps of one tool call, and
	// 2 MB: far inside Temporal's 51,200 events and 50 MB, and small
	// enough that replaying a run (a worker taking a turn over, a query
	// of a closed run) stays cheap.
	DefaultHistoryEvents = 5000
	MinHistoryEvents     = 100
)

// WithDefaults returns l with zero fields replaced by the defaults.
func (l Limits) WithDefaults() Limits {
	l.MaxIterations = OrDefault(l.MaxIterations, DefaultMaxIterations)
	l.TurnTimeoutSec = OrDefault(l.TurnTimeoutSec, DefaultTurnTimeoutSec)
	l.ApprovalTimeoutSec = OrDefault(l.ApprovalTimeoutSec, DefaultApprovalTimeoutSec)
	l.HistoryEvents = max(OrDefault(l.HistoryEvents, DefaultHistoryEvents), MinHistoryEvents)
	return l
}

// OrDefault is v when it is set (above zero), else def: the rule of every
// limit that has a default.
func OrDefault[T ~int | ~int32 | ~int64 | ~float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// TurnTimeout is the limit as a duration.
func (l Limits) TurnTimeout() time.Duration { return time.Duration(l.TurnTimeoutSec) * time.Second }

// Approval policies for a tool call. Anything else is a CEL expression over
// the call's arguments and the turn's context.
const (
	ApprovalNever  = "never"
	ApprovalAlways = "always"
)

// Tool is a tool as bound to an agent: what the model sees (name,
// description, JSON Schema of the arguments) and how it runs (kind, config).
type Tool struct {
	Name        string          `json:"name"`
	Kind        string          `json:"kind"` // the builder that implements it, e.g. "calculator"
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema object
	Approval    string          `json:"approval,omitempty"`   // never (default) | always | CEL
	Config      json.RawMessage `json:"config,omitempty"`     // kind-specific settings
	// Execution is ToolLocal for tools whose calls run as local
	// activities; empty means a regular activity.
	Execution string `json:"execution,omitempty"`
	// Source is the catalog entry the tool was built from when that is not
	// the tool's own (one entry may yield several tools); FromToolkit is
	// the toolkit that granted it to the agent (empty: listed by name).
	Source      string `json:"source,omitempty"`
	FromToolkit string `json:"from_toolkit,omitempty"`
	// RateLimit bounds the calls of the catalog entry's tools, for the
	// whole tenant across workers: a call over it waits.
	RateLimit *ToolRateLimit `json:"rate_limit,omitempty"`
	// TimeoutSec bounds one attempt of one of the tool's calls (its
	// ExecuteTool's start-to-close timeout), for every kind alike: 1 to
	// MaxToolTimeoutSec; 0: DefaultToolTimeout. A turn's timeout, and the
	// operator's limit, lower it (CallTimeout).
	TimeoutSec int `json:"timeout_sec,omitempty"`
	// Delivery says whether the far side of the tool's writes
	// deduplicates them: DeliveryIdempotent, DeliveryReconciled (with
	// Reconcile), or DeliveryAtMostOnce ("" means it, the default), by
	// internal/effects's rule.
	Delivery string `json:"delivery,omitempty"`
	// Reconcile, with DeliveryReconciled, is how a call whose write may
	// or may not have taken effect is answered: from a read.
	Reconcile *ToolReconcile `json:"reconcile,omitempty"`
	// Version and SpecHash name the definition (ToolVersion): the store
	// sets them when it stores an agent version, from the tenant's
	// tool_versions; what a catalog document says of them is not read.
	Version  int    `json:"version,omitempty"`
	SpecHash string `json:"spec_hash,omitempty"`
}

// A tool's delivery (Tool.Delivery): how a retried call treats a write
// an earlier attempt may have sent (internal/effects).
const (
	// DeliveryAtMostOnce: each write's intent is recorded before it
	// leaves, and a write an earlier attempt may have sent is not sent
	// again; the call's outcome is then unknown (ToolUnknown).
	DeliveryAtMostOnce = "at_most_once"
	// DeliveryIdempotent: the far side deduplicates, so a retry sends
	// again, with the same key.
	DeliveryIdempotent = "idempotent"
	// DeliveryReconciled: at most once, and a call whose outcome is
	// unknown is answered from a read of the far side (Tool.Reconcile):
	// the read's answer when the write took effect, "not made" when it
	// did not. The write is never sent again.
	DeliveryReconciled = "reconciled"
)

// ToolReconcile is a reconciled tool's read: a call of Tool (the tool
// itself when empty; an OpenAPI entry's read operation, say) with the
// arguments Arguments makes, and Found, which says from its answer
// whether the write took effect. Both are jq programs; Arguments reads
// {"args": the call's arguments, "key": its idempotency key} and makes
// the read's arguments (an object; no output: the call stays unknown),
// Found reads the same with "answer", the read's JSON answer, and is
// true when the write took effect.
type ToolReconcile struct {
	Tool      string `json:"tool,omitempty"`
	Arguments string `json:"arguments"`
	Found     string `json:"found"`
	// Spec is Tool's definition, pinned when the catalog is applied (as
	// a tool guard's is); nil when the tool reads with itself.
	Spec *Tool `json:"spec,omitempty"`
}

// Bounds of a tool call's timeout (Tool.TimeoutSec).
const (
	DefaultToolTimeout = 2 * time.Minute
	MaxToolTimeoutSec  = 3600
)

// CallTimeout is how long one attempt of a call of the tool may run: its
// TimeoutSec, or DefaultToolTimeout, no longer than turn (the turn's
// timeout; 0: no bound).
func (t Tool) CallTimeout(turn time.Duration) time.Duration {
	d := DefaultToolTimeout
	if t.TimeoutSec > 0 {
		d = time.Duration(t.TimeoutSec) * time.Second
	}
	if turn > 0 && turn < d {
		return turn
	}
	return d
}

// CapToolTimeouts lowers each tool's timeout to max, the operator's limit
// (0: none): what a turn pins is the timeout its calls run with.
func (a Agent) CapToolTimeouts(max time.Duration) Agent {
	sec := int(max / time.Second)
	if sec <= 0 {
		return a
	}
	var tools []Tool
	for i, t := range a.Tools {
		if t.CallTimeout(0) <= time.Duration(sec)*time.Second {
			continue
		}
		if tools == nil {
			tools = slices.Clone(a.Tools)
		}
		tools[i].TimeoutSec = sec
	}
	if tools != nil {
		a.Tools = tools
	}
	return a
}

// ToolRateLimit bounds a tool entry's calls: so many a minute, so many at
// once (0: no bound).
type ToolRateLimit struct {
	PerMinute  int `json:"per_minute,omitempty"`
	Concurrent int `json:"concurrent,omitempty"`
}

// Entry is the catalog entry the tool comes from: Source, or its own name.
func (t Tool) Entry() string {
	if t.Source != "" {
		return t.Source
	}
	return t.Name
}

// Toolkit is a named set of a tenant's tools: an agent that lists it is
// granted all of them.
type Toolkit struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Tools       []string `json:"tools"`
}

// Tool executions. A local tool's call runs as a local activity, inside
// the workflow task that scheduled it: no task queue round trip and one
// history event instead of six, for calls that are quick and in-process
// (a calculator). Slow or remote tools stay activities, which survive the
// worker and have their own timeouts.
const (
	ToolLocal    = "local"
	ToolActivity = "activity"
)

// IsLocal reports whether the tool's calls run as local activities.
func (t Tool) IsLocal() bool { return t.Execution == ToolLocal }

// Providers a model may name, the part of "provider:model" before the
// colon. A catalog naming another is refused when it is applied;
// internal/llm has a client for each.
const (
	ProviderAnthropic = "anthropic"
	ProviderOllama    = "ollama"
	ProviderOpenAI    = "openai"
)

// Providers lists the providers a model may name, sorted.
func Providers() []string { return []string{ProviderAnthropic, ProviderOllama, ProviderOpenAI} }

// ParseModel splits "provider:model" into its parts.
func ParseModel(s string) (provider, model string, err error) {
	provider, model, ok := strings.Cut(s, ":")
	if !ok || provider == "" || model == "" {
		return "", "", Errorf(CodeInvalid, "model %q: want \"provider:model\", e.g. \"openai:gpt-4o-mini\"", s)
	}
	return provider, model, nil
}

// Rule routes a tenant's requests that name no agent: the rules are tried
// in priority order (highest first, then by name) and the first whose
// condition holds names the agent. Conditions are CEL expressions over
// the request (see internal/routing).
type Rule struct {
	Name      string `json:"name"`
	Priority  int    `json:"priority"`
	Condition string `json:"condition"` // CEL, must evaluate to a bool
	AgentID   string `json:"agent_id"`
}

// RuleError is a routing rule skipped because its condition failed when
// it was evaluated, e.g. "no such key: tier".
type RuleError struct {
	Rule string `json:"rule"`
	Err  string `json:"error"`
}

// Memory is how a session's transcript reaches the model: the latest
// messages within WindowTokens (estimated, EstimateTokens), after a
// rolling summary of the older ones, which a model call of its own
// (SummaryModel, else the agent's model) writes between turns.
type Memory struct {
	WindowTokens int    `json:"window_tokens,omitempty"`
	SummaryModel string `json:"summary_model,omitempty"`
	// Long-term memory (memory.go): Recall puts the user's memories most
	// relevant to the prompt into the turn's context, at most TopK of
	// them within Budget tokens; Extract has the summary model keep a
	// conversation's durable facts when it goes idle.
	Recall  bool `json:"recall,omitempty"`
	TopK    int  `json:"top_k,omitempty"`
	Budget  int  `json:"budget,omitempty"`
	Extract bool `json:"extract,omitempty"`
}

// DefaultWindowTokens is Memory.WindowTokens when the agent sets none;
// MinWindowTokens the least it may set.
const (
	DefaultWindowTokens = 8000
	MinWindowTokens     = 200
)

// Window is the tokens of transcript the model reads.
func (m Memory) Window() int {
	return OrDefault(m.WindowTokens, DefaultWindowTokens)
}

// ContextPolicy is how a turn's own steps reach its model calls. A turn
// of many steps would send every earlier step whole with every call: a
// request growing with the step count, a turn's input tokens with its
// square, past any model's window within a few hundred steps of real
// tool output. Instead a call reads the turn's prompt, a digest of its
// older steps — one line each for the latest of them, a count of the
// rest — and its recent steps whole: at least KeepRecentSteps model
// steps, fewer than twice as many. Steps move into the digest a block of
// KeepRecentSteps at a time, so the request's prefix stays byte-identical
// from call to call between blocks and a provider's prompt cache serves
// it. The whole request is kept under MaxTokens (estimated), cutting the
// longest messages of the recent steps first.
type ContextPolicy struct {
	MaxTokens       int    `json:"max_tokens,omitempty"`
	KeepRecentSteps int    `json:"keep_recent_steps,omitempty"`
	Compaction      string `json:"compaction,omitempty"` // CompactionDigest (default) or CompactionNone
}

// Compactions (ContextPolicy.Compaction).
const (
	CompactionDigest = "digest" // older steps in a mechanical digest
	CompactionNone   = "none"   // every step whole, as long as MaxTokens allows
)

// Context defaults, and the least a catalog may set.
const (
	DefaultContextTokens   = 100_000
	MinContextTokens       = 2_000
	DefaultKeepRecentSteps = 10
)

// RecallStepTool is the tool a model whose turn's context is compacted
// may call to read an earlier step of the turn whole — a tool's long
// output, most often, which the digest only starts — a piece of
// RecallStepBytes at a time: {"step": N, "offset": bytes}. It is offered
// once a call reads a digest, unless the agent has a tool of that name,
// and needs no approval: it reads what the turn already holds.
const (
	RecallStepTool  = "recall_step"
	RecallStepBytes = 16 << 10
)

// RecallStep is RecallStepTool's definition, as the model sees it.
func RecallStep() Tool {
	return Tool{
		Name: RecallStepTool, Kind: RecallStepTool,
		Description: "Read an earlier step of this turn whole, as the short lines of earlier steps only begin it: " +
			"the step's number, and the byte offset to read from for a long one.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"step":{"type":"integer","minimum":0},` +
			`"offset":{"type":"integer","minimum":0}},"required":["step"],"additionalProperties":false}`),
	}
}

// WithDefaults returns p with zero fields replaced by the defaults.
func (p ContextPolicy) WithDefaults() ContextPolicy {
	if p.MaxTokens <= 0 {
		p.MaxTokens = DefaultContextTokens
	}
	if p.KeepRecentSteps <= 0 {
		p.KeepRecentSteps = DefaultKeepRecentSteps
	}
	if p.Compaction == "" {
		p.Compaction = CompactionDigest
	}
	return p
}

// EstimateTokens is a close estimate of the tokens text takes, for any
// provider's tokenizer: a token is about four bytes of English, and no
// text of a few runes is less than one.
func EstimateTokens(text string) int {
	return (len(text) + 3) / 4
}
