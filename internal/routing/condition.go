package routing

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/agentflow/agentflow/internal/agent"
)

// Limits on a condition. They bound the work one rule can cause: the
// source size and parse depth keep compilation cheap and the compiled
// program small; the cost limit bounds one evaluation.
const (
	// MaxConditionBytes is the longest condition accepted.
	MaxConditionBytes = 4096
	// maxConditionNodes bounds the expression's nodes after macro
	// expansion; a 4 KiB condition of ordinary comparisons stays well
	// below it.
	maxConditionNodes = 2000
	// maxConditionDepth bounds the nesting of the expression.
	maxConditionDepth = 32
	// CostLimit bounds one evaluation of one condition, in CEL cost units:
	// roughly one per operation; searching a string costs 0.1 per byte,
	// lowerAscii 1 per byte, a regexp 0.1 per byte times a quarter of the
	// pattern's length. That is room for several passes over a prompt of
	// agent.MaxPromptBytes, and stops a runaway comprehension after some
	// 15 ms of CPU.
	CostLimit = 1_000_000
)

// The variables a condition can use.
const (
	varCallerName     = "caller.name"
	varCallerRoles    = "caller.roles"
	varClientUserRole = "client.user_role"
	varUIPage         = "ui_page"
	varMetadata       = "metadata"
	varMessage        = "message"
	varTenantID       = "tenant_id"
)

// env is built once; a cel.Env is immutable and safe for concurrent use.
var env = mustEnv()

func mustEnv() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable(varCallerName, cel.StringType),
		cel.Variable(varCallerRoles, cel.ListType(cel.StringType)),
		cel.Variable(varClientUserRole, cel.StringType),
		cel.Variable(varUIPage, cel.StringType),
		cel.Variable(varMetadata, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varMessage, cel.StringType),
		cel.Variable(varTenantID, cel.StringType),
		ext.Strings(),
		cel.OptionalTypes(),
		cel.ParserExpressionSizeLimit(MaxConditionBytes),
		cel.ParserRecursionLimit(maxConditionDepth),
		cel.ExpressionNodeLimit(maxConditionNodes),
	)
	if err != nil {
		// The declarations above are constants: only a programming error
		// gets here, and every test would catch it.
		panic(fmt.Sprintf("routing: CEL environment: %v", err))
	}
	return e
}

// CompileCondition checks one rule's condition on its own: it must parse,
// type-check and be a bool. The catalog loader uses it to report a bad
// condition at its file and line; the error is agent.CodeInvalid with
// CEL's message.
func CompileCondition(expr string) error {
	if _, err := compile(expr); err != nil {
		return agent.Errorf(agent.CodeInvalid, "%s", err)
	}
	return nil
}

// program is a compiled condition. Every condition has a cost-tracked
// program; tracking costs a few allocations per evaluation, so a condition
// whose worst case is provably within CostLimit for any bounded input
// (see bounded) also gets an untracked one, used for such inputs.
type program struct {
	tracked   cel.Program
	untracked cel.Program // nil unless the static estimate is within CostLimit
}

// eval runs the condition; bounded says whether in is within the sizes the
// static estimate assumed.
func (p *program) eval(vars *activation, bounded bool) (ref.Val, error) {
	prg := p.tracked
	if bounded && p.untracked != nil {
		prg = p.untracked
	}
	out, _, err := prg.Eval(vars)
	return out, err
}

func compile(expr string) (*program, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("condition is required")
	}
	if len(expr) > MaxConditionBytes {
		return nil, fmt.Errorf("condition is %d bytes long, the limit is %d", len(expr), MaxConditionBytes)
	}
	ast, iss := env.Compile(expr)
	if err := iss.Err(); err != nil {
		return nil, fmt.Errorf("condition %s: %s%s", quote(expr), oneLine(err.Error()), agent.MovedVariableHint(err.Error()))
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("condition %s has type %s, want bool", quote(expr), ast.OutputType())
	}
	// OptOptimize folds constants and, above all, compiles constant regular
	// expressions here instead of at every evaluation; an invalid pattern
	// is therefore a compile error.
	var p program
	var err error
	if p.tracked, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(CostLimit)); err != nil {
		return nil, fmt.Errorf("condition %s: %s", quote(expr), oneLine(err.Error()))
	}
	if est, err := env.EstimateCost(ast, inputSizes{}); err == nil && est.Max <= CostLimit {
		if p.untracked, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
			return nil, fmt.Errorf("condition %s: %s", quote(expr), oneLine(err.Error()))
		}
	}
	return &p, nil
}

// quote quotes a condition for an error message, shortened: the message
// already names the rule, and CEL's own message shows the column.
func quote(expr string) string {
	const max = 80
	if r := []rune(expr); len(r) > max {
		return strconv.Quote(string(r[:max])) + "..."
	}
	return strconv.Quote(expr)
}

// oneLine folds CEL's multi-line messages (which point at the column with
// a caret line) into one line, so they fit a log field and a CLI error.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// activation hands the request to the programs. It holds CEL values built
// once per Route, so the rules tried after the first convert nothing.
type activation struct {
	callerName, clientUserRole, uiPage, message, tenantID ref.Val
	callerRoles, metadata                                 ref.Val
}

var emptyMetadata = types.NewStringStringMap(types.DefaultTypeAdapter, map[string]string{})

func newActivation(in *Input) *activation {
	meta := emptyMetadata
	if len(in.Metadata) > 0 {
		meta = types.NewStringStringMap(types.DefaultTypeAdapter, in.Metadata)
	}
	return &activation{
		callerName:     types.String(in.Caller.NameOf()),
		callerRoles:    types.NewStringList(types.DefaultTypeAdapter, in.Caller.RoleList()),
		clientUserRole: types.String(in.UserRole),
		uiPage:         types.String(in.UIPage),
		message:        types.String(in.Message),
		tenantID:       types.String(in.TenantID),
		metadata:       meta,
	}
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varCallerName:
		return a.callerName, true
	case varCallerRoles:
		return a.callerRoles, true
	case varClientUserRole:
		return a.clientUserRole, true
	case varUIPage:
		return a.uiPage, true
	case varMetadata:
		return a.metadata, true
	case varMessage:
		return a.message, true
	case varTenantID:
		return a.tenantID, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
