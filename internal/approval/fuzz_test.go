package approval

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzNeedsApproval: a tool's approval policy, as a catalog author writes
// it, and the arguments a model writes. Compile accepts the policy or
// refuses it with CodeInvalid and a message; applying it never panics,
// stays within the cost limit, and fails safe: a policy that cannot be
// applied (refused, erroring, arguments not an object) requires approval
// and says why.
func FuzzNeedsApproval(f *testing.F) {
	c, err := NewChecker()
	require.NoError(f, err)
	for _, s := range []struct{ policy, args string }{
		{`args.amount > 100.0`, `{"amount": 250.5}`},
		{`args.amount > 100.0`, `{"amount": "lots"}`},
		{`args.amount > 100.0`, `{}`},
		{`tool == "send_email" && client.user_role != "admin" && !("admin" in caller.roles)`, `{"to":"a@example.com"}`},
		{`"force" in args && args.force == true`, `{"force": true}`},
		{`metadata["env"] == "prod" || ui_page.startsWith("/admin")`, ``},
		{`args.items.exists(i, i.price > 10.0)`, `{"items":[{"price":12.0},{"price":1}]}`},
		{`args.items.map(x, args.items.map(y, x)).size() > 0`, `{"items":[1,2,3,4,5,6,7,8]}`},
		{`tenant_id.matches("^demo")`, `[1,2]`},
		{`args.amount > 100.0`, `not json`},
		{`args.amount`, `{}`}, {`1 +`, `{}`}, {`nope == 1`, `{}`},
		{`never`, `{}`}, {`always`, `{}`}, {``, `{}`},
	} {
		f.Add(s.policy, s.args)
	}
	f.Fuzz(func(t *testing.T, policy, args string) {
		if len(policy) > 4096 {
			return // catalog entries are bounded by the loader; keep compile time small
		}
		trimmed := strings.TrimSpace(policy)
		compileErr := c.Compile(policy)
		if compileErr != nil {
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(compileErr))
			require.NotEmpty(t, strings.TrimSpace(compileErr.Error()))
		}
		need, why := c.NeedsApproval(policy, Call{Tool: "send_email", Args: args, TenantID: "demo",
			Caller:  &agent.Caller{Name: "ana", Roles: []string{"user"}},
			Context: agent.TurnContext{UserRole: "agent", UIPage: "/orders", Metadata: map[string]string{"env": "prod"}}})
		switch {
		case trimmed == "" || trimmed == agent.ApprovalNever:
			require.False(t, need)
			if trimmed != "" {
				require.NoError(t, compileErr, "never is a valid policy")
			}
		case trimmed == agent.ApprovalAlways:
			require.True(t, need)
			require.NoError(t, compileErr, "always is a valid policy")
		case compileErr != nil:
			require.True(t, need, "a policy that does not compile fails safe")
		}
		if need {
			require.NotEmpty(t, why, "approval says why")
		} else {
			require.Empty(t, why)
		}
	})
}

// TestCompileKeywords: "never" and "always" are valid policies, as
// Compile's documentation says, not CEL references to undeclared names.
func TestCompileKeywords(t *testing.T) {
	c, err := NewChecker()
	require.NoError(t, err)
	for _, p := range []string{"never", "always", " always "} {
		require.NoError(t, c.Compile(p), p)
	}
	require.Equal(t, agent.CodeInvalid, agent.ErrorCode(c.Compile("sometimes")))
}
