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

func TestParseActivity(t *testing.T) {
	for _, tc := range []struct {
		name, config, err string
		idempotent        bool
		want              agent.ActivityTool
	}{
		{name: "at most once", config: `{"task_queue":"billing","activity_type":"Refund"}`,
			want: agent.ActivityTool{TaskQueue: "billing", ActivityType: "Refund", StartToClose: time.Minute, MaxAttempts: 1}},
		{name: "idempotent", config: `{"task_queue":"billing","activity_type":"Refund"}`, idempotent: true,
			want: agent.ActivityTool{TaskQueue: "billing", ActivityType: "Refund", StartToClose: time.Minute, MaxAttempts: 3}},
		{name: "options", config: `{"task_queue":"billing","activity_type":"Refund","start_to_close_sec":30,"heartbeat_sec":5,"max_attempts":5}`, idempotent: true,
			want: agent.ActivityTool{TaskQueue: "billing", ActivityType: "Refund", StartToClose: 30 * time.Second, Heartbeat: 5 * time.Second, MaxAttempts: 5}},
		{name: "one attempt said", config: `{"task_queue":"billing","activity_type":"Refund","max_attempts":1}`,
			want: agent.ActivityTool{TaskQueue: "billing", ActivityType: "Refund", StartToClose: time.Minute, MaxAttempts: 1}},
		{name: "retries of a write that may not deduplicate", config: `{"task_queue":"q","activity_type":"A","max_attempts":2}`, err: "declare delivery: idempotent"},
		{name: "no queue", config: `{"activity_type":"Refund"}`, err: "task_queue is required"},
		{name: "unknown field", config: `{"task_queue":"q","activity_type":"A","queue":"x"}`, err: "queue"},
		{name: "too many attempts", config: `{"task_queue":"q","activity_type":"A","max_attempts":101}`, err: "max_attempts is 101"},
		{name: "negative timeout", config: `{"task_queue":"q","activity_type":"A","start_to_close_sec":-1}`, err: "start_to_close_sec is -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agent.ParseActivityTool(json.RawMessage(tc.config), time.Minute, tc.idempotent)
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

func TestActivityAdmit(t *testing.T) {
	p, err := reach.Parse("acme=task_queue:billing+activity:Refund*")
	require.NoError(t, err)
	entry := func(typ string) agent.Tool {
		return agent.Tool{Name: "refund", Kind: agent.KindActivity, Config: json.RawMessage(`{"task_queue":"billing","activity_type":"` + typ + `"}`)}
	}
	require.NoError(t, Activity(p).Admit("acme", entry("RefundOrder")))
	require.ErrorContains(t, Activity(p).Admit("globex", entry("RefundOrder")), `config.task_queue: task_queue "billing" is not open to tenant "globex"`)
	require.ErrorContains(t, Activity(p).Admit("acme", entry("DeleteAccount")), `config.activity_type: activity "DeleteAccount" is not open`)
	require.Error(t, Activity(nil).Admit("acme", entry("RefundOrder")), "closed by default")
}

func TestActivityKind(t *testing.T) {
	p, err := reach.Parse("acme=task_queue:billing+activity:Refund*")
	require.NoError(t, err)
	k := Activity(p)
	require.Equal(t, agent.ApprovalAlways, k.Approval, "a team's activity waits for a person by default")
	spec := agent.Tool{Name: "refund", Kind: agent.KindActivity, Config: json.RawMessage(`{"task_queue":"billing","activity_type":"RefundOrder"}`)}
	tool, err := k.Build(spec, kind.Deps{})
	require.NoError(t, err)
	_, err = tool.Run(t.Context(), kind.Call{})
	require.Error(t, err, "the turn schedules the calls; the runtime never runs them")
	require.NoError(t, k.Admit("acme", spec))
	require.ErrorContains(t, k.Admit("globex", spec), "not open to tenant")
	spec.Config = json.RawMessage(`{"task_queue":"billing"}`)
	_, err = k.Build(spec, kind.Deps{})
	require.ErrorContains(t, err, "activity_type is required")
	require.ErrorContains(t, Activity(nil).Admit("acme", agent.Tool{Config: json.RawMessage(`{"task_queue":"billing","activity_type":"RefundOrder"}`)}), "not open")
}
