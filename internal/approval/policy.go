package approval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"

	"github.com/agentflow/agentflow/internal/agent"
)

// costLimit bounds one evaluation, so that no expression can hang a worker.
const costLimit = 100_000

// Call is what a policy looks at.
type Call struct {
	Tool     string
	Args     string // JSON object, as the model wrote it
	TenantID string
	// Caller is who the turn acts for, from the credential; nil: nobody
	// the gateway authenticated.
	Caller  *agent.Caller
	Context agent.TurnContext
}

// The variables of a policy whose names are qualified.
const (
	varCallerName     = "caller.name"
	varCallerRoles    = "caller.roles"
	varClientUserRole = "client.user_role"
)

// Checker evaluates policies; it is safe for concurrent use.
type Checker struct {
	env      *cel.Env
	programs sync.Map // expression → cel.Program
}

// NewChecker returns a Checker.
func NewChecker() (*Checker, error) {
	env, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tenant_id", cel.StringType),
		cel.Variable(varCallerName, cel.StringType),
		cel.Variable(varCallerRoles, cel.ListType(cel.StringType)),
		cel.Variable(varClientUserRole, cel.StringType),
		cel.Variable("ui_page", cel.StringType),
		cel.Variable("metadata", cel.MapType(cel.StringType, cel.StringType)),
		ext.Strings(),
	)
	if err != nil {
		return nil, fmt.Errorf("approval policy environment: %w", err)
	}
	return &Checker{env: env}, nil
}

// Compile checks an expression: agent.CodeInvalid with CEL's message when
// it does not compile or is not a bool. "never" and "always" are valid.
func (c *Checker) Compile(expr string) error {
	switch strings.TrimSpace(expr) {
	case agent.ApprovalNever, agent.ApprovalAlways:
		return nil // keywords, not CEL: NeedsApproval reads them as such
	}
	_, err := c.program(expr)
	return err
}

func (c *Checker) program(expr string) (cel.Program, error) {
	if p, ok := c.programs.Load(expr); ok {
		return p.(cel.Program), nil
	}
	ast, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "approval policy %q: %s%s", expr, strings.ReplaceAll(iss.Err().Error(), "\n", " "), agent.MovedVariableHint(iss.Err().Error()))
	}
	if ast.OutputType() != cel.BoolType {
		return nil, agent.Errorf(agent.CodeInvalid, "approval policy %q: evaluates to %s, want bool", expr, ast.OutputType())
	}
	p, err := c.env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "approval policy %q: %v", expr, err)
	}
	c.programs.Store(expr, p)
	return p, nil
}

// NeedsApproval applies a tool's policy to a call. The reason says why a
// call needs approval ("" when it does not).
func (c *Checker) NeedsApproval(policy string, call Call) (bool, string) {
	switch strings.TrimSpace(policy) {
	case "", agent.ApprovalNever:
		return false, ""
	case agent.ApprovalAlways:
		return true, "the tool always needs approval"
	}
	p, err := c.program(policy)
	if err != nil {
		return true, err.Error()
	}
	args := map[string]any{}
	if s := strings.TrimSpace(call.Args); s != "" {
		if err := json.Unmarshal([]byte(s), &args); err != nil {
			return true, "the arguments are not a JSON object, so the policy cannot be applied"
		}
	}
	meta := call.Context.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	out, _, err := p.Eval(map[string]any{
		"tool": call.Tool, "args": args, "tenant_id": call.TenantID,
		varCallerName: call.Caller.NameOf(), varCallerRoles: call.Caller.RoleList(),
		varClientUserRole: call.Context.UserRole, "ui_page": call.Context.UIPage, "metadata": meta,
	})
	if err != nil {
		return true, fmt.Sprintf("policy %q could not be evaluated (%v), so approval is required", policy, err)
	}
	if b, ok := out.Value().(bool); ok && b {
		return true, fmt.Sprintf("policy %q holds", policy)
	}
	return false, ""
}

// Strictest combines policies into one that needs approval whenever any
// of them does: "" and never add nothing, always wins, and expressions are
// joined with ||. Each expression is closed by a newline, since a CEL
// comment (// …) would otherwise swallow what follows it.
func Strictest(policies ...string) string {
	var exprs []string
	for _, p := range policies {
		switch t := strings.TrimSpace(p); t {
		case "", agent.ApprovalNever:
		case agent.ApprovalAlways:
			return agent.ApprovalAlways
		default:
			if !slices.Contains(exprs, t) {
				exprs = append(exprs, t)
			}
		}
	}
	switch len(exprs) {
	case 0:
		return agent.ApprovalNever
	case 1:
		return exprs[0]
	}
	var b strings.Builder
	for i, e := range exprs {
		if i > 0 {
			b.WriteString(" || ")
		}
		b.WriteString("(")
		b.WriteString(e)
		b.WriteString("\n)")
	}
	return b.String()
}
