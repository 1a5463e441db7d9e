package agent

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/words"
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
	return cmp.Or(a.EmptyAnswer, DefaultEmptyAnswer)
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
// parameter schemas but those of tools the turn calls itself on a team's
// worker, the output and input schemas) and the guardrails the
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
		t.Description = ""
		if !ScheduledKind(t.Kind) {
			// A call the turn makes on a team's worker is checked against
			// its schema in the turn, before it leaves: that schema stays.
			t.Parameters = nil
		}
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
			words.Clip(model, 100), a.ID, a.Model)
	}
	return Errorf(CodePermissionDenied, "model %q: agent %q lets a turn choose only %s (models_allowed) or its own %s",
		words.Clip(model, 100), a.ID, strings.Join(a.ModelsAllowed, ", "), a.Model)
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
