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
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	policy "github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/process"
	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/tools"
)

// A document decodes into these structs and those of tool_entries.go and
// agent_entries.go: their yaml tags are the format, and their field types
// (decode.go) read and type-check the values, each with its file, line
// and field. The loader below then checks what the values mean and what
// spans documents.

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

type ruleDoc struct {
	Name     text  `yaml:"name"`
	Priority whole `yaml:"priority"`
	When     text  `yaml:"when"`
	Agent    text  `yaml:"agent"`
}

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
