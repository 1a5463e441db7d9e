package routing

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// Two tenants' rule sets, as a catalog would hold them.
var tenantRules = map[string][]agent.Rule{
	"acme": {
		{Name: "admins", Priority: 100, Condition: `user_role == "admin"`, AgentID: "ops"},
		{Name: "billing-page", Priority: 50, Condition: `ui_page.startsWith("billing")`, AgentID: "billing"},
		{Name: "refunds", Priority: 50, Condition: `message.lowerAscii().contains("refund")`, AgentID: "billing"},
		{Name: "gold", Priority: 40, Condition: `metadata.tier == "gold"`, AgentID: "concierge"},
		{Name: "invoice-words", Priority: 30, Condition: `message.matches("(?i)\\binvoices?\\b")`, AgentID: "billing"},
		{Name: "eu", Priority: 20, Condition: `has(metadata.region) && metadata.region in ["eu-west", "eu-central"]`, AgentID: "eu-desk"},
		{Name: "tie-b", Priority: 10, Condition: `ui_page == "tie"`, AgentID: "b-agent"},
		{Name: "tie-a", Priority: 10, Condition: `ui_page == "tie"`, AgentID: "a-agent"},
	},
	"globex": {
		{Name: "support", Priority: 5, Condition: `ui_page == "support"`, AgentID: "helpdesk"},
		{Name: "vip", Priority: 9, Condition: `has(metadata.vip) && metadata.vip == "yes"`, AgentID: "vip-desk"},
	},
	"empty": nil,
}

var defaults = map[string]string{"acme": "general", "globex": "frontline", "empty": ""}

func TestRoute(t *testing.T) {
	tables := map[string]*Table{}
	for tenant, rules := range tenantRules {
		tb, err := Compile(rules, nil)
		require.NoError(t, err, tenant)
		tables[tenant] = tb
	}
	tests := []struct {
		name, tenant string
		in           Input
		agent, rule  string
		errs         []string // rules skipped with a runtime error
		notFound     bool
	}{
		{"admin wins over everything", "acme", Input{UserRole: "admin", UIPage: "billing", Message: "refund"}, "ops", "admins", []string{"gold"}[:0], false},
		{"billing page", "acme", Input{UserRole: "user", UIPage: "billing/invoices"}, "billing", "billing-page", nil, false},
		{"refund in the message", "acme", Input{Message: "I want a REFUND please"}, "billing", "refunds", nil, false},
		{"same priority, by name", "acme", Input{UIPage: "billing", Message: "refund"}, "billing", "billing-page", nil, false},
		{"gold tier", "acme", Input{Metadata: map[string]string{"tier": "gold"}}, "concierge", "gold", nil, false},
		{"silver tier falls through", "acme", Input{Metadata: map[string]string{"tier": "silver"}, Message: "hello"}, "general", "default", nil, false},
		{"missing tier is reported and skipped", "acme", Input{Message: "my invoice is wrong"}, "billing", "invoice-words", []string{"gold"}, false},
		{"regexp word boundary", "acme", Input{Message: "invoicesXYZ", Metadata: map[string]string{"tier": "none"}}, "general", "default", nil, false},
		{"regexp plural", "acme", Input{Message: "two Invoices", Metadata: map[string]string{"tier": "none"}}, "billing", "invoice-words", nil, false},
		{"eu region", "acme", Input{Metadata: map[string]string{"tier": "x", "region": "eu-central"}}, "eu-desk", "eu", nil, false},
		{"us region falls through", "acme", Input{Metadata: map[string]string{"tier": "x", "region": "us-east"}}, "general", "default", nil, false},
		{"tie broken by name", "acme", Input{UIPage: "tie", Metadata: map[string]string{"tier": "x"}}, "a-agent", "tie-a", nil, false},
		{"fallback to default", "acme", Input{UserRole: "user", UIPage: "home", Metadata: map[string]string{"tier": "bronze"}}, "general", "default", nil, false},
		{"fallback after errors", "acme", Input{UIPage: "home"}, "general", "default", []string{"gold"}, false},
		{"roles are case sensitive", "acme", Input{UserRole: "Admin", Metadata: map[string]string{"tier": "x"}}, "general", "default", nil, false},
		{"other tenant: support page", "globex", Input{UIPage: "support"}, "helpdesk", "support", nil, false},
		{"other tenant: vip first", "globex", Input{UIPage: "support", Metadata: map[string]string{"vip": "yes"}}, "vip-desk", "vip", nil, false},
		{"other tenant ignores acme rules", "globex", Input{UserRole: "admin", UIPage: "billing"}, "frontline", "default", nil, false},
		{"other tenant default", "globex", Input{}, "frontline", "default", nil, false},
		{"no rules, no default", "empty", Input{Message: "hi"}, "", "", nil, true},
		{"acme default with nil metadata", "acme", Input{Message: "hello"}, "general", "default", []string{"gold"}, false},
		{"tenant id in a rule's input does not matter for acme", "acme", Input{TenantID: "globex", UIPage: "support", Metadata: map[string]string{"tier": "x"}}, "general", "default", nil, false},
	}
	require.GreaterOrEqual(t, len(tests), 20)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.TenantID = tt.tenant
			d, err := tables[tt.tenant].Route(tt.in, defaults[tt.tenant])
			if tt.notFound {
				require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
				require.ErrorContains(t, err, "no routing rule matched")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.agent, d.AgentID)
			require.Equal(t, tt.rule, d.Rule)
			var errs []string
			for _, e := range d.Errors {
				errs = append(errs, e.Rule)
				require.Contains(t, e.Err, "no such key")
			}
			require.Equal(t, len(tt.errs), len(errs), "%v", d.Errors)
		})
	}
}

func TestCompileErrors(t *testing.T) {
	ok := agent.Rule{Name: "r", Priority: 1, Condition: "true", AgentID: "a"}
	tests := []struct {
		name  string
		rules []agent.Rule
		known []string
		want  string
	}{
		{"syntax", []agent.Rule{{Name: "r", Condition: `ui_page ==`, AgentID: "a"}}, nil, `rule "r": condition "ui_page ==": ERROR`},
		{"not a bool", []agent.Rule{{Name: "r", Condition: `ui_page`, AgentID: "a"}}, nil, `evaluates to string, want bool`},
		{"unknown variable", []agent.Rule{{Name: "r", Condition: `page == "x"`, AgentID: "a"}}, nil, `undeclared reference to 'page'`},
		{"unknown agent", []agent.Rule{ok}, []string{"b"}, `rule "r": agent "a" is not one of the tenant's agents`},
		{"duplicate name", []agent.Rule{ok, ok}, nil, `rule "r" appears twice`},
		{"empty condition", []agent.Rule{{Name: "r", AgentID: "a"}}, nil, `rule "r": condition is required`},
		{"no agent", []agent.Rule{{Name: "r", Condition: "true"}}, nil, `rule "r": agent is required`},
		{"no name", []agent.Rule{{Condition: "true", AgentID: "a"}}, nil, `rules[0]: name is required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.rules, tt.known)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCostLimit(t *testing.T) {
	tb, err := Compile([]agent.Rule{
		{Name: "heavy", Priority: 2, Condition: `message.split("").map(c, message.split("").map(d, d + c)).size() > 0`, AgentID: "x"},
		{Name: "light", Priority: 1, Condition: `true`, AgentID: "y"},
	}, nil)
	require.NoError(t, err)
	d, err := tb.Route(Input{Message: fmt.Sprintf("%0500d", 0)}, "")
	require.NoError(t, err)
	require.Equal(t, "light", d.Rule, "the runaway rule is stopped and skipped")
	require.Len(t, d.Errors, 1)
	require.Contains(t, d.Errors[0].Err, "cost limit")
}

func TestConcurrentRoute(t *testing.T) {
	tb, err := Compile(tenantRules["acme"], nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 200 {
				role := "user"
				if (i+j)%2 == 0 {
					role = "admin"
				}
				d, err := tb.Route(Input{UserRole: role, Metadata: map[string]string{"tier": "x"}}, "general")
				require.NoError(t, err)
				if role == "admin" {
					require.Equal(t, "ops", d.AgentID)
				} else {
					require.Equal(t, "general", d.AgentID)
				}
			}
		})
	}
	wg.Wait()
}

func benchRules(n, match int) []agent.Rule {
	rules := make([]agent.Rule, n)
	for i := range rules {
		rules[i] = agent.Rule{Name: fmt.Sprintf("r%04d", i), Priority: n - i,
			Condition: fmt.Sprintf(`ui_page == "page-%d" && user_role != "blocked"`, i), AgentID: "a"}
	}
	_ = match
	return rules
}

// BenchmarkRoute1000Rules routes against 1,000 rules where the last (or the
// 500th) matches: the worst and a middle case of a first-match scan.
func BenchmarkRoute1000Rules(b *testing.B) {
	tb, err := Compile(benchRules(1000, 0), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		page string
	}{{"last-matches", "page-999"}, {"500th-matches", "page-499"}, {"none-matches", "page-x"}} {
		b.Run(c.name, func(b *testing.B) {
			in := Input{UserRole: "user", UIPage: c.page, Metadata: map[string]string{}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tb.Route(in, "general"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCompile1000Rules(b *testing.B) {
	rules := benchRules(1000, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(rules, nil); err != nil {
			b.Fatal(err)
		}
	}
}
