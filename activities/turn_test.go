package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

func saveResultInput(job, output string) contract.SaveResultInput {
	return contract.SaveResultInput{
		Request:    agent.TurnRequest{TenantID: "demo", JobID: job, AgentID: "assistant", SessionID: "session-1", Prompt: "hello"},
		WorkflowID: contract.TurnWorkflowID("demo", job),
		Result:     agent.TurnResult{JobID: job, Status: agent.StatusCompleted, Output: output},
	}
}

func TestSaveResultFirstWins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	job := randomJob()
	h.loadAgent(t, job, "hello")

	var first, second agent.TurnResult
	h.execute(t, contract.SaveResult, saveResultInput(job, "first"), &first)
	require.Equal(t, "first", first.Output)
	require.NotEmpty(t, first.ResultRef)

	// A second writer (a retry, or another run of the job) gets the
	// stored result, result_ref included.
	h.execute(t, contract.SaveResult, saveResultInput(job, "second"), &second)
	require.Equal(t, first, second)

	// The exchange went into the session once.
	msgs, err := h.store.SessionMessages(t.Context(), "demo", "session-1", 10)
	require.NoError(t, err)
	require.Equal(t, []agent.Message{
		{Role: agent.RoleUser, Content: "hello"},
		{Role: agent.RoleAssistant, Content: "first"},
	}, msgs)
}

func TestLoadAgentReturnsStoredResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	job := randomJob()
	h.loadAgent(t, job, "hello")
	var saved agent.TurnResult
	h.execute(t, contract.SaveResult, saveResultInput(job, "done before"), &saved)

	// Another run of the same job: it gets the result, not an agent.
	var res contract.LoadAgentResult
	h.execute(t, contract.LoadAgent, loadAgentInput(job, "hello"), &res)
	require.NotNil(t, res.Existing)
	require.Equal(t, saved, *res.Existing)
	require.Empty(t, res.Agent.ID)
}

func TestLoadAgentTwiceBeginsTurnOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	job := randomJob()
	first := h.loadAgent(t, job, "hello")
	again := h.loadAgent(t, job, "hello")
	require.Equal(t, first, again)

	steps, err := h.store.Steps(t.Context(), "demo", job)
	require.NoError(t, err)
	require.Equal(t, []agent.Message{{Role: agent.RoleUser, Content: "hello"}}, steps)
}
