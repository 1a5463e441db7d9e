package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/structured"
)

// agentDoc is one agent of a document: agent.Agent, with the tools and
// toolkits it lists by name.
type agentDoc struct {
	ID          text `yaml:"id"`
	Description text `yaml:"description"`
	Model       text `yaml:"model"`
	// FallbackModels and FallbackOn: agent.Agent's.
	FallbackModels []text `yaml:"fallback_models"`
	FallbackOn     []text `yaml:"fallback_on"`
	// ModelsAllowed: agent.Agent's.
	ModelsAllowed []text       `yaml:"models_allowed"`
	SystemPrompt  text         `yaml:"system_prompt"`
	Examples      []exampleDoc `yaml:"examples"`
	Tools         []text       `yaml:"tools"`
	Temperature   temperature  `yaml:"temperature"`
	// OutputSchema: agent.Agent's, compiled here (internal/structured).
	OutputSchema jsonDoc `yaml:"output_schema"`
	// InputSchema: agent.Agent's, compiled here too.
	InputSchema jsonDoc      `yaml:"input_schema"`
	Limits      *limitsDoc   `yaml:"limits"`
	Thinking    *thinkingDoc `yaml:"thinking"`
	Memory      *memoryDoc   `yaml:"memory"`
	Context     *contextDoc  `yaml:"context"`
	// OnBusy: agent.Agent's.
	OnBusy text `yaml:"on_busy"`
	// Guardrails: agent.Agent's.
	Guardrails jsonDoc `yaml:"guardrails"`
	// Expose: agent.Agent's.
	Expose []text `yaml:"expose"`
	// ModelExecution: agent.Agent's (local or activity).
	ModelExecution text `yaml:"model_execution"`
	// Deliver: agent.Agent's (deliver.go).
	Deliver []deliverDoc `yaml:"deliver"`
	// EmptyAnswer: agent.Agent's.
	EmptyAnswer text `yaml:"empty_answer"`
	// Prepare: agent.Agent's (prepare.go).
	Prepare jsonDoc `yaml:"prepare"`
	// CodeMode: agent.Agent's (codemode.go).
	CodeMode jsonDoc `yaml:"code_mode"`
}

// thinkingDoc is agent.Thinking.
type thinkingDoc struct {
	Effort       text  `yaml:"effort"`
	BudgetTokens count `yaml:"budget_tokens"`
}

// contextDoc is agent.ContextPolicy.
type contextDoc struct {
	MaxTokens       count `yaml:"max_tokens"`
	KeepRecentSteps count `yaml:"keep_recent_steps"`
	Compaction      text  `yaml:"compaction"`
}

// memoryDoc is agent.Memory.
type memoryDoc struct {
	WindowTokens count   `yaml:"window_tokens"`
	SummaryModel text    `yaml:"summary_model"`
	Recall       boolean `yaml:"recall"`
	TopK         count   `yaml:"top_k"`
	Budget       count   `yaml:"budget"`
	Extract      boolean `yaml:"extract"`
}

// exampleDoc is one few-shot exchange: agent.Example.
type exampleDoc struct {
	User      text `yaml:"user"`
	Assistant text `yaml:"assistant"`
}

// limitsDoc is agent.Limits.
type limitsDoc struct {
	MaxIterations      count `yaml:"max_iterations"`
	TurnTimeoutSec     count `yaml:"turn_timeout_sec"`
	TokenBudget        count `yaml:"token_budget"`
	ApprovalTimeoutSec count `yaml:"approval_timeout_sec"`
	MaxOutputTokens    count `yaml:"max_output_tokens"`
	TurnsPerMinute     count `yaml:"turns_per_minute"`
	ModelPriority      count `yaml:"model_priority"`
	HistoryEvents      count `yaml:"history_events"`
	ModelTimeoutSec    count `yaml:"model_timeout_sec"`
}

// agentDef is an agent and the tool names it lists, resolved by finish.
type agentDef struct {
	agent agent.Agent
	refs  []text
	// composites: the agent lists Composites, the tenant's composite tools.
	composites bool
	// guardrails is where the agent's chain is written, for the problems
	// of its tool guards, which finish resolves.
	guardrails *jsonDoc
	// codeMode is where the agent's code_mode is written.
	codeMode *jsonDoc
}

// Composites is the name an agent lists to be granted its tenant's
// composite tools (promoted pipelines), those promoted later too; no tool
// or toolkit may take it.
const Composites = "composites"

// agent adds one agent; finish resolves the tools it lists.
func (l *loader) agent(t *tenant, d *agentDoc) {
	if l.required(d.ID, agent.ValidateID("id", d.ID.s)) {
		l.define(t.agentAt, "agent", d.ID)
	}
	if d.Model.s == "" && !d.Model.bad {
		l.addf(d.Model.pos, `is required, as "provider:model", e.g. "openai:gpt-4o-mini"`)
	} else {
		l.model(d.Model)
	}
	def := agentDef{agent: agent.Agent{
		TenantID:       t.id,
		ID:             d.ID.s,
		Description:    d.Description.s,
		Model:          d.Model.s,
		FallbackModels: l.fallbackModels(d),
		FallbackOn:     l.fallbackOn(d),
		ModelsAllowed:  l.modelsAllowed(d),
		SystemPrompt:   d.SystemPrompt.s,
		Examples:       l.examples(d),
		Temperature:    d.Temperature.v,
	}}
	def.agent.OutputSchema = l.schema(&d.OutputSchema, structured.Compile)
	def.agent.InputSchema = l.schema(&d.InputSchema, structured.CompileInput)
	def.agent.Thinking = l.thinking(d)
	def.agent.Memory = l.memory(d)
	def.agent.Context = l.context(d)
	def.agent.Expose = l.distinct(d.Expose, agent.ExposeProtocols, "%q is not a protocol an agent can be exposed through; want one of %s")
	def.agent.Deliver = l.deliver(t, d)
	def.agent.Guardrails = l.guardrails(d)
	def.agent.Prepare = l.prepare(d)
	def.agent.CodeMode = l.codeMode(d)
	def.codeMode = &d.CodeMode
	def.guardrails = &d.Guardrails
	def.agent.ModelExecution = l.modelExecution(d)
	def.agent.EmptyAnswer = l.emptyAnswer(d)
	def.agent.OnBusy = l.onBusy(d)
	def.agent.Limits = l.limits(d)
	l.toolRefs(d, &def)
	t.agents = append(t.agents, def)
}

// modelExecution checks where an agent's model calls run: local (the
// default) or activity.
func (l *loader) modelExecution(d *agentDoc) string {
	switch d.ModelExecution.s {
	case "", agent.ModelLocal:
		// The default, written into the stored spec: a turn's history
		// holds the choice, so turns recorded when activities were the
		// default (an empty field) replay as they ran.
		return agent.ModelLocal
	case agent.ModelActivity: // kept out of the stored spec, as it always was
	default:
		if !d.ModelExecution.bad {
			l.addf(d.ModelExecution.pos, "%q: want local or activity", d.ModelExecution.s)
		}
	}
	return ""
}

// emptyAnswer checks what an agent answers when its model answers
// nothing: not blank, at most agent.MaxEmptyAnswerBytes; empty for the
// default.
func (l *loader) emptyAnswer(d *agentDoc) string {
	switch e := d.EmptyAnswer; {
	case e.bad:
	case e.s != "" && strings.TrimSpace(e.s) == "":
		l.addf(e.pos, "is blank: leave empty_answer out for the default, %q", agent.DefaultEmptyAnswer)
	case len(e.s) > agent.MaxEmptyAnswerBytes:
		l.addf(e.pos, "is %d bytes; the limit is %d", len(e.s), agent.MaxEmptyAnswerBytes)
	default:
		return e.s
	}
	return ""
}

// onBusy checks what a message to a conversation with the agent does
// when it arrives while a turn runs (agent.ValidOnBusy).
func (l *loader) onBusy(d *agentDoc) string {
	if err := agent.ValidOnBusy(d.OnBusy.s); err != nil && !d.OnBusy.bad {
		l.addf(d.OnBusy.pos, "%s", err.Error())
		return ""
	}
	return d.OnBusy.s
}

// limits checks an agent's limits: each in its range, or 0 for the
// default.
func (l *loader) limits(d *agentDoc) agent.Limits {
	lim := d.Limits
	if lim == nil {
		return agent.Limits{}
	}
	out := agent.Limits{
		MaxIterations:      lim.MaxIterations.n,
		TurnTimeoutSec:     lim.TurnTimeoutSec.n,
		TokenBudget:        lim.TokenBudget.n,
		ApprovalTimeoutSec: lim.ApprovalTimeoutSec.n,
		MaxOutputTokens:    lim.MaxOutputTokens.n,
		TurnsPerMinute:     lim.TurnsPerMinute.n,
		ModelPriority:      lim.ModelPriority.n,
		HistoryEvents:      lim.HistoryEvents.n,
		ModelTimeoutSec:    lim.ModelTimeoutSec.n,
	}
	if p := lim.ModelPriority; p.n > 5 {
		l.addf(p.pos, "%d is out of range: want 1 (first) to 5 (last), or 0 for the default, 3", p.n)
	}
	if m := lim.ModelTimeoutSec; m.n > 0 {
		turn := out.WithDefaults().TurnTimeoutSec
		if m.n > min(turn, agent.MaxModelTimeoutSec) {
			l.addf(m.pos, "%d is out of range: a model call's timeout is at most the turn's (%d s) and %d s, or 0 for the turn's", m.n, turn, agent.MaxModelTimeoutSec)
		}
	}
	if h := lim.HistoryEvents; h.n > 0 && h.n < agent.MinHistoryEvents {
		l.addf(h.pos, "%d is too few: a run holds at least %d events, or 0 for the default, %d", h.n, agent.MinHistoryEvents, agent.DefaultHistoryEvents)
	}
	return out
}

// toolRefs records the tools and toolkits an agent lists, each once, for
// finish to resolve; Composites is a grant, not a name to look up.
func (l *loader) toolRefs(d *agentDoc, def *agentDef) {
	listed := map[string]bool{}
	for _, ref := range d.Tools {
		switch {
		case ref.bad:
		case ref.s == "":
			l.addf(ref.pos, "tool name is empty")
		case listed[ref.s]:
			l.addf(ref.pos, "tool %q is listed twice", ref.s)
		case ref.s == Composites:
			listed[ref.s], def.composites = true, true
		default:
			listed[ref.s] = true
			def.refs = append(def.refs, ref)
		}
	}
}

// thinking checks an agent's thinking: a known effort, a budget Anthropic
// takes, and room for an answer under max_output_tokens.
func (l *loader) thinking(d *agentDoc) *agent.Thinking {
	th := d.Thinking
	if th == nil {
		return nil
	}
	if e := th.Effort; e.s != "" && !slices.Contains(agent.ThinkingEfforts, e.s) {
		l.addf(e.pos, "effort %q: want one of %s", e.s, strings.Join(agent.ThinkingEfforts, ", "))
	}
	if b := th.BudgetTokens; b.n != 0 && b.n < agent.MinThinkingBudget {
		l.addf(b.pos, "%d is too small: a thinking budget is at least %d tokens", b.n, agent.MinThinkingBudget)
	}
	out := &agent.Thinking{Effort: th.Effort.s, BudgetTokens: th.BudgetTokens.n}
	if out.Effort == "" && out.BudgetTokens == 0 {
		l.addf(th.Effort.pos, "is required: one of %s (or give budget_tokens instead)", strings.Join(agent.ThinkingEfforts, ", "))
		return nil
	}
	return out
}

// context checks an agent's context policy: a bound of at least
// agent.MinContextTokens, a known compaction.
func (l *loader) context(d *agentDoc) agent.ContextPolicy {
	c := d.Context
	if c == nil {
		return agent.ContextPolicy{}
	}
	if m := c.MaxTokens; m.n != 0 && m.n < agent.MinContextTokens {
		l.addf(m.pos, "%d is too small: a request may hold at least %d tokens", m.n, agent.MinContextTokens)
	}
	switch c.Compaction.s {
	case "", agent.CompactionDigest, agent.CompactionNone:
	default:
		if !c.Compaction.bad {
			l.addf(c.Compaction.pos, "%q: want %s (the default) or %s", c.Compaction.s, agent.CompactionDigest, agent.CompactionNone)
		}
	}
	return agent.ContextPolicy{MaxTokens: c.MaxTokens.n, KeepRecentSteps: c.KeepRecentSteps.n, Compaction: c.Compaction.s}
}

// memory checks an agent's memory: a window of at least
// agent.MinWindowTokens, a summary model of a known provider.
func (l *loader) memory(d *agentDoc) agent.Memory {
	m := d.Memory
	if m == nil {
		return agent.Memory{}
	}
	if w := m.WindowTokens; w.n != 0 && w.n < agent.MinWindowTokens {
		l.addf(w.pos, "%d is too small: a memory window is at least %d tokens", w.n, agent.MinWindowTokens)
	}
	if m.SummaryModel.s != "" {
		l.model(m.SummaryModel)
	}
	if m.TopK.n > agent.MaxMemoryTopK {
		l.addf(m.TopK.pos, "%d is too large: an agent recalls at most %d memories", m.TopK.n, agent.MaxMemoryTopK)
	}
	if m.Budget.n > agent.MaxMemoryBudget {
		l.addf(m.Budget.pos, "%d is too large: recalled memories take at most %d tokens", m.Budget.n, agent.MaxMemoryBudget)
	}
	return agent.Memory{WindowTokens: m.WindowTokens.n, SummaryModel: m.SummaryModel.s,
		Recall: m.Recall.v, TopK: m.TopK.n, Budget: m.Budget.n, Extract: m.Extract.v}
}

// schema compiles an agent's output or input schema with compile, so
// that one that does not compile is refused when the catalog is applied,
// at the line of the value the problem is about when the compiler says
// which.
func (l *loader) schema(s *jsonDoc, compile func(json.RawMessage) (*structured.Schema, error)) json.RawMessage {
	if s.raw == nil || s.bad {
		return nil
	}
	if _, err := compile(s.raw); err != nil {
		at := s.on(s.node)
		if ce, ok := errors.AsType[*structured.CompileError](err); ok && ce.Pointer != "" {
			at = s.at(ce.Pointer)
		}
		l.addf(at, "%s", err)
		return nil
	}
	return s.raw
}

// guardrails checks an agent's guardrail chain, strictly.
func (l *loader) guardrails(d *agentDoc) []agent.Guardrail {
	g := &d.Guardrails
	if g.raw == nil || g.bad {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(g.raw))
	dec.DisallowUnknownFields()
	var chain []agent.Guardrail
	if err := dec.Decode(&chain); err != nil {
		l.addf(g.on(g.node), "%v (a guardrail is one of %s)", err, agent.GuardrailKinds)
		return nil
	}
	if err := agent.ValidateGuardrails(chain); err != nil {
		l.addf(g.on(g.node), "%s", err.Error())
		return nil
	}
	for i, link := range chain {
		if link.Tool != nil && link.Tool.Spec != nil {
			l.addf(g.at(fmt.Sprintf("/%d/tool/spec", i)), "is set when the catalog is applied: name the tool, and its spec is pinned with the agent")
			return nil
		}
		if link.Output == nil {
			continue
		}
		if _, err := guard.NewOutput(*link.Output); err != nil {
			l.addf(g.on(g.node), "guardrails[%d].output: %v", i, err)
			return nil
		}
	}
	return chain
}

// model checks a "provider:model" value; it reports false when it is
// not one.
func (l *loader) model(m text) bool {
	if m.bad {
		return false
	}
	provider, _, err := agent.ParseModel(m.s)
	switch {
	case err != nil:
		l.addf(m.pos, `%q is not "provider:model", e.g. "openai:gpt-4o-mini"`, m.s)
	case !slices.Contains(l.providers(), provider):
		l.addf(m.pos, "unknown provider %q (known: %s)", provider, strings.Join(l.providers(), ", "))
	default:
		return true
	}
	return false
}

// fallbackModels checks an agent's fallback models: each a model of a
// known provider, neither the agent's own model nor listed twice.
func (l *loader) fallbackModels(d *agentDoc) []string {
	return l.otherModels(d, d.FallbackModels, ": a fallback must be another")
}

// modelsAllowed checks the models a turn of an agent may name instead of
// its own: each a model of a known provider, neither the agent's own
// model (which a turn may always name) nor listed twice.
func (l *loader) modelsAllowed(d *agentDoc) []string {
	return l.otherModels(d, d.ModelsAllowed, ", which a turn may always name: list only the others")
}

// distinct checks a list of names: each one of known (unknown says so of
// a name, then of known), none twice.
func (l *loader) distinct(list []text, known []string, unknown string) []string {
	var out []string
	for _, t := range list {
		switch {
		case t.bad:
		case !slices.Contains(known, t.s):
			l.addf(t.pos, unknown, t.s, strings.Join(known, ", "))
		case slices.Contains(out, t.s):
			l.addf(t.pos, "%q is listed twice", t.s)
		default:
			out = append(out, t.s)
		}
	}
	return out
}

// otherModels checks a list of models beside an agent's own: each of a
// known provider, not the agent's own (own ends the message that says
// so), none twice.
func (l *loader) otherModels(d *agentDoc, list []text, own string) []string {
	var out []string
	for _, m := range list {
		switch {
		case m.bad:
		case m.s == d.Model.s:
			l.addf(m.pos, "%q is the agent's own model%s", m.s, own)
		case slices.Contains(out, m.s):
			l.addf(m.pos, "%q is listed twice", m.s)
		case l.model(m):
			out = append(out, m.s)
		}
	}
	return out
}

// examples checks an agent's few-shot examples: each a user's message
// and the assistant's answer, neither blank; at most agent.MaxExamples.
func (l *loader) examples(d *agentDoc) []agent.Example {
	if len(d.Examples) > agent.MaxExamples {
		l.addf(d.Examples[agent.MaxExamples].User.pos, "the agent has %d examples; the limit is %d", len(d.Examples), agent.MaxExamples)
		return nil
	}
	var out []agent.Example
	for i := range d.Examples {
		ex := &d.Examples[i]
		ok := true
		for _, f := range []*text{&ex.User, &ex.Assistant} {
			if f.bad {
				ok = false
			} else if strings.TrimSpace(f.s) == "" {
				l.addf(f.pos, "is required: an example is what a user asked and what the assistant answered")
				ok = false
			}
		}
		if ok {
			out = append(out, agent.Example{User: ex.User.s, Assistant: ex.Assistant.s})
		}
	}
	return out
}

// fallbackOn checks the error types an agent falls back on, and gives an
// agent with fallback models that names none the defaults.
func (l *loader) fallbackOn(d *agentDoc) []string {
	if len(d.FallbackModels) == 0 {
		if len(d.FallbackOn) > 0 {
			l.addf(d.FallbackOn[0].pos, "the agent has no fallback_models to fall back on")
		}
		return nil
	}
	if len(d.FallbackOn) == 0 {
		return agent.DefaultFallbackOn()
	}
	return l.distinct(d.FallbackOn, agent.FallbackTypes(), "%q is not an error type a fallback model may fix (want one of %s)")
}

// providers are the model providers agents may name: the built-in ones
// and those of the worker's own (tools.Deps.ModelProviders).
func (l *loader) providers() []string {
	return append(agent.Providers(), l.kinds.Deps().ModelProviders...)
}
