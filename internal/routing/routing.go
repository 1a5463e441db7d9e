package routing

import (
	"cmp"
	"slices"
	"strings"

	"cel.dev/cel-go/common/types"

	"github.com/agentflow/agentflow/internal/agent"
)

// RuleDefault is Decision.Rule when no rule matched and the tenant's
// default agent answers.
const RuleDefault = "default"

// Input is what a condition can look at (see the package doc for the
// variable names).
type Input struct {
	TenantID string
	// Caller is who asks, from the credential (caller.name,
	// caller.roles); nil: nobody the gateway authenticated.
	Caller *agent.Caller
	// UserRole is what the client says its user's role is: a hint,
	// client.user_role.
	UserRole string
	UIPage   string
	Metadata map[string]string
	Message  string // the prompt
}

// Decision is the outcome of routing.
type Decision struct {
	AgentID string
	Rule    string            // the matched rule's name, or RuleDefault
	Errors  []agent.RuleError // rules skipped because their condition failed at run time
}

// Table is a tenant's compiled rules in the order Route tries them. It is
// immutable and safe for concurrent use; a nil *Table has no rules.
type Table struct {
	rules []compiled
}

type compiled struct {
	rule agent.Rule
	prog *program
}

// Compile checks and compiles a tenant's rules; do it once per catalog
// version. Every error is agent.CodeInvalid and names the rule: a condition
// that is empty, does not compile (CEL's message) or is not a bool; an empty
// name or agent; a name used twice; an agent not in knownAgents (checked
// only when knownAgents is not nil).
func Compile(rules []agent.Rule, knownAgents []string) (*Table, error) {
	var known map[string]bool
	if knownAgents != nil {
		known = make(map[string]bool, len(knownAgents))
		for _, a := range knownAgents {
			known[a] = true
		}
	}
	t := &Table{rules: make([]compiled, 0, len(rules))}
	seen := make(map[string]bool, len(rules))
	for i, r := range rules {
		switch {
		case strings.TrimSpace(r.Name) == "":
			return nil, agent.Errorf(agent.CodeInvalid, "rules[%d]: name is required", i)
		case seen[r.Name]:
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q: the name is used by another rule", r.Name)
		case strings.TrimSpace(r.AgentID) == "":
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q: agent_id is required", r.Name)
		case known != nil && !known[r.AgentID]:
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q: agent %q is not one of the tenant's agents", r.Name, r.AgentID)
		}
		seen[r.Name] = true
		p, err := compile(r.Condition)
		if err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q: %s", r.Name, err)
		}
		t.rules = append(t.rules, compiled{rule: r, prog: p})
	}
	// Names are unique, so this order is total and independent of the
	// order the catalog lists the rules in.
	slices.SortFunc(t.rules, func(a, b compiled) int {
		return cmp.Or(cmp.Compare(b.rule.Priority, a.rule.Priority), strings.Compare(a.rule.Name, b.rule.Name))
	})
	return t, nil
}

// Len is the number of rules.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.rules)
}

// Route picks the agent for in: the first rule in priority order whose
// condition is true; rules whose condition fails at run time are reported
// in Decision.Errors and skipped; with no match, defaultAgent with Rule
// RuleDefault. With no match and no default it fails with
// agent.CodeNotFound.
func (t *Table) Route(in Input, defaultAgent string) (Decision, error) {
	return t.route(&in, defaultAgent, bounded(&in))
}

// route is Route with the choice of programs made by the caller, so tests
// can run every case through both.
func (t *Table) route(in *Input, defaultAgent string, small bool) (Decision, error) {
	var d Decision
	if t.Len() > 0 {
		vars := newActivation(in)
		for i := range t.rules {
			c := &t.rules[i]
			out, err := c.prog.eval(vars, small)
			if err != nil {
				d.Errors = append(d.Errors, agent.RuleError{Rule: c.rule.Name, Err: err.Error()})
				continue
			}
			if out == types.True {
				d.AgentID, d.Rule = c.rule.AgentID, c.rule.Name
				return d, nil
			}
		}
	}
	if defaultAgent == "" {
		return d, agent.Errorf(agent.CodeNotFound, "no routing rule matched and tenant %q has no default agent", in.TenantID)
	}
	d.AgentID, d.Rule = defaultAgent, RuleDefault
	return d, nil
}
