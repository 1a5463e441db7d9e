package policy

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestNeedsApproval(t *testing.T) {
	c, err := New()
	require.NoError(t, err)
	admin := agent.TurnContext{UserRole: "admin", UIPage: "billing", Metadata: map[string]string{"env": "prod"}}
	tests := []struct {
		name   string
		policy string
		call   Call
		want   bool
		reason string
	}{
		{"empty is never", "", Call{Tool: "t"}, false, ""},
		{"never", "never", Call{Tool: "t"}, false, ""},
		{"always", "always", Call{Tool: "t"}, true, "always"},
		{"amount over limit", "args.amount > 100.0", Call{Args: `{"amount": 250}`}, true, "holds"},
		{"amount under limit", "args.amount > 100.0", Call{Args: `{"amount": 20}`}, false, ""},
		{"role", `user_role != "admin"`, Call{Context: admin}, false, ""},
		{"role of a guest", `user_role != "admin"`, Call{Context: agent.TurnContext{UserRole: "guest"}}, true, "holds"},
		{"metadata", `metadata.env == "prod"`, Call{Context: admin}, true, "holds"},
		{"string functions", `args.name.lowerAscii().startsWith("db")`, Call{Args: `{"name":"DB-1"}`}, true, "holds"},
		{"tool and tenant", `tool == "restart" && tenant_id == "acme"`, Call{Tool: "restart", TenantID: "acme"}, true, "holds"},
		{"missing argument fails safe", "args.amount > 100.0", Call{Args: `{}`}, true, "could not be evaluated"},
		{"missing metadata fails safe", `metadata.tier == "gold"`, Call{}, true, "could not be evaluated"},
		{"arguments not an object", "args.amount > 1.0", Call{Args: `[1]`}, true, "not a JSON object"},
		{"invalid policy fails safe", "args.amount >", Call{Args: `{}`}, true, "approval policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := c.NeedsApproval(tt.policy, tt.call)
			require.Equal(t, tt.want, got, reason)
			require.Contains(t, reason, tt.reason)
		})
	}
}

func TestCompile(t *testing.T) {
	c, err := New()
	require.NoError(t, err)
	require.NoError(t, c.Compile(`args.amount > 100.0`))
	for expr, want := range map[string]string{
		`args.amount +`:   "Syntax error",
		`"yes"`:           "want bool",
		`unknown_var > 1`: "undeclared reference",
	} {
		err := c.Compile(expr)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), expr)
		require.ErrorContains(t, err, want, expr)
	}
}

func TestConcurrentUse(t *testing.T) {
	c, err := New()
	require.NoError(t, err)
	// Each goroutine keeps its answers; the test's goroutine checks them
	// (require must not run on another goroutine).
	const callers, calls = 16, 50
	got := make([][]bool, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for range calls {
				needs, _ := c.NeedsApproval(`int(args.n) % 2 == 0`, Call{Args: `{"n": ` + string(rune('0'+i%10)) + `}`})
				got[i] = append(got[i], needs)
			}
		})
	}
	wg.Wait()
	for i, answers := range got {
		require.Len(t, answers, calls)
		for _, needs := range answers {
			require.Equal(t, i%2 == 0, needs)
		}
	}
}
