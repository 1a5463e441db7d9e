package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestDatabaseOutage: a database that is away for a while delays the turn
// — every step waits and runs again — and the turn completes with one
// stored result.
func TestDatabaseOutage(t *testing.T) {
	for _, down := range []int{3, 12, 40} {
		f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{toolReply(calc("c1", "1+1")), textReply("2")},
			tools:  map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("2")},
			dbDown: down}
		env := newEnv(t, f)
		res, failure := runTurn(t, env, request())
		require.Nil(t, failure, "down for %d attempts", down)
		require.Equal(t, agent.StatusCompleted, res.Status)
		require.Len(t, f.saved, 1)
		require.Equal(t, down, f.dbFailed)
	}
}

// TestDatabaseOutageOutlastsTheTurn: a turn that cannot start within its
// timeout is rejected with the database's failure; nothing is stored.
func TestDatabaseOutageOutlastsTheTurn(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{textReply("hi")}, dbDown: 1 << 30}
	env := newEnv(t, f)
	req := request()
	req.TimeoutSec = 60
	_, failure := runTurn(t, env, req)
	require.NotNil(t, failure)
	require.Equal(t, agent.ErrTypeUnavailable, failure.Type())
	require.Contains(t, failure.Message(), "the database did not answer Route within the turn's timeout")
	require.NotContains(t, failure.Message(), "127.0.0.1", "the details are in the log")
	require.Empty(t, f.saved)
}

// TestSavingWaitsForTheDatabase: a turn whose work is done waits as long
// as it takes to store its result, past its own timeout.
func TestSavingWaitsForTheDatabase(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{textReply("done")}, saveDown: 200}
	env := newEnv(t, f)
	req := request()
	req.TimeoutSec = 30
	start := env.Now()
	res, failure := runTurn(t, env, req)
	require.Nil(t, failure)
	require.Equal(t, "done", res.Output)
	require.Len(t, f.saved, 1)
	require.Greater(t, env.Now().Sub(start), 10*time.Minute, "it waited out a long outage")
}

// TestLocalToolOutlastsTheDatabase: a local tool call that cannot reach
// the database runs again once it is back, past its own retries, and the
// model reads its result, not the outage.
func TestLocalToolOutlastsTheDatabase(t *testing.T) {
	down := 10 // more than a call's attempts (toolRetry), several times over
	ag := testAgent()
	ag.Tools[0].Execution = agent.ToolLocal
	f := &fakeTurn{agent: ag, replies: []contract.CallModelResult{toolReply(calc("c1", "12.5 * 4")), textReply("done")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){
			"calculator": func(in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
				if down > 0 {
					down--
					return contract.ExecuteToolResult{}, contract.Failure(agent.Errorf(agent.CodeUnavailable, "dial tcp 127.0.0.1:5432: connect: connection refused"))
				}
				return okTool("50")(in)
			},
		}}
	env := newEnv(t, f)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, "done", res.Output)
	require.Len(t, f.toolCalls, 11, "ten calls failed, the eleventh ran")
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.Empty(t, f.modelCalls[1].ToolFailures)
}
