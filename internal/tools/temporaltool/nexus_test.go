package temporaltool

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

func TestParseNexus(t *testing.T) {
	for _, tc := range []struct {
		name, config, err string
		want              agent.NexusTool
	}{
		{name: "defaults", config: `{"endpoint":"orders","service":"orders","operation":"lookup"}`,
			want: agent.NexusTool{Endpoint: "orders", Service: "orders", Operation: "lookup", ScheduleToClose: time.Minute}},
		{name: "timeout", config: `{"endpoint":"orders","service":"orders","operation":"hold","schedule_to_close_sec":3600}`,
			want: agent.NexusTool{Endpoint: "orders", Service: "orders", Operation: "hold", ScheduleToClose: time.Hour}},
		{name: "no operation", config: `{"endpoint":"orders","service":"orders"}`, err: "operation is required"},
		{name: "no config", config: `null`, err: "endpoint, service and operation are required"},
		{name: "negative timeout", config: `{"endpoint":"e","service":"s","operation":"o","schedule_to_close_sec":-5}`, err: "schedule_to_close_sec is -5"},
		{name: "unknown field", config: `{"endpoint":"e","service":"s","operation":"o","namespace":"x"}`, err: "namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agent.ParseNexusTool(json.RawMessage(tc.config), time.Minute)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.True(t, agent.IsCode(err, agent.CodeInvalid))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNexusKind(t *testing.T) {
	p, err := reach.Parse("acme=nexus_endpoint:orders-*")
	require.NoError(t, err)
	k := Nexus(p)
	require.Equal(t, agent.ApprovalAlways, k.Approval)
	spec := agent.Tool{Name: "lookup", Kind: agent.KindNexus, Config: json.RawMessage(`{"endpoint":"orders-eu","service":"orders","operation":"lookup"}`)}
	tool, err := k.Build(spec, kind.Deps{})
	require.NoError(t, err)
	_, err = tool.Run(t.Context(), kind.Call{})
	require.Error(t, err, "the turn calls the operation; the runtime never runs it")
	require.NoError(t, k.Admit("acme", spec))
	require.ErrorContains(t, k.Admit("globex", spec), `config.endpoint: nexus_endpoint "orders-eu" is not open to tenant "globex"`)
	require.True(t, agent.ScheduledKind(agent.KindNexus))
}
