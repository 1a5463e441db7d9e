package approval_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// TestGateNeeds: of a model's calls, those whose tool's policy asks for a
// person wait, each with the reason; a session grant that covers a
// waiting call decides it (the turn then takes the grant as its
// decision), and one whose match the arguments miss does not. Calls the
// policy lets run, and calls of tools the agent does not have, wait for
// nothing.
func TestGateNeeds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := store.Open(ctx, devtest.Database(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	registry, err := tools.NewRegistry(tools.Deps{})
	require.NoError(t, err)
	checker, err := approval.NewChecker()
	require.NoError(t, err)
	gate := approval.Gate{Checker: checker, Policies: registry, Grants: s}

	// ana approved a restart of the api service, and said to remember it
	// for the session.
	at := time.Now().Add(-time.Minute)
	apr := agent.ApprovalIDOf("run-1", 2, "c0")
	g := agent.Grant{ID: agent.GrantIDOf(apr), TenantID: "demo", Scope: agent.ScopeSession, SessionID: "s-1", JobID: "job-1",
		AgentID: "ops", Tool: "restart", Match: agent.ArgsMatch{{Path: "/service", Equals: json.RawMessage(`"api"`)}},
		CallID: "c0", ApprovalID: apr, Approver: "ana", CreatedAt: at}
	require.NoError(t, s.RecordApproval(ctx, agent.ApprovalRecord{TenantID: "demo", JobID: "job-1", CallID: "c0", Tool: "restart",
		Outcome: agent.ApprovalApproved, Approver: "ana", Via: "update", RequestedAt: at, DecidedAt: at, ApprovalID: apr,
		GrantID: g.ID, Grant: &g}))

	ops := agent.Agent{TenantID: "demo", ID: "ops", Tools: []agent.Tool{
		{Name: "lookup", Approval: agent.ApprovalNever},
		{Name: "refund", Approval: "args.amount > 100.0"},
		{Name: "restart", Approval: agent.ApprovalAlways},
	}}
	later := contract.CallModelInput{TenantID: "demo", JobID: "job-2", SessionID: "s-1"}
	call := func(id, tool, args string) agent.ToolCall { return agent.ToolCall{ID: id, Name: tool, Arguments: args} }
	tests := []struct {
		name  string
		in    contract.CallModelInput
		calls []agent.ToolCall
		want  []contract.ApprovalNeed // Grant: only its id is compared
	}{
		{"calls that wait for nothing", later, []agent.ToolCall{call("c1", "lookup", `{}`), call("c2", "refund", `{"amount": 20}`),
			call("c3", "unknown", `{}`)}, nil},
		{"a policy that holds", later, []agent.ToolCall{call("c1", "refund", `{"amount": 250}`)},
			[]contract.ApprovalNeed{{CallID: "c1", Reason: `policy "args.amount > 100.0" holds`}}},
		{"a call the session's grant covers", later, []agent.ToolCall{call("c1", "restart", `{"service": "api"}`)},
			[]contract.ApprovalNeed{{CallID: "c1", Reason: "the tool always needs approval", Grant: &g}}},
		{"a call the grant's match misses", later, []agent.ToolCall{call("c1", "restart", `{"service": "db"}`)},
			[]contract.ApprovalNeed{{CallID: "c1", Reason: "the tool always needs approval"}}},
		{"a turn of another session", contract.CallModelInput{TenantID: "demo", JobID: "job-3", SessionID: "s-2"},
			[]agent.ToolCall{call("c1", "restart", `{"service": "api"}`)},
			[]contract.ApprovalNeed{{CallID: "c1", Reason: "the tool always needs approval"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := gate.Needs(ctx, ops, tt.in, tt.calls)
			require.NoError(t, err)
			require.Equal(t, grantIDs(tt.want), grantIDs(got))
		})
	}

	// Grants that cannot be read decide nothing: the calls wait for a
	// person, and the error says why.
	s.Close()
	got, err := gate.Needs(ctx, ops, later, []agent.ToolCall{call("c1", "restart", `{"service": "api"}`)})
	require.Error(t, err)
	require.Equal(t, []contract.ApprovalNeed{{CallID: "c1", Reason: "the tool always needs approval"}}, got)
}

// grantIDs keeps of each need's grant its id, which is what names it.
func grantIDs(needs []contract.ApprovalNeed) []contract.ApprovalNeed {
	var out []contract.ApprovalNeed
	for _, n := range needs {
		if n.Grant != nil {
			n.Grant = &agent.Grant{ID: n.Grant.ID}
		}
		out = append(out, n)
	}
	return out
}
