package approval

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestNeedsApproval(t *testing.T) {
	c, err := NewChecker()
	require.NoError(t, err)
	admin := agent.TurnContext{UserRole: "admin", UIPage: "billing", Metadata: map[string]string{"env": "prod"}}
	supervisor := &agent.Caller{Name: "ana", Roles: []string{"user", "supervisor"}}
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
		{"client's role hint", `client.user_role != "admin"`, Call{Context: admin}, false, ""},
		{"client's role hint of a guest", `client.user_role != "admin"`, Call{Context: agent.TurnContext{UserRole: "guest"}}, true, "holds"},
		{"caller's role", `!("supervisor" in caller.roles)`, Call{Caller: supervisor}, false, ""},
		{"caller without the role", `!("supervisor" in caller.roles)`, Call{Caller: &agent.Caller{Name: "bo", Roles: []string{"user"}}}, true, "holds"},
		// What the body says is no credential: a user token that claims
		// to be a supervisor in its context still needs approval.
		{"claimed role is not the caller's", `!("supervisor" in caller.roles)`,
			Call{Caller: &agent.Caller{Name: "bo", Roles: []string{"user"}}, Context: agent.TurnContext{UserRole: "supervisor"}}, true, "holds"},
		{"no caller has no roles", `!("supervisor" in caller.roles)`, Call{Context: agent.TurnContext{UserRole: "supervisor"}}, true, "holds"},
		{"caller's name", `caller.name != "ana"`, Call{Caller: supervisor}, false, ""},
		{"no caller has no name", `caller.name == ""`, Call{}, true, "holds"},
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
	c, err := NewChecker()
	require.NoError(t, err)
	require.NoError(t, c.Compile(`args.amount > 100.0`))
	for expr, want := range map[string]string{
		`args.amount +`:        "Syntax error",
		`"yes"`:                "want bool",
		`unknown_var > 1`:      "undeclared reference",
		`user_role == "admin"`: "write client.user_role for that hint, or caller.roles",
	} {
		err := c.Compile(expr)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), expr)
		require.ErrorContains(t, err, want, expr)
	}
}

func TestConcurrentUse(t *testing.T) {
	c, err := NewChecker()
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

func TestStrictest(t *testing.T) {
	c, err := NewChecker()
	require.NoError(t, err)
	tests := []struct {
		name     string
		policies []string
		want     string
	}{
		{"nothing", nil, "never"},
		{"empty and never", []string{"", "never", " never "}, "never"},
		{"always wins", []string{"args.x > 1", "always", "never"}, "always"},
		{"one expression", []string{"never", "args.x > 1"}, "args.x > 1"},
		{"the same twice", []string{"args.x > 1", " args.x > 1"}, "args.x > 1"},
		{"two expressions", []string{"args.x > 1", "args.y > 1"}, "(args.x > 1\n) || (args.y > 1\n)"},
		// A comment in one expression must not swallow the next.
		{"a comment", []string{"true // the kind's default", "args.y > 1"}, "(true // the kind's default\n) || (args.y > 1\n)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Strictest(tt.policies...)
			require.Equal(t, tt.want, got)
			require.NoError(t, c.Compile(got))
		})
	}
	// The combination needs approval whenever one of them does.
	combined := Strictest("args.x > 1", "args.y > 1")
	for _, tt := range []struct {
		args string
		want bool
	}{{`{"x":2,"y":0}`, true}, {`{"x":0,"y":2}`, true}, {`{"x":0,"y":0}`, false}} {
		got, why := c.NeedsApproval(combined, Call{Args: tt.args})
		require.Equal(t, tt.want, got, "%s: %s", tt.args, why)
	}
}
