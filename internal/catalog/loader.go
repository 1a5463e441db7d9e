package catalog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	policy "github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/process"
	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/tools"
)

// A document decodes into these structs: their yaml tags are the format,
// and their field types (decode.go) read and type-check the values, each
// with its file, line and field. The loader below then checks what the
// values mean and what spans documents.

type document struct {
	Tenant       text         `yaml:"tenant"`
	DefaultAgent text         `yaml:"default_agent"`
	Egress       []text       `yaml:"egress"` // not nil when the key is there, even empty
	PromoteAfter *whole       `yaml:"promote_after"`
	Tools        []toolDoc    `yaml:"tools"`
	Toolkits     []toolkitDoc `yaml:"toolkits"`
	Agents       []agentDoc   `yaml:"agents"`
	Rules        []ruleDoc    `yaml:"rules"` // not nil when the key is there, even empty
	Processes    []processDoc `yaml:"processes"`
	Prices       []priceDoc   `yaml:"prices"` // not nil when the key is there, even empty
	Budgets      *budgetsDoc  `yaml:"budgets"`
	// Retention is the tenant's TTLs (retention.go).
	Retention *retentionDoc `yaml:"retention"`
	// PII is the tenant's PII redaction (internal/guard.Config).
	PII jsonDoc `yaml:"pii"`
	// ModelLimits are the tenant's own limits on its model calls
	// (modellimits.go).
	ModelLimits *modelLimitsDoc `yaml:"model_limits"`
	at          pos             // where the document starts
}

// processDoc is a process definition (internal/process): its first
// version, or a new one when it changes (store.ApplyCatalog).
type processDoc struct {
	Tag         text    `yaml:"tag"`
	Description text    `yaml:"description"`
	Schema      jsonDoc `yaml:"schema"`
	Definition  jsonDoc `yaml:"definition"`
}

type toolkitDoc struct {
	Name        text   `yaml:"name"`
	Description text   `yaml:"description"`
	Tools       []text `yaml:"tools"`
}

type toolDoc struct {
	flawed               // a value was malformed: its kind is not asked to check it
	Name        text     `yaml:"name"`
	Kind        text     `yaml:"kind"`
	Description text     `yaml:"description"`
	Parameters  schema   `yaml:"parameters"`
	Approval    approval `yaml:"approval"`
	Config      object   `yaml:"config"`
	Execution   text     `yaml:"execution"`
	// Delivery and Reconcile: agent.Tool's.
	Delivery  text          `yaml:"delivery"`
	Reconcile *reconcileDoc `yaml:"reconcile"`
	// RateLimit: agent.Tool's.
	RateLimit *rateLimitDoc `yaml:"rate_limit"`
	// TimeoutSec: agent.Tool's.
	TimeoutSec count `yaml:"timeout_sec"`
}

// rateLimitDoc is agent.ToolRateLimit.
type rateLimitDoc struct {
	PerMinute  count `yaml:"per_minute"`
	Concurrent count `yaml:"concurrent"`
}

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

type ruleDoc struct {
	Name     text  `yaml:"name"`
	Priority whole `yaml:"priority"`
	When     text  `yaml:"when"`
	Agent    text  `yaml:"agent"`
}

// toolNamePattern is what model providers accept as a function name.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// defaultParameters is the schema of a tool whose kind declares none.
const defaultParameters = `{"type":"object","properties":{}}`

// Limits of a catalog: a mistaken document gets a clear error, not a
// catalog too large to list or to send to a model.
const (
	MaxFileBytes = 1 << 20 // one catalog file
	MaxAgents    = 1000    // per tenant
	MaxTools     = 1000    // per tenant
	MaxRules     = 1000    // per tenant
	MaxProcesses = 1000    // per tenant
	// MaxAgentTools is how many tools one agent may have: what model
	// providers accept in one request.
	MaxAgentTools = 128
)

// loader gathers the documents of one load and every problem found.
type loader struct {
	kinds    Kinds
	schemas  map[string]*jsonschema.Schema // kinds' config schemas, compiled
	checker  *policy.Checker               // approval policies, made on first use
	files    []string                      // in load order, to sort problems by
	problems []Problem
	tenants  []*tenant
	byID     map[string]*tenant
}

// tenant is one tenant as gathered from all documents so far, with where
// each of its names is defined.
type tenant struct {
	id             string
	defaultAgent   text
	tools          []agent.Tool
	agents         []agentDef
	rules          []ruleDoc
	replaceRules   bool // a document has a rules key: they replace the stored ones
	toolkits       []toolkitDoc
	processes      []agent.Process
	egress         []string
	egressSet      bool // a document has an egress key: it replaces the stored one
	promoteAfter   *whole
	prices         []agent.Price
	pricesSet      bool             // a document has a prices key: it replaces the stored table
	budgets        *agent.Budgets   // a document has a budgets key
	retention      *agent.Retention // a document has a retention key
	modelLimits    map[string]agent.ModelLimits
	modelLimitsSet bool // a document has a model_limits key: it replaces the stored ones
	pii            json.RawMessage
	piiSet         bool // a document has a pii key: it replaces the stored one
	toolAt         map[string]pos
	agentAt        map[string]pos
	ruleAt         map[string]pos
	toolkitAt      map[string]pos
	processAt      map[string]pos
	// reads are the tools that reconcile with another tool (pinReads).
	reads []readRef
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

// MaxPromoteAfter bounds promote_after.
const MaxPromoteAfter = 1000

type noKinds struct{}

func (noKinds) Kind(string) (tools.Kind, bool) { return tools.Kind{}, false }
func (noKinds) Deps() tools.Deps               { return tools.Deps{}.WithDefaults() }

func newLoader(kinds Kinds) *loader {
	if kinds == nil {
		kinds = noKinds{}
	}
	return &loader{kinds: kinds, byID: map[string]*tenant{}}
}

// yamlLine finds the line in yaml.v3's syntax errors ("yaml: line 3: …").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// file reads every document of one file.
func (l *loader) file(name string, data []byte) {
	l.files = append(l.files, name)
	if len(data) > MaxFileBytes {
		l.problems = append(l.problems, Problem{File: name, Message: fmt.Sprintf("is %d bytes; the limit is %d", len(data), MaxFileBytes)})
		return
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p := Problem{File: name, Message: err.Error()}
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
				p.Line, _ = strconv.Atoi(m[1])
				p.Message = m[2]
			}
			l.problems = append(l.problems, p)
			return
		}
		root := &n
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if isNull(root) {
			continue // an empty document, e.g. after a trailing ---
		}
		docs++
		doc := document{at: pos{file: name, line: root.Line}}
		if l.decode(root, reflect.ValueOf(&doc).Elem(), pos{file: name, line: root.Line}) {
			l.document(&doc)
		}
	}
	if docs == 0 {
		l.problems = append(l.problems, Problem{File: name, Message: "holds no catalog document"})
	}
}

// document adds one tenant's document.
func (l *loader) document(d *document) {
	t := l.tenant(d.Tenant)
	if def := d.DefaultAgent; def.s != "" {
		if t.defaultAgent.s == "" {
			t.defaultAgent = def
		} else if def.s != t.defaultAgent.s {
			l.addf(def.pos, "%q conflicts with default_agent %q set at %s", def.s, t.defaultAgent.s, t.defaultAgent.pos)
		}
	}
	if d.Egress != nil {
		l.egress(t, d.Egress)
	}
	if d.Prices != nil {
		l.prices(t, d.Prices, pos{file: d.at.file, line: d.at.line, field: "prices"})
	}
	if d.Budgets != nil {
		l.budgets(t, d.Budgets, pos{file: d.at.file, line: d.at.line, field: "budgets"})
	}
	if d.Retention != nil {
		l.retention(t, d.Retention, pos{file: d.at.file, line: d.at.line, field: "retention"})
	}
	if d.ModelLimits != nil {
		l.modelLimits(t, d.ModelLimits, pos{file: d.at.file, line: d.at.line, field: "model_limits"})
	}
	if d.PII.node != nil {
		l.pii(t, &d.PII)
	}
	if p := d.PromoteAfter; p != nil {
		switch {
		case p.n < 0 || p.n > MaxPromoteAfter:
			l.addf(p.pos, "%d: want 0 (never promote) to %d runs", p.n, MaxPromoteAfter)
		case t.promoteAfter != nil && t.promoteAfter.n != p.n:
			l.addf(p.pos, "%d conflicts with promote_after %d set at %s", p.n, t.promoteAfter.n, t.promoteAfter.pos)
		default:
			t.promoteAfter = p
		}
	}
	for i := range d.Tools {
		l.tool(t, &d.Tools[i])
	}
	for i := range d.Toolkits {
		l.toolkit(t, &d.Toolkits[i])
	}
	for i := range d.Agents {
		l.agent(t, &d.Agents[i])
	}
	if d.Rules != nil {
		t.replaceRules = true
		for i := range d.Rules {
			l.rule(t, &d.Rules[i])
		}
	}
	for i := range d.Processes {
		l.process(t, &d.Processes[i])
	}
}

// tenant returns the tenant a document names. A document without a usable
// tenant is still checked, against a tenant of its own that is not
// returned.
func (l *loader) tenant(id text) *tenant {
	t := &tenant{toolAt: map[string]pos{}, agentAt: map[string]pos{}, ruleAt: map[string]pos{}, toolkitAt: map[string]pos{},
		processAt: map[string]pos{}}
	switch {
	case !l.required(id, agent.ValidateID("tenant", id.s)):
	case l.byID[id.s] != nil:
		t = l.byID[id.s]
	default:
		t.id = id.s
		l.byID[id.s] = t
		l.tenants = append(l.tenants, t)
	}
	return t
}

// tool adds one tool, complete: what the document leaves out comes from
// its kind.
func (l *loader) tool(t *tenant, d *toolDoc) {
	before := len(l.problems)
	if l.required(d.Name, checkName(d.Name.s)) {
		l.define(t.toolAt, "tool", d.Name)
	}
	var kind tools.Kind
	haveKind := false
	if l.required(d.Kind, nil) {
		if kind, haveKind = l.kinds.Kind(d.Kind.s); !haveKind {
			l.addf(d.Kind.pos, "unknown tool kind %q", d.Kind.s)
		}
	}
	spec := agent.Tool{
		Name:        d.Name.s,
		Kind:        d.Kind.s,
		Description: cmp.Or(d.Description.s, kind.Description),
		Parameters:  d.Parameters.raw,
		Approval:    cmp.Or(d.Approval.s, kind.Approval, agent.ApprovalNever),
		Config:      d.Config.raw,
	}
	if len(spec.Parameters) == 0 {
		spec.Parameters = kind.Parameters
	}
	if len(spec.Parameters) == 0 {
		spec.Parameters = json.RawMessage(defaultParameters)
	}
	if haveKind && kind.Local {
		spec.Execution = agent.ToolLocal
	}
	switch d.Delivery.s {
	case "", agent.DeliveryAtMostOnce, agent.DeliveryIdempotent, agent.DeliveryReconciled:
		spec.Delivery = d.Delivery.s
	default:
		l.addf(d.Delivery.pos, "%q: want %s (the far side deduplicates: a retry sends again), %s (a write whose outcome is unknown is answered from a read: reconcile) or %s (the default: a write an earlier attempt may have sent is not sent again)",
			d.Delivery.s, agent.DeliveryIdempotent, agent.DeliveryReconciled, agent.DeliveryAtMostOnce)
	}
	l.reconcile(t, d, &spec)
	if r := d.RateLimit; r != nil {
		switch {
		case r.PerMinute.n == 0 && r.Concurrent.n == 0:
			l.addf(d.Name.pos, "rate_limit: give per_minute, concurrent or both")
		case r.PerMinute.n > 1_000_000 || r.Concurrent.n > 10_000:
			l.addf(d.Name.pos, "rate_limit: per_minute is at most 1000000 and concurrent at most 10000")
		default:
			spec.RateLimit = &agent.ToolRateLimit{PerMinute: r.PerMinute.n, Concurrent: r.Concurrent.n}
		}
	}
	if n := d.TimeoutSec.n; n > agent.MaxToolTimeoutSec {
		l.addf(d.TimeoutSec.pos, "%d: want 1 to %d (seconds)", n, agent.MaxToolTimeoutSec)
	} else {
		spec.TimeoutSec = n
	}
	if d.Execution.set {
		switch d.Execution.s {
		case agent.ToolLocal:
			spec.Execution = agent.ToolLocal
		case agent.ToolActivity:
			spec.Execution = "" // the default, kept out of the stored spec
		default:
			l.addf(d.Execution.pos, "%q: want local or activity", d.Execution.s)
		}
	}
	// The kind checks its config (its messages say most), then the kind's
	// schema does; only worth asking when the rest of the spec is sound.
	if haveKind && !d.bad && len(l.problems) == before {
		if _, err := kind.Build(spec, l.kinds.Deps()); err != nil {
			l.addf(d.Config.pos, "%s", err)
		} else if err := l.configSchema(kind, spec.Config); err != nil {
			l.addf(d.Config.pos, "%s", err)
		} else if kind.Admit != nil && kind.Admit(t.id, spec) != nil {
			l.addf(d.Config.pos, "%s", kind.Admit(t.id, spec))
		} else if g := l.kinds.Deps().SecretGrants; g != nil {
			// The secrets a tenant may name are the operator's grant.
			for _, ref := range tools.SecretRefs(spec.Config) {
				if err := g.Allows(t.id, ref); err != nil {
					l.addf(d.Config.pos, "%s", err)
				}
			}
		}
	}
	t.tools = append(t.tools, spec)
}

// egress sets the tenant's egress allowlist: host names (a leading "*."
// for subdomains, an optional :port), IP literals and CIDR ranges, each
// within what the operator's policy allows (tools.Deps.Egress).
func (l *loader) egress(t *tenant, entries []text) {
	if t.egressSet {
		l.addf(entries[0].pos, "egress is already set for tenant %q: give it in one document", t.id)
		return
	}
	t.egressSet, t.egress = true, []string{}
	for _, e := range entries {
		if l.required(e, l.kinds.Deps().Egress.CheckEntry(e.s)) {
			t.egress = append(t.egress, e.s)
		}
	}
}

// toolkit adds one toolkit; finish looks up its tools.
func (l *loader) toolkit(t *tenant, d *toolkitDoc) {
	if l.required(d.Name, checkName(d.Name.s)) {
		if at, clash := t.toolAt[d.Name.s]; clash {
			l.addf(d.Name.pos, "toolkit %q has the name of the tool defined at %s", d.Name.s, at)
		} else {
			l.define(t.toolkitAt, "toolkit", d.Name)
		}
	}
	if len(d.Tools) == 0 {
		l.addf(d.Name.pos, "toolkit %q grants no tools: list them under tools", d.Name.s)
	}
	t.toolkits = append(t.toolkits, *d)
}

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
	def.agent.Expose = l.expose(d)
	def.agent.Deliver = l.deliver(t, d)
	def.agent.Guardrails = l.guardrails(d)
	def.agent.Prepare = l.prepare(d)
	def.agent.CodeMode = l.codeMode(d)
	def.codeMode = &d.CodeMode
	def.guardrails = &d.Guardrails
	switch d.ModelExecution.s {
	case "", agent.ModelLocal:
		// The default, written into the stored spec: a turn's history
		// holds the choice, so turns recorded when activities were the
		// default (an empty field) replay as they ran.
		def.agent.ModelExecution = agent.ModelLocal
	case agent.ModelActivity: // kept out of the stored spec, as it always was
	default:
		if !d.ModelExecution.bad {
			l.addf(d.ModelExecution.pos, "%q: want local or activity", d.ModelExecution.s)
		}
	}
	switch e := d.EmptyAnswer; {
	case e.bad:
	case e.s != "" && strings.TrimSpace(e.s) == "":
		l.addf(e.pos, "is blank: leave empty_answer out for the default, %q", agent.DefaultEmptyAnswer)
	case len(e.s) > agent.MaxEmptyAnswerBytes:
		l.addf(e.pos, "is %d bytes; the limit is %d", len(e.s), agent.MaxEmptyAnswerBytes)
	default:
		def.agent.EmptyAnswer = e.s
	}
	if err := agent.ValidOnBusy(d.OnBusy.s); err != nil && !d.OnBusy.bad {
		l.addf(d.OnBusy.pos, "%s", err.Error())
	} else {
		def.agent.OnBusy = d.OnBusy.s
	}
	if lim := d.Limits; lim != nil {
		def.agent.Limits = agent.Limits{
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
			turn := def.agent.Limits.WithDefaults().TurnTimeoutSec
			if m.n > min(turn, agent.MaxModelTimeoutSec) {
				l.addf(m.pos, "%d is out of range: a model call's timeout is at most the turn's (%d s) and %d s, or 0 for the turn's", m.n, turn, agent.MaxModelTimeoutSec)
			}
		}
		if h := lim.HistoryEvents; h.n > 0 && h.n < agent.MinHistoryEvents {
			l.addf(h.pos, "%d is too few: a run holds at least %d events, or 0 for the default, %d", h.n, agent.MinHistoryEvents, agent.DefaultHistoryEvents)
		}
	}
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
	t.agents = append(t.agents, def)
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
		var ce *structured.CompileError
		if errors.As(err, &ce) && ce.Pointer != "" {
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

// pii checks the tenant's PII redaction: a guard.Config, strictly.
func (l *loader) pii(t *tenant, d *jsonDoc) {
	if t.piiSet {
		l.addf(d.pos, "pii is already set for tenant %q: give it in one document", t.id)
		return
	}
	t.piiSet = true
	if d.bad || d.raw == nil {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(d.raw))
	dec.DisallowUnknownFields()
	var c guard.Config
	if err := dec.Decode(&c); err != nil {
		l.addf(d.on(d.node), "%v (the settings are kinds, custom, mode and reveal)", err)
		return
	}
	if err := c.Validate(); err != nil {
		l.addf(d.on(d.node), "%v", err)
		return
	}
	t.pii = d.raw
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
	case !slices.Contains(agent.Providers(), provider):
		l.addf(m.pos, "unknown provider %q (known: %s)", provider, strings.Join(agent.Providers(), ", "))
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

// expose checks the protocols an agent is exposed through: each a known
// one (agent.ExposeProtocols), none twice.
func (l *loader) expose(d *agentDoc) []string {
	var out []string
	for _, p := range d.Expose {
		switch {
		case p.bad:
		case !slices.Contains(agent.ExposeProtocols, p.s):
			l.addf(p.pos, "%q is not a protocol an agent can be exposed through; want one of %s", p.s, strings.Join(agent.ExposeProtocols, ", "))
		case slices.Contains(out, p.s):
			l.addf(p.pos, "%q is listed twice", p.s)
		default:
			out = append(out, p.s)
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
	var out []string
	for _, typ := range d.FallbackOn {
		switch {
		case typ.bad:
		case !slices.Contains(agent.FallbackTypes(), typ.s):
			l.addf(typ.pos, "%q is not an error type a fallback model may fix (want one of %s)", typ.s, strings.Join(agent.FallbackTypes(), ", "))
		case slices.Contains(out, typ.s):
			l.addf(typ.pos, "%q is listed twice", typ.s)
		default:
			out = append(out, typ.s)
		}
	}
	return out
}

// rule adds one routing rule; finish looks up its agent.
func (l *loader) rule(t *tenant, d *ruleDoc) {
	if l.required(d.Name, agent.ValidateID("name", d.Name.s)) {
		l.define(t.ruleAt, "rule", d.Name)
	}
	switch w := d.When; {
	case w.bad:
	case strings.TrimSpace(w.s) == "":
		l.addf(w.pos, `is required: a CEL condition such as ui_page == "billing"`)
	default:
		if err := routing.CompileCondition(w.s); err != nil {
			l.addf(w.pos, "%s", err)
		}
	}
	l.required(d.Agent, nil)
	t.rules = append(t.rules, *d)
}

// process adds one process definition, checked against the built-in
// rules and its schema; each problem is reported at the line of the value
// it is about.
func (l *loader) process(t *tenant, d *processDoc) {
	if l.required(d.Tag, agent.ValidateID("tag", d.Tag.s)) {
		l.define(t.processAt, "process", d.Tag)
	}
	sch := &process.Schema{}
	if d.Schema.raw != nil {
		var err error
		if sch, err = process.Compile(d.Schema.raw); err != nil {
			l.addf(d.Schema.on(d.Schema.node), "%s", err)
			sch = nil
		}
	}
	switch {
	case d.Definition.bad:
	case d.Definition.raw == nil:
		l.addf(d.Definition.pos, "is required: a document {nodes: [{id, type, …}], edges: [{from, to, …}]}")
	case sch != nil:
		for _, p := range sch.Check(d.Definition.raw) {
			l.addf(d.Definition.at(p.Pointer), "%s", p.Message)
		}
	}
	t.processes = append(t.processes, agent.Process{Tag: d.Tag.s, Description: d.Description.s, Schema: d.Schema.raw, Definition: d.Definition.raw})
}

// finish checks what spans documents — default agents, the agents rules
// name and the tools agents list — and returns the catalog or every
// problem found.
func (l *loader) finish() (agent.Catalog, error) {
	var cat agent.Catalog
	for _, t := range l.tenants {
		l.bound(t)
		l.pinReads(t)
		tc := agent.TenantCatalog{TenantID: t.id, DefaultAgent: t.defaultAgent.s, Tools: t.tools, ReplaceRules: t.replaceRules,
			Egress: t.egress, ReplaceEgress: t.egressSet, Processes: t.processes,
			Prices: t.prices, ReplacePrices: t.pricesSet, Budgets: t.budgets, PII: t.pii, ReplacePII: t.piiSet,
			Retention: t.retention, ModelLimits: t.modelLimits, ReplaceModelLimits: t.modelLimitsSet}
		if t.promoteAfter != nil {
			tc.PromoteAfter = &t.promoteAfter.n
		}
		if t.defaultAgent.s != "" {
			l.lookUp(t, "agent", t.agentAt, t.defaultAgent)
		}
		for _, r := range t.rules {
			if r.Agent.s != "" {
				l.lookUp(t, "agent", t.agentAt, r.Agent)
			}
			tc.Rules = append(tc.Rules, agent.Rule{Name: r.Name.s, Priority: r.Priority.n, Condition: r.When.s, AgentID: r.Agent.s})
		}
		kits := l.toolkits(t)
		for _, def := range t.agents {
			tc.Agents = append(tc.Agents, l.grant(t, def, kits))
		}
		cat.Tenants = append(cat.Tenants, tc)
	}
	if len(l.problems) > 0 {
		order := func(file string) int { return slices.Index(l.files, file) }
		slices.SortStableFunc(l.problems, func(a, b Problem) int {
			return cmp.Or(cmp.Compare(order(a.File), order(b.File)), cmp.Compare(a.Line, b.Line))
		})
		return agent.Catalog{}, &ValidationError{Problems: l.problems}
	}
	return cat, nil
}

// toolkits resolves each toolkit's tools by name.
func (l *loader) toolkits(t *tenant) map[string][]agent.Tool {
	kits := map[string][]agent.Tool{}
	for _, k := range t.toolkits {
		var specs []agent.Tool
		for _, ref := range k.Tools {
			if l.lookUp(t, "tool", t.toolAt, ref) {
				spec := t.tools[slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == ref.s })]
				spec.FromToolkit = k.Name.s
				specs = append(specs, spec)
			}
		}
		kits[k.Name.s] = specs
	}
	return kits
}

// grant resolves the tools and toolkits an agent lists into full specs.
// A tool listed by name and granted by a toolkit too is listed once, by
// name; two toolkits granting one tool give it once, from the first.
func (l *loader) grant(t *tenant, def agentDef, kits map[string][]agent.Tool) agent.Agent {
	a := def.agent
	a.Composites = def.composites
	have := map[string]bool{}
	for _, ref := range def.refs {
		if _, ok := t.toolAt[ref.s]; ok {
			i := slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == ref.s })
			a.Tools = append(a.Tools, t.tools[i])
			have[ref.s] = true
		}
	}
	for _, ref := range def.refs {
		if _, ok := t.toolAt[ref.s]; ok {
			continue
		}
		if _, ok := t.toolkitAt[ref.s]; !ok {
			l.lookUp(t, "tool or toolkit", mergePos(t.toolAt, t.toolkitAt), ref)
			continue
		}
		for _, spec := range kits[ref.s] {
			if !have[spec.Name] {
				a.Tools = append(a.Tools, spec)
				have[spec.Name] = true
			}
		}
	}
	if n := len(a.Tools); n > MaxAgentTools && len(def.refs) <= MaxAgentTools {
		l.addf(def.refs[len(def.refs)-1].pos, "agent %q is granted %d tools; the limit is %d", a.ID, n, MaxAgentTools)
	}
	l.guardTools(t, def, a)
	l.checkCodeMode(def, &a)
	return a
}

// guardTools pins each tool guard of an agent to its tool's full spec, as
// the agent's own tools are: a tool of the tenant, granted to the agent
// or not, that can be a guard's (checkGuardTool). A tool an entry of a
// kind with a Resolve step stands for (an MCP server's tool e_t of entry
// e) is known only when the entry is resolved: Resolve pins it then.
func (l *loader) guardTools(t *tenant, def agentDef, a agent.Agent) {
	for i, link := range a.Guardrails {
		g := link.Tool
		if g == nil {
			continue
		}
		at := def.guardrails.at(fmt.Sprintf("/%d/tool/name", i))
		if _, ok := t.toolAt[g.Name]; ok {
			spec := t.tools[slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == g.Name })]
			if k, ok := l.kinds.Kind(spec.Kind); ok && k.Resolve != nil {
				continue // what the entry stands for is known once it is resolved
			}
			if err := checkGuardTool(*g, spec); err != nil {
				l.addf(at, "%s", err)
				continue
			}
			g.Spec = &spec
			continue
		}
		if l.resolvedLater(t, g.Name) {
			continue
		}
		msg := notDefined(t, "tool", t.toolAt, g.Name)
		if entries := l.resolvedEntries(t); len(entries) > 0 {
			msg += fmt.Sprintf(" (a tool entry %s stands for, once resolved, is named %s_<its tool>)", entries[0], entries[0])
		}
		l.addf(at, "%s", msg)
	}
}

// resolvedEntries are the tenant's entries of kinds with a Resolve step.
func (l *loader) resolvedEntries(t *tenant) []string {
	var out []string
	for _, spec := range t.tools {
		if k, ok := l.kinds.Kind(spec.Kind); ok && k.Resolve != nil {
			out = append(out, spec.Name)
		}
	}
	return out
}

// resolvedLater reports whether name may be a tool that an entry of the
// tenant stands for once resolved: an entry of a kind with a Resolve step
// whose name, and an underscore, begin it (mcpToolName).
func (l *loader) resolvedLater(t *tenant, name string) bool {
	return slices.ContainsFunc(l.resolvedEntries(t), func(entry string) bool { return strings.HasPrefix(name, entry+"_") })
}

func mergePos(a, b map[string]pos) map[string]pos {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// bound reports a tenant with more agents, tools or rules than the
// limits allow, at the first one over, and agents with too many tools.
func (l *loader) bound(t *tenant) {
	if n := len(t.agents); n > MaxAgents {
		l.addf(t.agentAt[t.agents[MaxAgents].agent.ID], "tenant %q has %d agents; the limit is %d", t.id, n, MaxAgents)
	}
	if n := len(t.tools); n > MaxTools {
		l.addf(t.toolAt[t.tools[MaxTools].Name], "tenant %q has %d tools; the limit is %d", t.id, n, MaxTools)
	}
	if n := len(t.processes); n > MaxProcesses {
		l.addf(t.processAt[t.processes[MaxProcesses].Tag], "tenant %q has %d processes; the limit is %d", t.id, n, MaxProcesses)
	}
	if n := len(t.rules); n > MaxRules {
		l.addf(t.rules[MaxRules].Name.pos, "tenant %q has %d rules; the limit is %d", t.id, n, MaxRules)
	}
	for _, def := range t.agents {
		if n := len(def.refs); n > MaxAgentTools {
			l.addf(def.refs[MaxAgentTools].pos, "agent %q lists %d tools; the limit is %d", def.agent.ID, n, MaxAgentTools)
		}
	}
}

func (l *loader) addf(at pos, format string, args ...any) {
	l.problems = append(l.problems, Problem{File: at.file, Line: at.line, Field: at.field, Message: fmt.Sprintf(format, args...)})
}

// required reports whether v holds a value that passed its check, err;
// else it reports why not, unless v was malformed (already reported).
func (l *loader) required(v text, err error) bool {
	switch {
	case v.bad:
	case v.s == "":
		l.addf(v.pos, "is required")
	case err != nil:
		l.addf(v.pos, "%s", err)
	default:
		return true
	}
	return false
}

// define records where a tenant's tool, agent or rule is defined, or
// reports that it already is.
func (l *loader) define(defined map[string]pos, what string, name text) {
	if at, dup := defined[name.s]; dup {
		l.addf(name.pos, "%s %q is already defined at %s", what, name.s, at)
		return
	}
	defined[name.s] = name.pos
}

// lookUp reports whether the tenant defines name; if not, it reports a
// problem that lists what the tenant does define.
func (l *loader) lookUp(t *tenant, what string, defined map[string]pos, name text) bool {
	if _, ok := defined[name.s]; ok {
		return true
	}
	l.addf(name.pos, "%s", notDefined(t, what, defined, name.s))
	return false
}

// notDefined says that the tenant defines no name, and what it defines.
func notDefined(t *tenant, what string, defined map[string]pos, name string) string {
	known := " (it has none)"
	if len(defined) > 0 {
		names := slices.Sorted(maps.Keys(defined))
		if len(names) > 10 {
			names = append(names[:10], "…")
		}
		known = "; defined: " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s %q is not defined for tenant %q%s", what, name, t.id, known)
}

// configSchema checks a tool's config against its kind's JSON Schema.
func (l *loader) configSchema(kind tools.Kind, config json.RawMessage) error {
	if len(kind.Config) == 0 {
		return nil
	}
	sch, err := l.compiled(kind)
	if err != nil {
		return err
	}
	doc := any(map[string]any{})
	if len(config) > 0 {
		if doc, err = jsonschema.UnmarshalJSON(bytes.NewReader(config)); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("config of kind %s: %s", kind.Name, schemaProblems(ve))
		}
		return fmt.Errorf("config of kind %s: %w", kind.Name, err)
	}
	return nil
}

// compiled compiles a kind's config schema once per load.
func (l *loader) compiled(kind tools.Kind) (*jsonschema.Schema, error) {
	if sch, ok := l.schemas[kind.Name]; ok {
		return sch, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(kind.Config))
	if err != nil {
		return nil, fmt.Errorf("kind %s: config schema: %w", kind.Name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem://kinds/" + kind.Name + "/config.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("kind %s: config schema: %w", kind.Name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("kind %s: config schema: %w", kind.Name, err)
	}
	if l.schemas == nil {
		l.schemas = map[string]*jsonschema.Schema{}
	}
	l.schemas[kind.Name] = sch
	return sch, nil
}

// schemaProblems says in one line what a validation error found, each
// problem with the path of the value it is about.
func schemaProblems(ve *jsonschema.ValidationError) string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			at := "/" + strings.Join(e.InstanceLocation, "/")
			out = append(out, fmt.Sprintf("%s: %s", at, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(out, "; ")
}

var printer = message.NewPrinter(language.English)

// checkName checks the name of a tool or toolkit of the catalog.
func checkName(name string) error {
	if name == Composites {
		return fmt.Errorf("%q is the name agents list for their tenant's composite tools; choose another", name)
	}
	return checkToolName(name)
}

func checkToolName(name string) error {
	if toolNamePattern.MatchString(name) {
		return nil
	}
	return fmt.Errorf("%q must match %s (what model providers accept)", name, toolNamePattern)
}

// compilePolicy checks a CEL approval policy.
func (l *loader) compilePolicy(expr string) error {
	if l.checker == nil {
		c, err := policy.NewChecker()
		if err != nil {
			return err
		}
		l.checker = c
	}
	return l.checker.Compile(expr)
}
