package routing

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// Three tenants' rule sets, as a catalog would hold them. acme's rules are
// listed out of order on purpose: Compile sorts them.
var tenantRules = map[string][]agent.Rule{
	"acme": {
		{Name: "eu", Priority: 20, Condition: `has(metadata.region) && metadata.region in ["eu-west", "eu-central"]`, AgentID: "eu-desk"},
		{Name: "refunds", Priority: 50, Condition: `message.lowerAscii().contains("refund")`, AgentID: "billing"},
		{Name: "admins", Priority: 100, Condition: `"admin" in caller.roles`, AgentID: "ops"},
		{Name: "beta-testers", Priority: 60, Condition: `client.user_role == "beta"`, AgentID: "beta-desk"},
		{Name: "billing-page", Priority: 50, Condition: `ui_page.startsWith("billing")`, AgentID: "billing"},
		// Errors at run time when the request has no tier: reported, skipped.
		{Name: "gold", Priority: 40, Condition: `metadata.tier == "gold"`, AgentID: "concierge"},
		{Name: "invoice-words", Priority: 30, Condition: `message.matches("(?i)\\binvoices?\\b")`, AgentID: "billing"},
		{Name: "tie-b", Priority: 10, Condition: `ui_page == "tie"`, AgentID: "b-agent"},
		{Name: "tie-a", Priority: 10, Condition: `ui_page == "tie"`, AgentID: "a-agent"},
		{Name: "negative", Priority: -5, Condition: `ui_page == "tie" || ui_page == "last"`, AgentID: "last-resort"},
	},
	"globex": {
		{Name: "support", Priority: 5, Condition: `ui_page == "support"`, AgentID: "helpdesk"},
		{Name: "vip", Priority: 9, Condition: `metadata.?vip.orValue("no") == "yes"`, AgentID: "vip-desk"},
		{Name: "tenant-aware", Priority: 1, Condition: `tenant_id == "globex" && ui_page.split("/")[0] == "docs"`, AgentID: "docs-bot"},
		// Errors at run time on every request whose page has no "/":
		// index out of range. Lowest priority, so only reached last.
		{Name: "second-segment", Priority: 0, Condition: `ui_page.split("/")[1] == "beta"`, AgentID: "beta-desk"},
	},
	"initech": nil,
}

var defaults = map[string]string{"acme": "general", "globex": "frontline", "initech": ""}

func compileAll(t testing.TB) map[string]*Table {
	t.Helper()
	tables := map[string]*Table{}
	for tenant, rules := range tenantRules {
		tb, err := Compile(rules, nil)
		require.NoError(t, err, tenant)
		tables[tenant] = tb
	}
	return tables
}

func TestRoute(t *testing.T) {
	tables := compileAll(t)
	noTier := map[string]string{"tier": "none"}
	admin := &agent.Caller{Name: "al", Roles: []string{"user", "admin"}}
	tests := []struct {
		name, tenant string
		in           Input
		agent, rule  string
		skipped      []string // rules reported with a runtime error, in order
		notFound     bool
	}{
		{name: "admin wins over everything", tenant: "acme",
			in:    Input{Caller: admin, UIPage: "billing", Message: "refund"},
			agent: "ops", rule: "admins"},
		// The body's word is no credential: a client that says its user is
		// an admin is routed as anyone else.
		{name: "a claimed role is not the caller's", tenant: "acme",
			in:    Input{UserRole: "admin", Caller: &agent.Caller{Name: "bo", Roles: []string{"user"}}, UIPage: "home", Metadata: noTier},
			agent: "general", rule: RuleDefault},
		{name: "a client hint routes as a hint", tenant: "acme",
			in:    Input{UserRole: "beta", Metadata: noTier},
			agent: "beta-desk", rule: "beta-testers"},
		{name: "billing page prefix", tenant: "acme",
			in:    Input{UserRole: "user", UIPage: "billing/invoices"},
			agent: "billing", rule: "billing-page"},
		{name: "refund in the message, any case", tenant: "acme",
			in:    Input{Message: "I want a REFUND please"},
			agent: "billing", rule: "refunds"},
		{name: "equal priority: by name", tenant: "acme",
			in:    Input{UIPage: "billing", Message: "refund"},
			agent: "billing", rule: "billing-page"},
		{name: "gold tier", tenant: "acme",
			in:    Input{Metadata: map[string]string{"tier": "gold"}},
			agent: "concierge", rule: "gold"},
		{name: "silver tier falls through to the default", tenant: "acme",
			in:    Input{Metadata: map[string]string{"tier": "silver"}, Message: "hello"},
			agent: "general", rule: RuleDefault},
		{name: "missing tier is reported and the next rule tried", tenant: "acme",
			in:    Input{Message: "my invoice is wrong"},
			agent: "billing", rule: "invoice-words", skipped: []string{"gold"}},
		{name: "regexp respects word boundaries", tenant: "acme",
			in:    Input{Message: "invoicesXYZ", Metadata: noTier},
			agent: "general", rule: RuleDefault},
		{name: "regexp plural, any case", tenant: "acme",
			in:    Input{Message: "two Invoices", Metadata: noTier},
			agent: "billing", rule: "invoice-words"},
		{name: "eu region", tenant: "acme",
			in:    Input{Metadata: map[string]string{"tier": "x", "region": "eu-central"}},
			agent: "eu-desk", rule: "eu"},
		{name: "us region falls through", tenant: "acme",
			in:    Input{Metadata: map[string]string{"tier": "x", "region": "us-east"}},
			agent: "general", rule: RuleDefault},
		{name: "tie broken by name", tenant: "acme",
			in:    Input{UIPage: "tie", Metadata: noTier},
			agent: "a-agent", rule: "tie-a"},
		{name: "negative priority runs last", tenant: "acme",
			in:    Input{UIPage: "last", Metadata: noTier},
			agent: "last-resort", rule: "negative"},
		{name: "fallback to default", tenant: "acme",
			in:    Input{UserRole: "user", UIPage: "home", Metadata: map[string]string{"tier": "bronze"}},
			agent: "general", rule: RuleDefault},
		{name: "fallback still reports skipped rules", tenant: "acme",
			in:    Input{UIPage: "home"},
			agent: "general", rule: RuleDefault, skipped: []string{"gold"}},
		{name: "roles are case sensitive", tenant: "acme",
			in:    Input{Caller: &agent.Caller{Name: "al", Roles: []string{"Admin"}}, Metadata: noTier},
			agent: "general", rule: RuleDefault},
		{name: "a higher rule matching stops before the erroring one", tenant: "acme",
			in:    Input{UIPage: "billing"},
			agent: "billing", rule: "billing-page"},
		{name: "other tenant: support page", tenant: "globex",
			in:    Input{UIPage: "support"},
			agent: "helpdesk", rule: "support"},
		{name: "other tenant: vip outranks support", tenant: "globex",
			in:    Input{UIPage: "support", Metadata: map[string]string{"vip": "yes"}},
			agent: "vip-desk", rule: "vip"},
		{name: "other tenant: optional key absent is not an error", tenant: "globex",
			in:    Input{UIPage: "support", Metadata: map[string]string{"tier": "gold"}},
			agent: "helpdesk", rule: "support"},
		{name: "other tenant: acme's rules do not apply", tenant: "globex",
			in:    Input{Caller: admin, UIPage: "billing/x", Message: "refund"},
			agent: "frontline", rule: RuleDefault},
		{name: "other tenant: tenant_id in a condition", tenant: "globex",
			in:    Input{UIPage: "docs/api"},
			agent: "docs-bot", rule: "tenant-aware"},
		{name: "other tenant: index error reported, default used", tenant: "globex",
			in:    Input{UIPage: "home"},
			agent: "frontline", rule: RuleDefault, skipped: []string{"second-segment"}},
		{name: "other tenant: lowest rule reached", tenant: "globex",
			in:    Input{UIPage: "labs/beta"},
			agent: "beta-desk", rule: "second-segment"},
		{name: "no rules, no default: not found", tenant: "initech",
			in:       Input{Message: "hi"},
			notFound: true},
	}
	require.GreaterOrEqual(t, len(tests), 20)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.TenantID = tt.tenant
			require.True(t, bounded(&tt.in))
			d, err := tables[tt.tenant].Route(tt.in, defaults[tt.tenant])
			// The cost-tracked programs, used for large inputs, decide the same.
			dt, errt := tables[tt.tenant].route(&tt.in, defaults[tt.tenant], false)
			require.Equal(t, d, dt)
			require.Equal(t, err, errt)
			if tt.notFound {
				require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
				require.EqualError(t, err, `no routing rule matched and tenant "initech" has no default agent`)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.agent, d.AgentID)
			require.Equal(t, tt.rule, d.Rule)
			var skipped []string
			for _, e := range d.Errors {
				skipped = append(skipped, e.Rule)
				require.NotEmpty(t, e.Err)
			}
			require.Equal(t, tt.skipped, skipped, "%+v", d.Errors)
		})
	}
}

func TestRouteReportsTheCELError(t *testing.T) {
	tb, err := Compile([]agent.Rule{
		{Name: "gold", Priority: 2, Condition: `metadata.tier == "gold"`, AgentID: "concierge"},
		{Name: "any", Priority: 1, Condition: `true`, AgentID: "general"},
	}, nil)
	require.NoError(t, err)
	d, err := tb.Route(Input{}, "")
	require.NoError(t, err)
	require.Equal(t, Decision{AgentID: "general", Rule: "any",
		Errors: []agent.RuleError{{Rule: "gold", Err: "no such key: tier"}}}, d)
}

func TestRouteWithoutRules(t *testing.T) {
	var nilTable *Table
	for name, tb := range map[string]*Table{"nil table": nilTable, "empty table": must(Compile(nil, nil))} {
		t.Run(name, func(t *testing.T) {
			d, err := tb.Route(Input{TenantID: "t"}, "general")
			require.NoError(t, err)
			require.Equal(t, Decision{AgentID: "general", Rule: RuleDefault}, d)
			_, err = tb.Route(Input{TenantID: "t"}, "")
			require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
		})
	}
}

func TestRouteDoesNotDependOnListOrder(t *testing.T) {
	rules := tenantRules["acme"]
	reversed := make([]agent.Rule, len(rules))
	for i, r := range rules {
		reversed[len(rules)-1-i] = r
	}
	a, b := must(Compile(rules, nil)), must(Compile(reversed, nil))
	for _, in := range []Input{{UIPage: "tie"}, {UIPage: "billing", Message: "refund"}, {Message: "invoice"}} {
		da, err := a.Route(in, "general")
		require.NoError(t, err)
		db, err := b.Route(in, "general")
		require.NoError(t, err)
		require.Equal(t, da, db)
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
		{"syntax", []agent.Rule{ok, {Name: "broken", Condition: `ui_page ==`, AgentID: "a"}}, nil,
			`rule "broken": condition "ui_page ==": ERROR: <input>:1:11: Syntax error`},
		{"not a bool", []agent.Rule{{Name: "r", Condition: `ui_page`, AgentID: "a"}}, nil,
			`rule "r": condition "ui_page" has type string, want bool`},
		{"an int is not a bool", []agent.Rule{{Name: "r", Condition: `size(message)`, AgentID: "a"}}, nil,
			`rule "r": condition "size(message)" has type int, want bool`},
		{"dyn is not a bool", []agent.Rule{{Name: "r", Condition: `dyn(true)`, AgentID: "a"}}, nil,
			`rule "r": condition "dyn(true)" has type dyn, want bool`},
		{"unknown variable", []agent.Rule{{Name: "r", Condition: `page == "x"`, AgentID: "a"}}, nil,
			`rule "r": condition "page == \"x\"": ERROR: <input>:1:1: undeclared reference to 'page'`},
		{"user_role moved", []agent.Rule{{Name: "r", Condition: `user_role == "admin"`, AgentID: "a"}}, nil,
			`write client.user_role for that hint, or caller.roles for the roles of the caller's credential`},
		{"type mismatch", []agent.Rule{{Name: "r", Condition: `metadata.tier == 3`, AgentID: "a"}}, nil,
			`rule "r": condition "metadata.tier == 3": ERROR: <input>:1:15: found no matching overload for '_==_'`},
		{"bad regexp", []agent.Rule{{Name: "r", Condition: `message.matches("(")`, AgentID: "a"}}, nil,
			`rule "r": condition "message.matches(\"(\")": error parsing regexp`},
		{"unknown agent", []agent.Rule{ok}, []string{"b"},
			`rule "r": agent "a" is not one of the tenant's agents`},
		{"no agents known", []agent.Rule{ok}, []string{},
			`rule "r": agent "a" is not one of the tenant's agents`},
		{"duplicate name", []agent.Rule{ok, ok}, nil,
			`rule "r": the name is used by another rule`},
		{"empty condition", []agent.Rule{{Name: "r", AgentID: "a"}}, nil,
			`rule "r": condition is required`},
		{"blank condition", []agent.Rule{{Name: "r", Condition: " \n", AgentID: "a"}}, nil,
			`rule "r": condition is required`},
		{"empty agent", []agent.Rule{{Name: "r", Condition: "true"}}, nil,
			`rule "r": agent_id is required`},
		{"empty name", []agent.Rule{ok, {Condition: "true", AgentID: "a"}}, nil,
			`rules[1]: name is required`},
		{"too long", []agent.Rule{{Name: "r", Condition: "true" + strings.Repeat(" ", MaxConditionBytes), AgentID: "a"}}, nil,
			`rule "r": condition is 4100 bytes long, the limit is 4096`},
		{"too deep", []agent.Rule{{Name: "r", Condition: strings.Repeat("(", 40) + "true" + strings.Repeat(")", 40), AgentID: "a"}}, nil,
			`rule "r": condition "((((((((((((((((((((((((((((((((((((((((true))))))))))))))))))))))))))))))))))))"...: ERROR: <input>:-1:0: expression recursion limit exceeded: 32`},
		{"too many nodes", []agent.Rule{{Name: "r", Condition: strings.Repeat("1<2||", 800) + "true", AgentID: "a"}}, nil,
			`rule "r": condition "1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||1<2||"...: ERROR: <input>:-1:0: expression node count exceeds limit: count 3201, limit 2000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := Compile(tt.rules, tt.known)
			require.Nil(t, tb)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "\n", "one line, for logs and the CLI")
		})
	}
}

func TestCompileAcceptsKnownAgents(t *testing.T) {
	tb, err := Compile(tenantRules["acme"], []string{"ops", "billing", "concierge", "eu-desk", "a-agent", "b-agent", "last-resort", "beta-desk"})
	require.NoError(t, err)
	require.Equal(t, len(tenantRules["acme"]), tb.Len())
}

func TestCompileCondition(t *testing.T) {
	require.NoError(t, CompileCondition(`ui_page == "billing" && message.trim().size() > 0`))
	err := CompileCondition(`ui_page +`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "Syntax error")
}

func TestCostLimitStopsARunawayRule(t *testing.T) {
	tb, err := Compile([]agent.Rule{
		// Quadratic in the message: 250,000 string concatenations for 500
		// characters.
		{Name: "heavy", Priority: 2, Condition: `message.split("").map(c, message.split("").map(d, d + c)).size() > 0`, AgentID: "x"},
		{Name: "light", Priority: 1, Condition: `true`, AgentID: "y"},
	}, nil)
	require.NoError(t, err)
	require.Nil(t, tb.rules[0].prog.untracked, "no static bound: always tracked")
	d, err := tb.Route(Input{Message: strings.Repeat("a", 500)}, "")
	require.NoError(t, err)
	require.Equal(t, "light", d.Rule, "the runaway rule is stopped and skipped")
	require.Len(t, d.Errors, 1)
	require.Equal(t, "heavy", d.Errors[0].Rule)
	require.Contains(t, d.Errors[0].Err, "cost limit exceeded")
}

func TestCostLimitOnInputsLargerThanEstimated(t *testing.T) {
	// Quadratic in the number of metadata entries: within the limit for the
	// 64 entries the static estimate assumes, so it runs untracked for
	// such inputs; a larger input is evaluated with tracking and stopped.
	tb, err := Compile([]agent.Rule{
		{Name: "pairs", Priority: 2, Condition: `metadata.all(k, metadata.all(j, metadata[k] + metadata[j] != ""))`, AgentID: "x"},
		{Name: "light", Priority: 1, Condition: `true`, AgentID: "y"},
	}, nil)
	require.NoError(t, err)
	require.NotNil(t, tb.rules[0].prog.untracked, "statically bounded")

	meta := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprint(i)] = "v"
		}
		return m
	}
	d, err := tb.Route(Input{Metadata: meta(maxMetadataEntries)}, "")
	require.NoError(t, err)
	require.Equal(t, Decision{AgentID: "x", Rule: "pairs"}, d)

	d, err = tb.Route(Input{Metadata: meta(2000)}, "")
	require.NoError(t, err)
	require.Equal(t, "light", d.Rule)
	require.Len(t, d.Errors, 1)
	require.Equal(t, "pairs", d.Errors[0].Rule)
	require.Contains(t, d.Errors[0].Err, "cost limit exceeded")
}

func TestBounded(t *testing.T) {
	long := strings.Repeat("x", maxFieldBytes+1)
	tests := []struct {
		name string
		in   Input
		want bool
	}{
		{"empty", Input{}, true},
		{"largest prompt", Input{Message: strings.Repeat("x", agent.MaxPromptBytes)}, true},
		{"prompt too long", Input{Message: strings.Repeat("x", agent.MaxPromptBytes+1)}, false},
		{"role too long", Input{UserRole: long}, false},
		{"caller's name too long", Input{Caller: &agent.Caller{Name: long}}, false},
		{"caller's role too long", Input{Caller: &agent.Caller{Roles: []string{long}}}, false},
		{"too many caller roles", Input{Caller: &agent.Caller{Roles: make([]string, agent.MaxCallerRoles+1)}}, false},
		{"caller within bounds", Input{Caller: &agent.Caller{Name: "ana", Roles: []string{"user", "supervisor"}}}, true},
		{"page too long", Input{UIPage: long}, false},
		{"tenant too long", Input{TenantID: long}, false},
		{"metadata key too long", Input{Metadata: map[string]string{long: "v"}}, false},
		{"metadata value too long", Input{Metadata: map[string]string{"k": long}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, bounded(&tt.in))
		})
	}
}

func TestCostLimitAllowsLongPrompts(t *testing.T) {
	// Ordinary string conditions over the largest prompt a turn accepts
	// stay within the limit, even when the match is at the very end.
	tb, err := Compile([]agent.Rule{
		{Name: "refunds", Condition: `message.matches("(?i)\\bchargebacks?\\b") || message.lowerAscii().contains("refund")`, AgentID: "billing"},
	}, nil)
	require.NoError(t, err)
	msg := strings.Repeat("lorem ipsum ", agent.MaxPromptBytes/12)
	msg = msg[:agent.MaxPromptBytes-len("REFUND")] + "REFUND"
	d, err := tb.Route(Input{Message: msg}, "general")
	require.NoError(t, err)
	require.Empty(t, d.Errors)
	require.Equal(t, "refunds", d.Rule)
}

// TestConcurrentRoute shares one Table between goroutines; run with -race.
func TestConcurrentRoute(t *testing.T) {
	tb := compileAll(t)["acme"]
	type result struct {
		want string
		got  Decision
		err  error
	}
	const workers, perWorker = 16, 200
	results := make([][]result, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := range perWorker {
				in, want := Input{UserRole: "user", Metadata: map[string]string{"tier": "x"}}, "general"
				switch (w + j) % 3 {
				case 1:
					in.Caller, want = &agent.Caller{Roles: []string{"admin"}}, "ops"
				case 2:
					in.Metadata, in.Message, want = nil, "an invoice", "billing"
				}
				d, err := tb.Route(in, "general")
				results[w] = append(results[w], result{want, d, err})
			}
		})
	}
	wg.Wait()
	for _, rs := range results {
		require.Len(t, rs, perWorker)
		for _, r := range rs {
			require.NoError(t, r.err)
			require.Equal(t, r.want, r.got.AgentID)
		}
	}
}

// benchRules returns n rules at distinct priorities where only the one at
// position match (0-based, in priority order) holds for benchInput.
func benchRules(n, match int) []agent.Rule {
	rules := make([]agent.Rule, n)
	for i := range rules {
		page := fmt.Sprintf("page-%d", i)
		if i == match {
			page = "checkout"
		}
		rules[i] = agent.Rule{
			Name:      fmt.Sprintf("r%04d", i),
			Priority:  n - i,
			Condition: fmt.Sprintf(`ui_page == %q && client.user_role != "blocked" && metadata.?plan.orValue("free") != "legacy"`, page),
			AgentID:   fmt.Sprintf("agent-%d", i%10),
		}
	}
	return rules
}

var benchInput = Input{TenantID: "acme", UserRole: "user", UIPage: "checkout",
	Metadata: map[string]string{"plan": "pro", "region": "eu-west"}, Message: "Where is my order #1234?"}

// BenchmarkRoute1000Rules routes against 1,000 rules where the last (or the
// 500th) matches: the worst and a middle case of a first-match scan. The
// cost-tracked variants show what an input above the static estimate's
// bounds (e.g. more than 64 metadata entries) costs.
func BenchmarkRoute1000Rules(b *testing.B) {
	for _, c := range []struct {
		name  string
		match int
	}{{"last-matches", 999}, {"500th-matches", 499}} {
		tb := must(Compile(benchRules(1000, c.match), nil))
		want := fmt.Sprintf("r%04d", c.match)
		for _, small := range []bool{true, false} {
			name := c.name
			if !small {
				// An input larger than the static estimate assumes: every
				// rule runs with cost tracking.
				name += "/cost-tracked"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					d, err := tb.route(&benchInput, "general", small)
					if err != nil || d.Rule != want {
						b.Fatalf("got %+v, %v; want rule %s", d, err, want)
					}
				}
			})
		}
	}
}

func BenchmarkCompile1000Rules(b *testing.B) {
	rules := benchRules(1000, 999)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(rules, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
