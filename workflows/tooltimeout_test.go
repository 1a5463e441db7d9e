package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestToolTimeout: a call runs under its tool entry's timeout_sec (any
// kind), or two minutes, never longer than the turn's timeout, the
// request's when it is shorter; it heartbeats under toolHeartbeat
// whatever its length, so a lost worker is noticed in seconds.
func TestToolTimeout(t *testing.T) {
	for _, tt := range []struct {
		name       string
		timeoutSec int
		turnSec    int
		requestSec int
		want       time.Duration
	}{
		{"the default", 0, 600, 0, agent.DefaultToolTimeout},
		{"the entry's", 900, 3600, 0, 15 * time.Minute},
		{"the agent's turn", 900, 600, 0, 10 * time.Minute},
		{"the request's turn", 900, 3600, 300, 5 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := testAgent()
			a.Tools[0].Kind, a.Tools[0].TimeoutSec = "k8s_job", tt.timeoutSec
			a.Limits.TurnTimeoutSec = tt.turnSec
			f := &fakeTurn{agent: a, replies: []contract.CallModelResult{toolReply(calc("c1", "1+1")), textReply("2")},
				tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("2")}}
			req := request()
			req.TimeoutSec = tt.requestSec
			res, app := runTurn(t, newEnv(t, f), req)
			require.Nil(t, app)
			require.Equal(t, agent.StatusCompleted, res.Status)
			require.Equal(t, []time.Duration{tt.want}, f.toolTimeouts)
			require.Equal(t, []time.Duration{toolHeartbeat}, f.toolHeartbeats)
		})
	}
}
