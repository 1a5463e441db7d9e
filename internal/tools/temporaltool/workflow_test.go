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

func TestParseWorkflow(t *testing.T) {
	for _, tc := range []struct {
		name, config, err string
		want              agent.WorkflowTool
	}{
		{name: "defaults", config: `{"task_queue":"refunds","workflow_type":"AwaitRefund"}`,
			want: agent.WorkflowTool{TaskQueue: "refunds", WorkflowType: "AwaitRefund", ExecutionTimeout: time.Minute, ParentClose: agent.ParentCloseRequestCancel}},
		{name: "options", config: `{"task_queue":"refunds","workflow_type":"AwaitRefund","execution_timeout_sec":86400,"parent_close_policy":"abandon"}`,
			want: agent.WorkflowTool{TaskQueue: "refunds", WorkflowType: "AwaitRefund", ExecutionTimeout: 24 * time.Hour, ParentClose: agent.ParentCloseAbandon}},
		{name: "no type", config: `{"task_queue":"refunds"}`, err: "workflow_type is required"},
		{name: "no config", config: ``, err: "task_queue and workflow_type are required"},
		{name: "unknown policy", config: `{"task_queue":"q","workflow_type":"W","parent_close_policy":"ignore"}`, err: `parent_close_policy "ignore"`},
		{name: "too long", config: `{"task_queue":"q","workflow_type":"W","execution_timeout_sec":2592001}`, err: "execution_timeout_sec is 2592001"},
		{name: "unknown field", config: `{"task_queue":"q","workflow_type":"W","retry":3}`, err: "retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agent.ParseWorkflowTool(json.RawMessage(tc.config), time.Minute)
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

func TestWorkflowKind(t *testing.T) {
	p, err := reach.Parse("acme=task_queue:refunds+workflow:Await*")
	require.NoError(t, err)
	k := Workflow(p)
	require.Equal(t, agent.ApprovalAlways, k.Approval)
	spec := agent.Tool{Name: "refund", Kind: agent.KindWorkflow, Config: json.RawMessage(`{"task_queue":"refunds","workflow_type":"AwaitRefund"}`)}
	tool, err := k.Build(spec, kind.Deps{})
	require.NoError(t, err)
	_, err = tool.Run(t.Context(), kind.Call{})
	require.Error(t, err, "the turn starts the calls; the runtime never runs them")
	require.NoError(t, k.Admit("acme", spec))
	require.ErrorContains(t, k.Admit("globex", spec), `config.task_queue: task_queue "refunds" is not open to tenant "globex"`)
	spec.Config = json.RawMessage(`{"task_queue":"refunds","workflow_type":"DeleteEverything"}`)
	require.ErrorContains(t, k.Admit("acme", spec), `config.workflow_type: workflow "DeleteEverything" is not open`)
	require.True(t, agent.ScheduledKind(agent.KindWorkflow))
}
