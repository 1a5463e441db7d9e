package activities

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/contract"
)

// fallbackModelScript refuses every request to gpt-4o-mini as over its
// context window and answers those to backup-model.
const fallbackModelScript = `
rules:
  - name: too-long
    when: {model: '^gpt-4o-mini$'}
    fault: {status: 400, code: context_length_exceeded, message: "This model's maximum context length is 8192 tokens.", times: -1}
  - name: backup
    when: {model: '^backup-model$'}
    reply: {text: 'From the backup.', usage: {prompt_tokens: 40, completion_tokens: 4}}
`

// TestCallModelFallback: a refusal for the context window is
// ContextLengthExceeded, for good; a call naming one of the agent's
// fallback models calls that model, and its ledger row names it under the
// step's attempt (after the failed call's); a call naming it again finds
// the reply stored and pays nothing; a model the agent does not name is
// refused.
func TestCallModelFallback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fallbackModelScript)
	cat, err := catalog.Parse(nil, "f.yaml", []byte(`
tenant: demo
agents:
  - id: resilient
    model: openai:gpt-4o-mini
    fallback_models: [openai:backup-model]
`))
	require.NoError(t, err)
	_, err = h.applyCatalog(t.Context(), cat, false)
	require.NoError(t, err)
	job := randomJob()
	in := loadAgentInput(job, "a long question")
	in.Request.AgentID, in.AgentID = "resilient", "resilient"
	var loaded contract.LoadAgentResult
	h.execute(t, contract.LoadAgent, in, &loaded)
	ag := loaded.Agent
	require.Equal(t, []string{"openai:backup-model"}, ag.FallbackModels)

	_, err = h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeContextLength, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Message(), "maximum context length is 8192 tokens")

	fb := callModelInput(job, ag)
	fb.Model, fb.AttemptBase = "openai:backup-model", 6
	var first, again contract.CallModelResult
	h.execute(t, contract.CallModel, fb, &first)
	require.Equal(t, "From the backup.", first.Content)
	require.Equal(t, "openai:backup-model", first.Model)
	require.False(t, first.Stored)
	h.execute(t, contract.CallModel, fb, &again)
	require.True(t, again.Stored)
	require.Equal(t, "openai:backup-model", again.Model)
	require.Equal(t, first.Usage, again.Usage)
	require.Equal(t, 1, h.model.Served("backup"), "the stored reply is not asked for again")

	calls, err := h.store.JobUsage(t.Context(), "demo", job)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	require.Equal(t, []any{1, 7, "openai:backup-model", 44}, []any{calls[0].Step, calls[0].Attempt, calls[0].Model, calls[0].Usage.TotalTokens})

	other := callModelInput(randomJob(), ag)
	other.Model = "openai:gpt-4o"
	_, err = h.env.ExecuteActivity(contract.CallModel, other)
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeInvalidRequest, app.Type())
	require.Contains(t, app.Message(), `model "openai:gpt-4o" is neither agent "resilient"'s model nor one of its fallback models`)
}
