// Package routing picks the agent for a request that names none, from the
// tenant's rules.
//
// A rule has a name, a priority, a CEL condition and an agent. Rules are
// tried in priority order (highest first; equal priorities by name) and the
// first whose condition is true wins; when none is, the tenant's default
// agent answers (Decision.Rule "default"). Conditions see:
//
//	user_role, ui_page, message, tenant_id   string
//	metadata                                 map(string, string)
//
// with CEL's string extensions (`message.lowerAscii().contains("refund")`)
// and regular expressions (`message.matches("(?i)invoice")`).
//
// A condition that fails at run time — `metadata.tier == "gold"` for a
// request without a tier — does not fail the request: the error is
// recorded in Decision.Errors and the next rule is tried. Write
// `has(metadata.tier) && metadata.tier == "gold"` to say what you mean.
// Programs are compiled once per catalog version (Compile), and a cost
// limit stops any condition that would run too long.
package routing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/agentflow/agentflow/internal/agent"
)

// RuleDefault is Decision.Rule when no rule matched.
const RuleDefault = "default"

// costLimit bounds one condition's evaluation.
const costLimit = 10_000

// maxConditionBytes bounds a condition's source.
const maxConditionBytes = 4096

// Input is what a condition can look at.
type Input struct {
	TenantID string
	UserRole string
	UIPage   string
	Metadata map[string]string
	Message  string
}

// Decision is the outcome of routing.
type Decision struct {
	AgentID string
	Rule    string      // the matched rule, or RuleDefault
	Errors  []RuleError // rules skipped because their condition failed
}

// RuleError is a condition that failed at run time.
type RuleError struct {
	Rule string `json:"rule"`
	Err  string `json:"error"`
}

var env = mustEnv()

func mustEnv() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("user_role", cel.StringType),
		cel.Variable("ui_page", cel.StringType),
		cel.Variable("message", cel.StringType),
		cel.Variable("tenant_id", cel.StringType),
		cel.Variable("metadata", cel.MapType(cel.StringType, cel.StringType)),
		ext.Strings(),
	)
	if err != nil {
		// The declarations above are constants: this cannot fail at run time.
		panic(fmt.Sprintf("routing: CEL environment: %v", err))
	}
	return e
}

// CompileCondition checks a condition: it must parse, type-check and be a
// bool. The error is CodeInvalid with CEL's message.
func CompileCondition(expr string) error {
	_, err := compile(expr)
	return err
}

func compile(expr string) (cel.Program, error) {
	if len(expr) > maxConditionBytes {
		return nil, agent.Errorf(agent.CodeInvalid, "condition is longer than %d bytes", maxConditionBytes)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "condition %q: %s", expr, oneLine(iss.Err().Error()))
	}
	if ast.OutputType() != cel.BoolType {
		return nil, agent.Errorf(agent.CodeInvalid, "condition %q evaluates to %s, want bool", expr, ast.OutputType())
	}
	p, err := env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "condition %q: %v", expr, err)
	}
	return p, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Table is a tenant's compiled rules; safe for concurrent use.
type Table struct {
	rules []compiled
}

type compiled struct {
	rule agent.Rule
	prog cel.Program
}

// Compile checks and compiles rules. Errors name the rule: a condition
// that does not compile or is not a bool, an empty name or agent, a
// duplicate name, an agent not in knownAgents (when knownAgents is not nil).
func Compile(rules []agent.Rule, knownAgents []string) (*Table, error) {
	t := &Table{}
	seen := map[string]bool{}
	for i, r := range rules {
		switch {
		case strings.TrimSpace(r.Name) == "":
			return nil, agent.Errorf(agent.CodeInvalid, "rules[%d]: name is required", i)
		case seen[r.Name]:
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q appears twice", r.Name)
		case strings.TrimSpace(r.AgentID) == "":
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q: agent is required", r.Name)
		case strings.TrimSpace(r.Condition) == "":
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q: condition is required", r.Name)
		case knownAgents != nil && !slices.Contains(knownAgents, r.AgentID):
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q: agent %q is not one of the tenant's agents", r.Name, r.AgentID)
		}
		seen[r.Name] = true
		p, err := compile(r.Condition)
		if err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "rule %q: %s", r.Name, strings.TrimPrefix(err.Error(), "invalid: "))
		}
		t.rules = append(t.rules, compiled{rule: r, prog: p})
	}
	slices.SortStableFunc(t.rules, func(a, b compiled) int {
		return cmp.Or(cmp.Compare(b.rule.Priority, a.rule.Priority), cmp.Compare(a.rule.Name, b.rule.Name))
	})
	return t, nil
}

// Len is the number of rules.
func (t *Table) Len() int { return len(t.rules) }

// Route picks the agent for in; see the package doc. Without a match and
// without a default agent it fails with CodeNotFound.
func (t *Table) Route(in Input, defaultAgent string) (Decision, error) {
	var d Decision
	if len(t.rules) > 0 {
		meta := in.Metadata
		if meta == nil {
			meta = map[string]string{}
		}
		// One activation for all rules: evaluating against a map would
		// build a new one per rule.
		vars, err := interpreter.NewActivation(map[string]any{
			"user_role": in.UserRole, "ui_page": in.UIPage, "message": in.Message,
			"tenant_id": in.TenantID, "metadata": meta,
		})
		if err != nil {
			return d, fmt.Errorf("route: %w", err)
		}
		for _, c := range t.rules {
			out, _, err := c.prog.Eval(vars)
			if err != nil {
				d.Errors = append(d.Errors, RuleError{Rule: c.rule.Name, Err: err.Error()})
				continue
			}
			if b, ok := out.Value().(bool); ok && b {
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
