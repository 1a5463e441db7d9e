package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestWorkflowIDNamesTheTenant: a turn started as another tenant's id is
// refused before it reads or runs anything; ids of another form are the
// starter's own and run.
func TestWorkflowIDNamesTheTenant(t *testing.T) {
	tests := []struct {
		id     string
		reject bool
	}{
		{"turn/t1/job-1", false},
		{"turn/acme/job-1", true},
		{"my-own-id", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{textReply("hi")}}
			env := newEnv(t, f)
			env.SetStartWorkflowOptions(clientStartOptions(tt.id))
			res, failure := runTurn(t, env, request())
			if !tt.reject {
				require.Nil(t, failure)
				require.Equal(t, agent.StatusCompleted, res.Status)
				return
			}
			require.NotNil(t, failure)
			require.Equal(t, agent.ErrTypeInvalidRequest, failure.Type())
			require.Contains(t, failure.Message(), `workflow id "turn/acme/job-1" belongs to tenant "acme", but the request's tenant_id is "t1"`)
			require.Empty(t, f.modelCalls)
			require.Empty(t, f.saved)
		})
	}
}
