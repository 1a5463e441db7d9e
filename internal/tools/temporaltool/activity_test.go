package temporaltool

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
)

func TestParseActivity(t *testing.T) {
	for _, tc := range []struct {
		name, config, err string
		want              Activity
	}{
		{name: "defaults", config: `{"task_queue":"billing","activity_type":"Refund"}`,
			want: Activity{TaskQueue: "billing", ActivityType: "Refund", StartToClose: time.Minute, MaxAttempts: 3}},
		{name: "options", config: `{"task_queue":"billing","activity_type":"Refund","start_to_close_sec":30,"heartbeat_sec":5,"max_attempts":1}`,
			want: Activity{TaskQueue: "billing", ActivityType: "Refund", StartToClose: 30 * time.Second, Heartbeat: 5 * time.Second, MaxAttempts: 1}},
		{name: "no queue", config: `{"activity_type":"Refund"}`, err: "task_queue is required"},
		{name: "unknown field", config: `{"task_queue":"q","activity_type":"A","queue":"x"}`, err: "queue"},
		{name: "too many attempts", config: `{"task_queue":"q","activity_type":"A","max_attempts":101}`, err: "max_attempts is 101"},
		{name: "negative timeout", config: `{"task_queue":"q","activity_type":"A","start_to_close_sec":-1}`, err: "start_to_close_sec is -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseActivity(json.RawMessage(tc.config), time.Minute)
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
	a := Activity{TaskQueue: "billing", ActivityType: "RefundOrder"}
	require.NoError(t, a.Admit(p, "acme"))
	require.ErrorContains(t, a.Admit(p, "globex"), `config.task_queue: task_queue "billing" is not open to tenant "globex"`)
	a.ActivityType = "DeleteAccount"
	require.ErrorContains(t, a.Admit(p, "acme"), `config.activity_type: activity "DeleteAccount" is not open`)
	require.Error(t, a.Admit(nil, "acme"), "closed by default")
}
