package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestEmptyAnswerPlaceholder: a model that answers nothing (no text, or
// only white space) gives the turn its agent's placeholder as the
// answer, the seed's "No output from agent." unless the agent says
// another; an answer is kept as it is.
func TestEmptyAnswerPlaceholder(t *testing.T) {
	for _, tt := range []struct {
		name, reply, placeholder, want string
	}{
		{"nothing", "", "", agent.DefaultEmptyAnswer},
		{"white space", " \n\t", "", agent.DefaultEmptyAnswer},
		{"the agent's own", "", "I have nothing to add.", "I have nothing to add."},
		{"an answer", "Hello!", "I have nothing to add.", "Hello!"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := testAgent()
			a.EmptyAnswer = tt.placeholder
			f := &fakeTurn{agent: a, replies: []contract.CallModelResult{textReply(tt.reply)}}
			res, app := runTurn(t, newEnv(t, f), request())
			require.Nil(t, app)
			require.Equal(t, agent.StatusCompleted, res.Status)
			require.Equal(t, tt.want, res.Output)
			require.Equal(t, tt.want, f.saved[0].Output, "the placeholder is what is stored")
			require.Contains(t, string(res.ResultPreview), tt.want)
		})
	}
}

// TestResultEchoesSession: a result names the session its request named,
// in session_id or only in the job envelope's context.session_id, and so
// does a rejected turn's.
func TestResultEchoesSession(t *testing.T) {
	for _, req := range []agent.TurnRequest{
		{TenantID: "t1", JobID: "job-1", Prompt: "hi", SessionID: "s-9"},
		{TenantID: "t1", JobID: "job-1", Prompt: "hi", Context: agent.TurnContext{SessionID: "s-9"}},
	} {
		f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{textReply("Hello!")}}
		res, app := runTurn(t, newEnv(t, f), req)
		require.Nil(t, app)
		require.Equal(t, "s-9", res.SessionID)
		require.Equal(t, "s-9", f.saved[0].SessionID)
	}

	f := &fakeTurn{agent: testAgent()}
	_, app := runTurn(t, newEnv(t, f), agent.TurnRequest{TenantID: "t1", JobID: "job-1", Prompt: "hi", SessionID: "s-9", TimeoutSec: -1})
	require.NotNil(t, app)
	require.Equal(t, agent.ErrTypeInvalidRequest, app.Type())
	var rejected agent.TurnResult
	require.NoError(t, app.Details(&rejected))
	require.Equal(t, agent.StatusRejected, rejected.Status)
	require.Equal(t, "s-9", rejected.SessionID)
}

// TestModelTimeout: each attempt of a model call runs under the agent's
// model timeout, or the turn's when the agent sets none or a longer one.
func TestModelTimeout(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limits agent.Limits
		want   time.Duration
	}{
		{"the agent's", agent.Limits{TurnTimeoutSec: 60, ModelTimeoutSec: 7}, 7 * time.Second},
		{"none: the turn's", agent.Limits{TurnTimeoutSec: 60}, time.Minute},
		{"longer than the turn's", agent.Limits{TurnTimeoutSec: 60, ModelTimeoutSec: 90}, time.Minute},
		{"the default turn's", agent.Limits{}, agent.DefaultTurnTimeoutSec * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := testAgent()
			a.Limits = tt.limits
			f := &fakeTurn{agent: a, replies: []contract.CallModelResult{textReply("Hello!")}}
			res, app := runTurn(t, newEnv(t, f), request())
			require.Nil(t, app)
			require.Equal(t, agent.StatusCompleted, res.Status)
			require.Equal(t, []time.Duration{tt.want}, f.modelTimeouts)
		})
	}
}

// TestCapModelTimeout: the operator's limit lowers an agent's model
// timeout, or sets one where the agent has none; it never raises one.
func TestCapModelTimeout(t *testing.T) {
	require.Equal(t, 30, agent.Limits{}.CapModelTimeout(30*time.Second).ModelTimeoutSec)
	require.Equal(t, 30, agent.Limits{ModelTimeoutSec: 90}.CapModelTimeout(30*time.Second).ModelTimeoutSec)
	require.Equal(t, 10, agent.Limits{ModelTimeoutSec: 10}.CapModelTimeout(30*time.Second).ModelTimeoutSec)
	require.Equal(t, 10, agent.Limits{ModelTimeoutSec: 10}.CapModelTimeout(0).ModelTimeoutSec)
}
