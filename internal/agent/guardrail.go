package agent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Guardrail is one link of an agent's guardrail chain (the catalog's
// guardrails list, in order, versioned with the agent): exactly one kind
// is set.
type Guardrail struct {
	// Output checks the answer as it streams, before clients see it.
	Output *OutputGuard `json:"output,omitempty"`
	// Injection screens what tools return for text that reads as
	// instructions to the model.
	Injection *InjectionGuard `json:"injection,omitempty"`
	// HTTP is a guard of the tenant's own, an HTTP endpoint that reads
	// what goes into a model call, or its answer, and allows it or not.
	HTTP *HTTPGuard `json:"http,omitempty"`
	// ToolLimits bounds the tool calls of a turn.
	ToolLimits *ToolLimits `json:"tool_limits,omitempty"`
	// Moderation asks a provider's moderation model about a model call's
	// input, or its answer.
	Moderation *ModerationGuard `json:"moderation,omitempty"`
	// Tool is a guard of the tenant's own, one of its tools (an MCP
	// server's, or any other kind's) that reads what goes into a model
	// call, or its answer, and allows it or not.
	Tool *ToolGuard `json:"tool,omitempty"`
}

// ModerationGuard asks a provider's moderation endpoint (OpenAI-
// compatible /v1/moderations) about what is new for a model call (stage
// input) and the answer a window at a time (stage output), as an HTTP
// guard does; a flagged text ends the turn GuardrailTripped, naming the
// categories. A moderation call that fails fails closed unless Fail is
// open.
type ModerationGuard struct {
	// Model is "provider:model"; default DefaultModerationModel.
	Model string   `json:"model,omitempty"`
	On    []string `json:"on,omitempty"` // input, output; default both
	Fail  string   `json:"fail,omitempty"`
}

// DefaultModerationModel is a moderation guard's model when it names none.
const DefaultModerationModel = "openai:omni-moderation-latest"

// Checks reports whether the guard reads a stage.
func (g ModerationGuard) Checks(stage string) bool {
	return len(g.On) == 0 || slices.Contains(g.On, stage)
}

// ModelOrDefault is the guard's model.
func (g ModerationGuard) ModelOrDefault() string {
	return cmp.Or(g.Model, DefaultModerationModel)
}

func (g *ModerationGuard) validate() error {
	if g.Model != "" {
		if _, _, err := ParseModel(g.Model); err != nil {
			return fmt.Errorf("model: %s", err.Error())
		}
	}
	return validStages(g.On, g.Fail)
}

// ToolLimits bounds how many tool calls a turn makes, in all and per
// tool (by the name the model calls it). A call over a limit is not run:
// the model reads why, as the call's result.
type ToolLimits struct {
	PerTurn int            `json:"per_turn,omitempty"`
	PerTool map[string]int `json:"per_tool,omitempty"`
}

func (l *ToolLimits) validate() error {
	if l.PerTurn < 0 || l.PerTurn > 1000 {
		return fmt.Errorf("per_turn is %d; want 1 to 1000, or none", l.PerTurn)
	}
	if l.PerTurn == 0 && len(l.PerTool) == 0 {
		return fmt.Errorf("give per_turn or per_tool")
	}
	for name, n := range l.PerTool {
		if n < 1 || n > 1000 {
			return fmt.Errorf("per_tool[%s] is %d; want 1 to 1000", name, n)
		}
	}
	return nil
}

// ToolLimits returns the agent's tool limits, if its chain has them.
func (a Agent) ToolLimits() *ToolLimits {
	return firstGuard(a.Guardrails, func(g Guardrail) *ToolLimits { return g.ToolLimits })
}

// HTTPGuard calls a tenant's endpoint (through the tenant's egress
// policy) with POST {"stage", "text", "tenant_id", "agent_id",
// "job_id"}; it answers {"allow": true} or {"allow": false, "reason"}.
// Stage input: what is new for a model call (the prompt, tool results),
// before it is sent; stage output: the answer so far, a window at a time
// as it streams (as an output guard's rules), before clients see it. A
// refusal ends the turn GuardrailTripped; an endpoint that fails or does
// not answer within TimeoutMS fails closed (the same) unless Fail is
// open (the text goes on, and the failure is logged).
type HTTPGuard struct {
	URL string `json:"url"`
	GuardCall
}

// ToolGuard asks one of the tenant's tools, at the stages an HTTP guard
// reads and with the same meaning: the tool is called, through the tool
// runtime as any call of it, with {"stage", "text", "agent_id",
// "job_id"}, and its text output is the verdict, {"allow": true} or
// {"allow": false, "reason"}. A refusal ends the turn GuardrailTripped;
// a call that fails, does not end within TimeoutMS, or answers what is
// not a verdict fails closed unless Fail is open. The tool need not be
// granted to the agent: the model sees it only if it is.
type ToolGuard struct {
	// Name is the tool's, as the tenant's catalog names it once applied:
	// an MCP server's tool t of entry e is e_t.
	Name string `json:"name"`
	GuardCall
	// Spec is the tool's full spec, pinned with the agent's version when
	// the catalog is applied, as the agent's tools are; never written in
	// a catalog. Nil when the tool's entry could not be reached then
	// (an unreachable MCP server applied with AllowUnreachable): the
	// guard fails until the catalog is applied again.
	Spec *Tool `json:"spec,omitempty"`
}

func (g *ToolGuard) validate() error {
	if strings.TrimSpace(g.Name) == "" {
		return fmt.Errorf("name is required: one of the tenant's tools")
	}
	return g.GuardCall.validate()
}

// GuardCall is when a custom guard (HTTP or tool) is asked, how long it
// has to answer, and what its failure means.
type GuardCall struct {
	On        []string `json:"on,omitempty"` // input, output; default both
	TimeoutMS int      `json:"timeout_ms,omitempty"`
	Fail      string   `json:"fail,omitempty"` // closed (default) | open
}

// Custom guard stages and failure modes.
const (
	GuardInput      = "input"
	GuardOutput     = "output"
	GuardFailClosed = "closed"
	GuardFailOpen   = "open"
	// DefaultGuardTimeoutMS bounds a guard's answer when it sets no timeout.
	DefaultGuardTimeoutMS = 2000
)

// Checks reports whether the guard reads a stage.
func (g GuardCall) Checks(stage string) bool {
	return len(g.On) == 0 || slices.Contains(g.On, stage)
}

// Stages are the stages the guard reads.
func (g GuardCall) Stages() []string {
	if len(g.On) == 0 {
		return []string{GuardInput, GuardOutput}
	}
	return g.On
}

// Timeout is the guard's timeout.
func (g GuardCall) Timeout() time.Duration {
	if g.TimeoutMS == 0 {
		return DefaultGuardTimeoutMS * time.Millisecond
	}
	return time.Duration(g.TimeoutMS) * time.Millisecond
}

// FailsOpen reports whether a failure of the guard lets the text go on.
func (g GuardCall) FailsOpen() bool { return g.Fail == GuardFailOpen }

func (g *GuardCall) validate() error {
	if g.TimeoutMS < 0 || g.TimeoutMS > 30000 {
		return fmt.Errorf("timeout_ms is %d; want 1 to 30000", g.TimeoutMS)
	}
	return validStages(g.On, g.Fail)
}

// validStages checks the stages a guard reads and what its failure means,
// as every guard that calls out (HTTP, tool, moderation) takes them.
func validStages(on []string, fail string) error {
	for i, s := range on {
		if s != GuardInput && s != GuardOutput {
			return fmt.Errorf("on[%d] %q: want input or output", i, s)
		}
	}
	switch fail {
	case "", GuardFailClosed, GuardFailOpen:
	default:
		return fmt.Errorf("fail %q: want closed or open", fail)
	}
	return nil
}

func (g *HTTPGuard) validate() error {
	u, err := url.Parse(g.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q: want an http(s) URL", g.URL)
	}
	return g.GuardCall.validate()
}

// InjectionGuard screens tool outputs (fetched pages, API answers, files)
// for prompt injection. Every tool output of the agent is then given to
// the model delimited as data; one that reads as instructions is, by
// Action, flagged (a note in the block says so), stripped of the lines
// that do, or blocked (withheld, and the model told why).
type InjectionGuard struct {
	Action string `json:"action,omitempty"` // flag (default) | strip | block
	// Patterns are more RE2 expressions that read as instructions, beside
	// the built-in ones.
	Patterns []string `json:"patterns,omitempty"`
}

// Injection actions.
const (
	InjectionFlag  = "flag"
	InjectionStrip = "strip"
	InjectionBlock = "block"
)

// OutputGuard holds the streamed answer back a window at a time — a
// sentence, or WindowTokens tokens — and releases a window to clients
// only once the answer so far breaks none of its rules. An answer that
// breaks one is cut there: the held text is never sent, the refusal is
// sent in its place, and the turn ends GuardrailTripped.
type OutputGuard struct {
	// WindowTokens, when set, releases the answer every so many tokens
	// (estimated at four bytes each) instead of at each sentence's end.
	WindowTokens int `json:"window_tokens,omitempty"`
	// Deny are words and phrases the answer must not contain (case is
	// ignored).
	Deny []string `json:"deny,omitempty"`
	// Regex are RE2 expressions the answer must not match.
	Regex []string `json:"regex,omitempty"`
	// Refusal is what clients get instead of what was held; default
	// DefaultRefusal.
	Refusal string `json:"refusal,omitempty"`
	// Schema, when set, is a JSON Schema the whole answer must be valid
	// against: the answer is then held whole, and checked at its end.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Judge, when set, is a model that reads the answer so far, a window
	// at a time, by a policy, and allows it or not.
	Judge *GuardJudge `json:"judge,omitempty"`
}

// GuardJudge is an output guard's judge model.
type GuardJudge struct {
	// Model is "provider:model"; default: the agent's.
	Model  string `json:"model,omitempty"`
	Policy string `json:"policy"`
}

// DefaultRefusal is an output guard's refusal when the agent gives none.
const DefaultRefusal = "I can't help with that."

// Output guard bounds.
const (
	maxGuardRules       = 100
	maxGuardWindow      = 2000
	maxGuardRefusal     = 1000
	maxGuardrails       = 20
	maxGuardPhraseBytes = 500
)

// GuardrailKinds names the links of a guardrail chain, for messages.
const GuardrailKinds = "output, injection, http, tool, moderation or tool_limits"

// ValidateGuardrails checks an agent's chain and names what is wrong.
func ValidateGuardrails(chain []Guardrail) error {
	if len(chain) > maxGuardrails {
		return Errorf(CodeInvalid, "guardrails: %d; the limit is %d", len(chain), maxGuardrails)
	}
	outputs := 0
	injections := 0
	for i, g := range chain {
		set := 0
		for _, on := range []bool{g.Output != nil, g.Injection != nil, g.HTTP != nil, g.ToolLimits != nil, g.Moderation != nil, g.Tool != nil} {
			if on {
				set++
			}
		}
		switch {
		case set != 1:
			return Errorf(CodeInvalid, "guardrails[%d]: give one guardrail: %s", i, GuardrailKinds)
		case g.Tool != nil:
			if err := g.Tool.validate(); err != nil {
				return Errorf(CodeInvalid, "guardrails[%d].tool: %s", i, err.Error())
			}
			continue
		case g.Moderation != nil:
			if err := g.Moderation.validate(); err != nil {
				return Errorf(CodeInvalid, "guardrails[%d].moderation: %s", i, err.Error())
			}
			continue
		case g.ToolLimits != nil:
			if err := g.ToolLimits.validate(); err != nil {
				return Errorf(CodeInvalid, "guardrails[%d].tool_limits: %s", i, err.Error())
			}
			continue
		case g.HTTP != nil:
			if err := g.HTTP.validate(); err != nil {
				return Errorf(CodeInvalid, "guardrails[%d].http: %s", i, err.Error())
			}
			continue
		case g.Injection != nil:
			injections++
			if injections > 1 {
				return Errorf(CodeInvalid, "guardrails[%d]: an agent has one injection guard", i)
			}
			if err := g.Injection.validate(); err != nil {
				return Errorf(CodeInvalid, "guardrails[%d].injection: %s", i, err.Error())
			}
			continue
		}
		outputs++
		if outputs > 1 {
			return Errorf(CodeInvalid, "guardrails[%d]: an agent has one output guard; put its rules together", i)
		}
		if err := g.Output.validate(); err != nil {
			return Errorf(CodeInvalid, "guardrails[%d].output: %s", i, err.Error())
		}
	}
	return nil
}

func (o *OutputGuard) validate() error {
	switch {
	case o.WindowTokens < 0 || o.WindowTokens > maxGuardWindow:
		return fmt.Errorf("window_tokens is %d; want 1 to %d, or none for a sentence", o.WindowTokens, maxGuardWindow)
	case len(o.Deny)+len(o.Regex) == 0 && len(o.Schema) == 0 && o.Judge == nil:
		return fmt.Errorf("give deny, regex, schema or judge: a guard with no rule holds the answer back for nothing")
	case len(o.Deny)+len(o.Regex) > maxGuardRules:
		return fmt.Errorf("%d rules; the limit is %d", len(o.Deny)+len(o.Regex), maxGuardRules)
	case len(o.Refusal) > maxGuardRefusal:
		return fmt.Errorf("refusal is longer than %d bytes", maxGuardRefusal)
	}
	if len(o.Schema) > 0 && !isObject(o.Schema) {
		return fmt.Errorf("schema: want a JSON Schema object")
	}
	if j := o.Judge; j != nil {
		if strings.TrimSpace(j.Policy) == "" || len(j.Policy) > maxRubricBytes {
			return fmt.Errorf("judge.policy: want 1 to %d bytes", maxRubricBytes)
		}
		if j.Model != "" {
			if _, _, err := ParseModel(j.Model); err != nil {
				return fmt.Errorf("judge.model: %s", err.Error())
			}
		}
	}
	for i, d := range o.Deny {
		if strings.TrimSpace(d) == "" || len(d) > maxGuardPhraseBytes {
			return fmt.Errorf("deny[%d]: want a word or phrase of 1 to %d bytes", i, maxGuardPhraseBytes)
		}
	}
	return checkPatterns("regex", o.Regex, "answer")
}

// checkPatterns refuses a pattern of field that does not compile, or that
// matches the empty text and so every text (every what).
func checkPatterns(field string, patterns []string, what string) error {
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return fmt.Errorf("%s[%d]: %v", field, i, err)
		}
		if re.MatchString("") {
			return fmt.Errorf("%s[%d] %q matches the empty text, so every %s", field, i, p, what)
		}
	}
	return nil
}

func (g *InjectionGuard) validate() error {
	switch g.Action {
	case "", InjectionFlag, InjectionStrip, InjectionBlock:
	default:
		return fmt.Errorf("action %q: want %s, %s or %s", g.Action, InjectionFlag, InjectionStrip, InjectionBlock)
	}
	if len(g.Patterns) > maxGuardRules {
		return fmt.Errorf("%d patterns; the limit is %d", len(g.Patterns), maxGuardRules)
	}
	return checkPatterns("patterns", g.Patterns, "output")
}

// InjectionGuard returns the agent's injection guard, if its chain has one.
func (a Agent) InjectionGuard() *InjectionGuard {
	return firstGuard(a.Guardrails, func(g Guardrail) *InjectionGuard { return g.Injection })
}

// OutputGuard returns the agent's output guard, if its chain has one.
func (a Agent) OutputGuard() *OutputGuard {
	return firstGuard(a.Guardrails, func(g Guardrail) *OutputGuard { return g.Output })
}

// firstGuard returns the first guard of a chain that kind gives (nil: the
// guardrail is of another kind).
func firstGuard[T any](chain []Guardrail, kind func(Guardrail) *T) *T {
	for _, g := range chain {
		if p := kind(g); p != nil {
			return p
		}
	}
	return nil
}
