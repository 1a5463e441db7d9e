package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/structured"
)

// outputScript answers prose, until told what is wrong with it.
const outputScript = `
rules:
  - name: repaired
    when: {user: 'required output schema'}
    reply: {text: '{"city": "Oslo"}'}
  - name: prose
    reply: {text: 'Oslo, I think.'}
`

const citySchema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`

// TestCallModelOutputSchema: with an output schema the call asks the
// model for it, and checks the final answer: prose is described for a
// repair; the repair call stores what was wrong as the step before its
// reply, and its answer, which matches, is returned as JSON, also when a
// retry reads it back from the store.
func TestCallModelOutputSchema(t *testing.T) {
	t.Parallel()
	h := newHarness(t, outputScript)
	job := randomJob()
	ag := h.loadAgent(t, job, "Where to?")

	in := callModelInput(job, ag)
	in.OutputSchema = json.RawMessage(citySchema)
	var first contract.CallModelResult
	h.execute(t, contract.CallModel, in, &first)
	require.Equal(t, "Oslo, I think.", first.Content)
	require.Empty(t, first.OutputJSON)
	require.Contains(t, first.OutputProblems, "the answer is not JSON")
	reqs := h.model.Requests()
	require.Len(t, reqs, 1)
	var format struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	require.NoError(t, json.Unmarshal(reqs[0].ResponseFormat, &format))
	require.Equal(t, "json_schema", format.Type)
	require.Equal(t, "assistant", format.JSONSchema.Name)
	require.JSONEq(t, citySchema, string(format.JSONSchema.Schema))

	repair := in
	repair.Seq, repair.Repair = 3, first.OutputProblems
	var second contract.CallModelResult
	h.execute(t, contract.CallModel, repair, &second)
	require.Equal(t, `{"city":"Oslo"}`, string(second.OutputJSON))
	require.Empty(t, second.OutputProblems)
	steps, err := h.store.Steps(context.Background(), "demo", job)
	require.NoError(t, err)
	require.Len(t, steps, 4)
	require.Equal(t, agent.Message{Role: agent.RoleUser, Content: structured.RepairPrompt(first.OutputProblems)}, steps[2])
	require.Equal(t, 1, h.model.Served("repaired"))

	var again contract.CallModelResult
	h.execute(t, contract.CallModel, repair, &again)
	require.True(t, again.Stored)
	require.Equal(t, `{"city":"Oslo"}`, string(again.OutputJSON))
	require.Equal(t, 1, h.model.Served("repaired"), "read back, not asked again")
}

// TestOutputSchemaRefused: a schema that does not compile fails the call,
// and the turn's start, for good and before the model is called.
func TestOutputSchemaRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, outputScript)
	bad := json.RawMessage(`{"type":"object","properties":{"city":{"$ref":"#/$defs/none"}}}`)

	job := randomJob()
	in := loadAgentInput(job, "Where to?")
	in.Request.OutputSchema = bad
	_, err := h.env.ExecuteActivity(contract.LoadAgent, in)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeInvalidRequest, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Message(), "output schema does not compile")

	job = randomJob()
	ag := h.loadAgent(t, job, "Where to?")
	call := callModelInput(job, ag)
	call.OutputSchema = bad
	_, err = h.env.ExecuteActivity(contract.CallModel, call)
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeInvalidRequest, app.Type())
	require.Empty(t, h.model.Requests(), "no model was called")
}
