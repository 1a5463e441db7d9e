package routing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzCondition: a routing rule's `when`, as a catalog author writes it.
// It compiles or is refused with CodeInvalid and a one-line message;
// a compiled condition evaluates against a fixed request within
// CostLimit, with and without cost tracking, to the same decision, and
// an evaluation error skips the rule with a message instead of failing
// the route.
func FuzzCondition(f *testing.F) {
	for _, s := range []string{
		`"admin" in caller.roles || client.user_role == "admin"`,
		`message.contains("refund") && metadata["tier"] == "gold"`,
		`"tier" in metadata && metadata.tier.startsWith("g")`,
		`message.lowerAscii().matches("^(order|invoice) [0-9]+$")`,
		`ui_page.startsWith("/orders") || tenant_id == "demo"`,
		`metadata.?tier.orValue("") == "gold"`,
		`message.split(" ").exists(w, w == "help")`,
		`size(message) > 10 && message.indexOf("x") >= 0`,
		`[1, 2, 3].map(x, [1, 2, 3].map(y, x * y)).size() > 0`,
		`metadata["missing"] == "x"`,
		`1 / (size(message) - size(message)) == 0`,
		`message.matches("(")`,
		`message`, `1 +`, `undefined_var == 1`, ``, "\x00", `"` + strings.Repeat("(", 100) + `"`,
		strings.Repeat("(", 40) + "true" + strings.Repeat(")", 40),
	} {
		f.Add(s, "I want a refund for order 42")
	}
	f.Fuzz(func(t *testing.T, expr, message string) {
		if err := CompileCondition(expr); err != nil {
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err))
			require.NotEmpty(t, strings.TrimSpace(err.Error()))
			require.NotContains(t, err.Error(), "\n", "one line")
			return
		}
		tb, err := Compile([]agent.Rule{{Name: "r", Condition: expr, AgentID: "matched"}}, []string{"matched"})
		require.NoError(t, err, "CompileCondition accepted it")
		in := Input{TenantID: "demo", UserRole: "admin", Caller: &agent.Caller{Name: "ana", Roles: []string{"user"}}, UIPage: "/orders/42",
			Metadata: map[string]string{"tier": "gold", "region": "eu"}, Message: message}
		var decisions []Decision
		for _, small := range []bool{false, true} {
			if small && !bounded(&in) {
				continue
			}
			d, err := tb.route(&in, "fallback", small)
			require.NoError(t, err, "a default agent always answers")
			require.Contains(t, []string{"matched", "fallback"}, d.AgentID)
			for _, e := range d.Errors {
				require.Equal(t, "r", e.Rule)
				require.NotEmpty(t, e.Err)
			}
			decisions = append(decisions, d)
		}
		if len(decisions) == 2 && len(decisions[0].Errors) == 0 && len(decisions[1].Errors) == 0 {
			require.Equal(t, decisions[0], decisions[1], "tracked and untracked programs agree")
		}
	})
}
