package reach

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
	}{
		{name: "empty is closed", in: ""},
		{name: "entries", in: "acme=task_queue:billing-tools + activity:Refund*, *=nexus_endpoint:payments"},
		{name: "no targets", in: "acme=", err: "want <tenant>=<kind>:<pattern>"},
		{name: "no kind", in: "acme=billing", err: "want <kind>:<pattern>"},
		{name: "no pattern", in: "acme=task_queue:", err: "want <kind>:<pattern>"},
		{name: "unknown kind", in: "acme=queue:billing", err: `kind "queue" is not one of task_queue, activity, workflow, nexus_endpoint`},
		{name: "bad tenant", in: "ac me=task_queue:billing", err: "is not a tenant id or *"},
		{name: "bad glob", in: "acme=workflow:[", err: "pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, EnvAllow, "the error names the setting")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, p)
		})
	}
}

func TestAllows(t *testing.T) {
	p, err := Parse("acme=task_queue:billing-tools+activity:Refund*,*=nexus_endpoint:payments")
	require.NoError(t, err)
	for _, tc := range []struct {
		tenant string
		target Target
		want   bool
	}{
		{"acme", Target{TaskQueue, "billing-tools"}, true},
		{"globex", Target{TaskQueue, "billing-tools"}, false},
		{"acme", Target{TaskQueue, "billing-tools-2"}, false},
		{"acme", Target{Activity, "RefundOrder"}, true},
		{"acme", Target{Workflow, "RefundOrder"}, false},
		{"globex", Target{NexusEndpoint, "payments"}, true},
		{"acme", Target{NexusEndpoint, ""}, false},
	} {
		require.Equal(t, tc.want, p.Allows(tc.tenant, tc.target), "%s %+v", tc.tenant, tc.target)
	}
	var closed *Policy
	require.False(t, closed.Allows("acme", Target{TaskQueue, "billing-tools"}), "nil opens nothing")

	err = p.Check("globex", "tools[2].config.task_queue", Target{TaskQueue, "billing-tools"})
	var ae *agent.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, agent.CodeInvalid, ae.Code)
	require.ErrorContains(t, err, `tools[2].config.task_queue: task_queue "billing-tools" is not open to tenant "globex"`)
	require.NoError(t, p.Check("acme", "tools[2].config.task_queue", Target{TaskQueue, "billing-tools"}))
}

func FuzzParse(f *testing.F) {
	f.Add("acme=task_queue:billing-tools,*=nexus_endpoint:pay*")
	f.Add("a:b=c,,=,:")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err == nil {
			p.Allows("acme", Target{TaskQueue, "x"})
		}
	})
}
