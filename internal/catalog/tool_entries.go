package catalog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentflow/agentflow/internal/agent"
	policy "github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/toolargs"
	"github.com/agentflow/agentflow/internal/tools"
)

// toolkitDoc is one toolkit of a document: a name agents list to be
// granted the tools it lists.
type toolkitDoc struct {
	Name        text   `yaml:"name"`
	Description text   `yaml:"description"`
	Tools       []text `yaml:"tools"`
}

// toolDoc is one tool of a document: agent.Tool, with what it leaves
// out taken from its kind (tool).
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

// toolNamePattern is what model providers accept as a function name.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// defaultParameters is the schema of a tool whose kind declares none.
const defaultParameters = `{"type":"object","properties":{}}`

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
	spec.RateLimit = l.rateLimit(d)
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
		l.kindChecks(t, d, kind, spec)
	}
	t.tools = append(t.tools, spec)
}

// rateLimit checks a tool's rate limit: per_minute, concurrent or both,
// within bounds.
func (l *loader) rateLimit(d *toolDoc) *agent.ToolRateLimit {
	r := d.RateLimit
	if r == nil {
		return nil
	}
	switch {
	case r.PerMinute.n == 0 && r.Concurrent.n == 0:
		l.addf(d.Name.pos, "rate_limit: give per_minute, concurrent or both")
	case r.PerMinute.n > 1_000_000 || r.Concurrent.n > 10_000:
		l.addf(d.Name.pos, "rate_limit: per_minute is at most 1000000 and concurrent at most 10000")
	default:
		return &agent.ToolRateLimit{PerMinute: r.PerMinute.n, Concurrent: r.Concurrent.n}
	}
	return nil
}

// kindChecks has a tool's kind check its spec: the kind builds it, its
// config schema validates the config, the kind admits it for the tenant,
// and the operator grants the secrets it names; the first that fails is
// reported, at the config.
func (l *loader) kindChecks(t *tenant, d *toolDoc, kind tools.Kind, spec agent.Tool) {
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
		if ve, ok := errors.AsType[*jsonschema.ValidationError](err); ok {
			return fmt.Errorf("config of kind %s: %s", kind.Name, toolargs.Problems(ve))
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
