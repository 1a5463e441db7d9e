package registry

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/policy"
	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/tools"
)

// toolNamePattern is what model providers accept as a function name.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// defaultParameters is the schema of a tool whose kind declares none.
const defaultParameters = `{"type":"object","properties":{}}`

// loader accumulates the documents of one load and the problems found.
type loader struct {
	kinds    Kinds
	checker  *policy.Checker // approval policies, made on first use
	files    []string        // in load order, to sort problems by
	problems []Problem
	tenants  []*tenant
	byID     map[string]*tenant
}

// tenant is one tenant as gathered from all documents so far.
type tenant struct {
	id           string
	defaultAgent string
	defaultAt    pos
	tools        []agent.Tool
	toolAt       map[string]pos
	agents       []agentDef
	agentAt      map[string]pos
	rules        []ruleDef
	ruleAt       map[string]pos
	rulesSet     bool // a document has a rules key: the rules replace the stored ones
}

type ruleDef struct {
	rule    agent.Rule
	agentAt pos
	field   string
}

type agentDef struct {
	agent agent.Agent
	refs  []toolRef
}

// toolRef is a tool name an agent lists, with where it was written.
type toolRef struct {
	name  string
	at    pos
	field string
}

type pos struct {
	file string
	line int
}

func (p pos) String() string { return fmt.Sprintf("%s:%d", p.file, p.line) }

type noKinds struct{}

func (noKinds) Kind(string) (tools.Kind, bool) { return tools.Kind{}, false }

func newLoader(kinds Kinds) *loader {
	if kinds == nil {
		kinds = noKinds{}
	}
	return &loader{kinds: kinds, byID: map[string]*tenant{}}
}

// compilePolicy checks a CEL approval policy.
func (l *loader) compilePolicy(expr string) error {
	if l.checker == nil {
		c, err := policy.New()
		if err != nil {
			return err
		}
		l.checker = c
	}
	return l.checker.Compile(expr)
}

func (l *loader) addf(file string, n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	l.problems = append(l.problems, Problem{File: file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// yamlLine finds the line in yaml.v3's syntax errors ("yaml: line 3: …").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// file parses every document of one file.
func (l *loader) file(name string, data []byte) {
	l.files = append(l.files, name)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
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
		root := &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			continue // an empty document, e.g. after a trailing ---
		}
		docs++
		l.document(name, root)
	}
	if docs == 0 {
		l.problems = append(l.problems, Problem{File: name, Message: "holds no catalog document"})
	}
}

// document reads one tenant's document.
func (l *loader) document(file string, root *yaml.Node) {
	var (
		tenantNode, defaultNode, toolsNode, agentsNode, rulesNode *yaml.Node
	)
	ok := l.fields(file, root, "", []string{"tenant", "default_agent", "tools", "agents", "rules"}, func(key string, v *yaml.Node) {
		switch key {
		case "rules":
			rulesNode = v
		case "tenant":
			tenantNode = v
		case "default_agent":
			defaultNode = v
		case "tools":
			toolsNode = v
		case "agents":
			agentsNode = v
		}
	})
	if !ok {
		return
	}

	// A document without a usable tenant is still checked, against a
	// tenant of its own that is not returned.
	t := &tenant{toolAt: map[string]pos{}, agentAt: map[string]pos{}, ruleAt: map[string]pos{}}
	if id, ok := l.str(file, tenantNode, "tenant"); !ok || id == "" {
		if ok {
			l.addf(file, cmp.Or(tenantNode, root), "tenant", "is required")
		}
	} else if err := agent.ValidateID("tenant", id); err != nil {
		l.addf(file, tenantNode, "tenant", "%s", err)
	} else if known, ok := l.byID[id]; ok {
		t = known
	} else {
		t.id = id
		l.byID[id] = t
		l.tenants = append(l.tenants, t)
	}

	if name, ok := l.str(file, defaultNode, "default_agent"); ok && name != "" {
		at := pos{file, defaultNode.Line}
		if t.defaultAgent != "" && t.defaultAgent != name {
			l.addf(file, defaultNode, "default_agent", "%q conflicts with default_agent %q set at %s", name, t.defaultAgent, t.defaultAt)
		} else if t.defaultAgent == "" {
			t.defaultAgent, t.defaultAt = name, at
		}
	}

	l.items(file, toolsNode, "tools", func(i int, n *yaml.Node, field string) { l.tool(file, t, n, field) })
	l.items(file, agentsNode, "agents", func(i int, n *yaml.Node, field string) { l.agent(file, t, n, field) })
	if rulesNode != nil {
		t.rulesSet = true
		l.items(file, rulesNode, "rules", func(i int, n *yaml.Node, field string) { l.rule(file, t, n, field) })
	}
}

// rule reads one routing rule into t.
func (l *loader) rule(file string, t *tenant, n *yaml.Node, field string) {
	var nodes struct{ name, priority, when, agent *yaml.Node }
	ok := l.fields(file, n, field, []string{"name", "priority", "when", "agent"}, func(key string, v *yaml.Node) {
		switch key {
		case "name":
			nodes.name = v
		case "priority":
			nodes.priority = v
		case "when":
			nodes.when = v
		case "agent":
			nodes.agent = v
		}
	})
	if !ok {
		return
	}
	def := ruleDef{field: field + ".agent"}
	r := &def.rule
	if name, ok := l.str(file, nodes.name, field+".name"); ok {
		switch {
		case name == "":
			l.addf(file, cmp.Or(nodes.name, n), field+".name", "is required")
		case agent.ValidateID("name", name) != nil:
			l.addf(file, nodes.name, field+".name", "%s", agent.ValidateID("name", name))
		default:
			if at, dup := t.ruleAt[name]; dup {
				l.addf(file, nodes.name, field+".name", "rule %q is already defined at %s", name, at)
			} else {
				t.ruleAt[name] = pos{file, nodes.name.Line}
			}
		}
		r.Name = name
	}
	if nodes.priority != nil {
		if p, ok := l.int(file, nodes.priority, field+".priority"); ok {
			r.Priority = p
		}
	}
	if when, ok := l.str(file, nodes.when, field+".when"); ok {
		if strings.TrimSpace(when) == "" {
			l.addf(file, cmp.Or(nodes.when, n), field+".when", "is required: a CEL condition such as ui_page == \"billing\"")
		} else if err := routing.CompileCondition(when); err != nil {
			l.addf(file, nodes.when, field+".when", "%s", err)
		}
		r.Condition = when
	}
	if id, ok := l.str(file, nodes.agent, field+".agent"); ok {
		if id == "" {
			l.addf(file, cmp.Or(nodes.agent, n), field+".agent", "is required")
		} else {
			def.agentAt = pos{file, nodes.agent.Line}
		}
		r.AgentID = id
	}
	t.rules = append(t.rules, def)
}

// tool reads one tool definition into t.
func (l *loader) tool(file string, t *tenant, n *yaml.Node, field string) {
	var nodes struct{ name, kind, description, parameters, approval, config, execution *yaml.Node }
	ok := l.fields(file, n, field, []string{"name", "kind", "description", "parameters", "approval", "config", "execution"}, func(key string, v *yaml.Node) {
		switch key {
		case "name":
			nodes.name = v
		case "kind":
			nodes.kind = v
		case "description":
			nodes.description = v
		case "parameters":
			nodes.parameters = v
		case "approval":
			nodes.approval = v
		case "config":
			nodes.config = v
		case "execution":
			nodes.execution = v
		}
	})
	if !ok {
		return
	}
	before := len(l.problems)
	var spec agent.Tool

	if name, ok := l.str(file, nodes.name, field+".name"); ok {
		switch {
		case name == "":
			l.addf(file, cmp.Or(nodes.name, n), field+".name", "is required")
		case !toolNamePattern.MatchString(name):
			l.addf(file, nodes.name, field+".name", "%q must match %s (what model providers accept)", name, toolNamePattern)
		default:
			if at, dup := t.toolAt[name]; dup {
				l.addf(file, nodes.name, field+".name", "tool %q is already defined at %s", name, at)
			} else {
				t.toolAt[name] = pos{file, nodes.name.Line}
			}
		}
		spec.Name = name
	}

	var kind tools.Kind
	haveKind := false
	if name, ok := l.str(file, nodes.kind, field+".kind"); ok {
		if name == "" {
			l.addf(file, cmp.Or(nodes.kind, n), field+".kind", "is required")
		} else if kind, haveKind = l.kinds.Kind(name); !haveKind {
			l.addf(file, nodes.kind, field+".kind", "unknown tool kind %q", name)
		}
		spec.Kind = name
	}

	if d, ok := l.str(file, nodes.description, field+".description"); ok {
		spec.Description = cmp.Or(d, kind.Description)
	}

	if nodes.parameters != nil {
		if l.schema(file, nodes.parameters, field+".parameters") {
			if raw, ok := l.toJSON(file, nodes.parameters, field+".parameters"); ok {
				spec.Parameters = raw
			}
		}
	} else if len(kind.Parameters) > 0 {
		spec.Parameters = kind.Parameters
	} else {
		spec.Parameters = []byte(defaultParameters)
	}

	spec.Approval = agent.ApprovalNever
	if nodes.approval != nil {
		a := resolve(nodes.approval)
		switch {
		case a.Kind == yaml.ScalarNode && a.ShortTag() == "!!bool":
			l.addf(file, a, field+".approval", "%s is not a policy: want never, always or a CEL expression", a.Value)
		default:
			if s, ok := l.str(file, a, field+".approval"); ok {
				switch strings.TrimSpace(s) {
				case "":
					l.addf(file, a, field+".approval", "is empty: want never, always or a CEL expression")
				case agent.ApprovalNever, agent.ApprovalAlways:
				default:
					if err := l.compilePolicy(s); err != nil {
						l.addf(file, a, field+".approval", "%s", err)
					}
				}
				spec.Approval = s
			}
		}
	}

	if nodes.config != nil && !isNull(nodes.config) {
		if raw, ok := l.toJSON(file, nodes.config, field+".config"); ok {
			spec.Config = raw
		}
	}

	if haveKind && kind.Local {
		spec.Execution = agent.ToolLocal
	}
	if e, ok := l.str(file, nodes.execution, field+".execution"); ok && nodes.execution != nil && !isNull(nodes.execution) {
		switch e {
		case agent.ToolLocal:
			spec.Execution = agent.ToolLocal
		case agent.ToolActivity:
			spec.Execution = "" // the default, kept out of the stored spec
		default:
			l.addf(file, nodes.execution, field+".execution", "%q: want local or activity", e)
		}
	}

	// The kind checks its own config; only worth asking when the rest of
	// the spec is sound.
	if haveKind && len(l.problems) == before {
		if _, err := kind.Build(spec, tools.Deps{}.WithDefaults()); err != nil {
			l.addf(file, cmp.Or(nodes.config, n), field+".config", "%s", err)
		}
	}
	t.tools = append(t.tools, spec)
}

// agent reads one agent definition into t.
func (l *loader) agent(file string, t *tenant, n *yaml.Node, field string) {
	var nodes struct{ id, description, model, systemPrompt, tools, temperature, limits *yaml.Node }
	ok := l.fields(file, n, field, []string{"id", "description", "model", "system_prompt", "tools", "temperature", "limits"}, func(key string, v *yaml.Node) {
		switch key {
		case "id":
			nodes.id = v
		case "description":
			nodes.description = v
		case "model":
			nodes.model = v
		case "system_prompt":
			nodes.systemPrompt = v
		case "tools":
			nodes.tools = v
		case "temperature":
			nodes.temperature = v
		case "limits":
			nodes.limits = v
		}
	})
	if !ok {
		return
	}
	def := agentDef{agent: agent.Agent{TenantID: t.id}}
	a := &def.agent

	if id, ok := l.str(file, nodes.id, field+".id"); ok {
		switch {
		case id == "":
			l.addf(file, cmp.Or(nodes.id, n), field+".id", "is required")
		default:
			if err := agent.ValidateID("id", id); err != nil {
				l.addf(file, nodes.id, field+".id", "%s", err)
			} else if at, dup := t.agentAt[id]; dup {
				l.addf(file, nodes.id, field+".id", "agent %q is already defined at %s", id, at)
			} else {
				t.agentAt[id] = pos{file, nodes.id.Line}
			}
		}
		a.ID = id
	}
	a.Description, _ = l.str(file, nodes.description, field+".description")
	if m, ok := l.str(file, nodes.model, field+".model"); ok {
		if m == "" {
			l.addf(file, cmp.Or(nodes.model, n), field+".model", `is required, as "provider:model", e.g. "openai:gpt-4o-mini"`)
		} else if provider, _, err := agent.ParseModel(m); err != nil {
			l.addf(file, nodes.model, field+".model", `%q is not "provider:model", e.g. "openai:gpt-4o-mini"`, m)
		} else if !slices.Contains(llm.Providers(), provider) {
			l.addf(file, nodes.model, field+".model", "unknown provider %q (known: %s)", provider, strings.Join(llm.Providers(), ", "))
		}
		a.Model = m
	}
	a.SystemPrompt, _ = l.str(file, nodes.systemPrompt, field+".system_prompt")

	seen := map[string]bool{}
	l.items(file, nodes.tools, field+".tools", func(i int, v *yaml.Node, f string) {
		name, ok := l.str(file, v, f)
		switch {
		case !ok:
		case name == "":
			l.addf(file, v, f, "tool name is empty")
		case seen[name]:
			l.addf(file, v, f, "tool %q is listed twice", name)
		default:
			seen[name] = true
			def.refs = append(def.refs, toolRef{name: name, at: pos{file, v.Line}, field: f})
		}
	})

	if v := nodes.temperature; v != nil && !isNull(v) {
		var temp float64
		if v = resolve(v); v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!int" && v.ShortTag() != "!!float") || v.Decode(&temp) != nil {
			l.addf(file, v, field+".temperature", "want a number from 0 to 2")
		} else if !(temp >= 0 && temp <= 2) {
			l.addf(file, v, field+".temperature", "%s is out of range: want a number from 0 to 2", v.Value)
		} else {
			a.Temperature = &temp
		}
	}

	if nodes.limits != nil && !isNull(nodes.limits) {
		lim := map[string]*int{
			"max_iterations":       &a.Limits.MaxIterations,
			"turn_timeout_sec":     &a.Limits.TurnTimeoutSec,
			"token_budget":         &a.Limits.TokenBudget,
			"approval_timeout_sec": &a.Limits.ApprovalTimeoutSec,
			"turns_per_minute":     &a.Limits.TurnsPerMinute,
			"max_output_tokens":    &a.Limits.MaxOutputTokens,
		}
		names := []string{"max_iterations", "turn_timeout_sec", "token_budget", "approval_timeout_sec", "max_output_tokens", "turns_per_minute"}
		l.fields(file, nodes.limits, field+".limits", names, func(key string, v *yaml.Node) {
			f := field + ".limits." + key
			if n, ok := l.int(file, v, f); ok {
				if n < 0 {
					l.addf(file, v, f, "%d is negative: want 0 (the default) or more", n)
				}
				*lim[key] = n
			}
		})
	}
	t.agents = append(t.agents, def)
}

// finish checks what spans documents — default agents and the tools agents
// name — and returns the catalog or every problem found.
func (l *loader) finish() (agent.Catalog, error) {
	var cat agent.Catalog
	for _, t := range l.tenants {
		if t.defaultAgent != "" {
			if _, ok := t.agentAt[t.defaultAgent]; !ok {
				l.problems = append(l.problems, Problem{File: t.defaultAt.file, Line: t.defaultAt.line, Field: "default_agent",
					Message: fmt.Sprintf("agent %q is not defined for tenant %q%s", t.defaultAgent, t.id, known(t.agentAt))})
			}
		}
		tc := agent.TenantCatalog{TenantID: t.id, DefaultAgent: t.defaultAgent, Tools: t.tools, ReplaceRules: t.rulesSet}
		for _, def := range t.rules {
			if def.rule.AgentID != "" {
				if _, ok := t.agentAt[def.rule.AgentID]; !ok {
					l.problems = append(l.problems, Problem{File: def.agentAt.file, Line: def.agentAt.line, Field: def.field,
						Message: fmt.Sprintf("agent %q is not defined for tenant %q%s", def.rule.AgentID, t.id, known(t.agentAt))})
				}
			}
			tc.Rules = append(tc.Rules, def.rule)
		}
		for _, def := range t.agents {
			a := def.agent
			for _, ref := range def.refs {
				i := slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == ref.name })
				if _, defined := t.toolAt[ref.name]; !defined || i < 0 {
					if !defined {
						l.problems = append(l.problems, Problem{File: ref.at.file, Line: ref.at.line, Field: ref.field,
							Message: fmt.Sprintf("tool %q is not defined for tenant %q%s", ref.name, t.id, known(t.toolAt))})
					}
					continue
				}
				a.Tools = append(a.Tools, t.tools[i])
			}
			tc.Agents = append(tc.Agents, a)
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

// known lists the defined names for a "not defined" message.
func known(defined map[string]pos) string {
	if len(defined) == 0 {
		return " (it has none)"
	}
	names := make([]string, 0, len(defined))
	for n := range defined {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) > 10 {
		names = append(names[:10], "…")
	}
	return "; defined: " + strings.Join(names, ", ")
}

// fields walks a mapping, calling fn for each known key and reporting
// unknown and repeated keys. It reports false when n is not a mapping.
func (l *loader) fields(file string, n *yaml.Node, field string, knownKeys []string, fn func(key string, v *yaml.Node)) bool {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		l.addf(file, n, field, "want a mapping with %s, not %s", strings.Join(knownKeys, ", "), describe(n))
		return false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		f := join(field, key)
		if first, dup := seen[key]; dup {
			l.addf(file, k, f, "is repeated (first at line %d)", first)
			continue
		}
		seen[key] = k.Line
		if k.Kind != yaml.ScalarNode || !slices.Contains(knownKeys, key) {
			l.addf(file, k, f, "unknown field; known fields: %s", strings.Join(knownKeys, ", "))
			continue
		}
		fn(key, v)
	}
	return true
}

// items walks a sequence; a missing or null node is an empty one.
func (l *loader) items(file string, n *yaml.Node, field string, fn func(i int, v *yaml.Node, field string)) {
	if n == nil || isNull(n) {
		return
	}
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		l.addf(file, n, field, "want a list, not %s", describe(n))
		return
	}
	for i, v := range n.Content {
		fn(i, v, fmt.Sprintf("%s[%d]", field, i))
	}
}

// str reads a string scalar. A missing or null node is "". Numbers are
// taken as written, so that `id: 42` works.
func (l *loader) str(file string, n *yaml.Node, field string) (string, bool) {
	if n == nil || isNull(n) {
		return "", true
	}
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float":
			return n.Value, true
		}
	}
	l.addf(file, n, field, "want a string, not %s", describe(n))
	return "", false
}

// int reads a whole number.
func (l *loader) int(file string, n *yaml.Node, field string) (int, bool) {
	n = resolve(n)
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		l.addf(file, n, field, "want a whole number, not %s", describe(n))
		return 0, false
	}
	return v, true
}

// schema checks that n is a JSON Schema of an object, as model providers
// require of a tool's parameters.
func (l *loader) schema(file string, n *yaml.Node, field string) bool {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		l.addf(file, n, field, "want a JSON Schema object (type: object), not %s", describe(n))
		return false
	}
	var typ, props *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "type":
			typ = resolve(n.Content[i+1])
		case "properties":
			props = resolve(n.Content[i+1])
		}
	}
	ok := true
	if typ == nil || typ.Kind != yaml.ScalarNode || typ.Value != "object" {
		what := "missing"
		if typ != nil {
			what = describe(typ)
		}
		l.addf(file, cmp.Or(typ, n), field+".type", "want \"object\" (tool parameters are a JSON object), not %s", what)
		ok = false
	}
	if props != nil && props.Kind != yaml.MappingNode {
		l.addf(file, props, field+".properties", "want a mapping of argument names to schemas, not %s", describe(props))
		ok = false
	}
	return ok
}

// json converts a YAML value to compact JSON, keeping the key order.
func (l *loader) toJSON(file string, n *yaml.Node, field string) ([]byte, bool) {
	var b bytes.Buffer
	if bad, err := writeJSON(&b, n, 0); err != nil {
		l.addf(file, bad, field, "%s", err)
		return nil, false
	}
	return b.Bytes(), true
}

// maxJSONBytes bounds the JSON made from one value, so that nested YAML
// aliases cannot expand into gigabytes.
const maxJSONBytes = 1 << 20

func writeJSON(b *bytes.Buffer, n *yaml.Node, depth int) (*yaml.Node, error) {
	if b.Len() > maxJSONBytes {
		return n, fmt.Errorf("is larger than %d bytes as JSON", maxJSONBytes)
	}
	if depth > 100 {
		return n, errors.New("nests deeper than 100 levels")
	}
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return k, errors.New("keys must be plain strings (no merge keys or complex keys)")
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k.Value)
			b.WriteByte(':')
			if bad, err := writeJSON(b, n.Content[i+1], depth+1); err != nil {
				return bad, err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if bad, err := writeJSON(b, v, depth+1); err != nil {
				return bad, err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return n, err
			}
			if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
				return n, fmt.Errorf("%s has no JSON equivalent", n.Value)
			}
			fmt.Fprint(b, v)
		default: // strings, timestamps, binary: as written
			writeString(b, n.Value)
		}
	default:
		return n, fmt.Errorf("unsupported YAML node %s", describe(n))
	}
	return nil, nil
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's type for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return strconv.Quote(clip(n.Value))
		}
		return clip(n.Value)
	}
	return "an unsupported YAML value"
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}
