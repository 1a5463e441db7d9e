package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// fallbackScript serves three models by name: primary-model is down
// (500 on every request, with a Retry-After of one second so that its six
// attempts take seconds, not the policy's half minute), refuses long
// stories as over its context window and refuses "refuse" outright;
// backup-model answers, but finds a very long story too long as well.
const fallbackScript = `
rules:
  - name: primary-too-long
    when: {model: '^primary-model$', user: 'long story'}
    fault: {status: 400, code: context_length_exceeded, message: "This model's maximum context length is 8192 tokens.", times: -1}
  - name: primary-refuses
    when: {model: '^primary-model$', user: 'refuse'}
    fault: {status: 400, message: 'unsupported parameter: temperature', times: -1}
  - name: primary-down
    when: {model: '^primary-model$'}
    fault: {status: 500, retry_after_sec: 1, times: -1}
  - name: backup-too-long
    when: {model: '^backup-model$', user: 'very long story'}
    fault: {status: 400, code: context_length_exceeded, message: "backup-model's maximum context length is 32768 tokens.", times: -1}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}], usage: {prompt_tokens: 50, completion_tokens: 10}}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.', usage: {prompt_tokens: 70, completion_tokens: 6}}
  - name: story
    when: {user: 'long story'}
    reply: {text: 'A long story, told by a model with room for it.'}
`

// fallbackCatalog: resilient falls back on the default error types to
// backup-model, then last-model; pair has backup-model only.
const fallbackCatalog = `
tenant: demo
tools:
  - name: calculator
    kind: calculator
agents:
  - id: resilient
    model: openai:primary-model
    fallback_models: [openai:backup-model, openai:last-model]
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 90}
  - id: pair
    model: openai:primary-model
    fallback_models: [openai:backup-model]
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// fallbackEnv is a server with fallbackScript and fallbackCatalog, traced.
type fallbackEnv struct {
	*env
	spans *spans
}

func newFallbackEnv(t *testing.T) *fallbackEnv {
	tp, spans := newTracing(t)
	srv := testserver.Start(t, testserver.Options{Script: fallbackScript, Catalogs: []string{fallbackCatalog}, TracerProvider: tp})
	return &fallbackEnv{env: &env{Server: srv, t: t}, spans: spans}
}

// run runs a turn of agentID and returns its workflow id, its result (a
// failed turn's from its failure) and its error.
func (e *fallbackEnv) run(agentID, prompt string) (string, agent.TurnResult, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", AgentID: agentID, JobID: "job-" + testserver.RandomID(), Prompt: prompt}
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
	require.NoError(e.t, err)
	var res agent.TurnResult
	err = run.Get(ctx, &res)
	if failed, ok := contract.FailedResult(err); ok {
		res = failed
	}
	return run.GetID(), res, err
}

// events is a finished turn's event log.
func (e *fallbackEnv) events(workflowID string) []agent.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := e.Client().QueryWorkflow(ctx, workflowID, "", contract.QueryEvents, agent.EventsQuery{})
	require.NoError(e.t, err)
	var page agent.EventsPage
	require.NoError(e.t, v.Get(&page))
	return page.Events
}

// requestsFor counts the requests the scripted model got for a model.
func (e *fallbackEnv) requestsFor(model string) int {
	n := 0
	for _, r := range e.Model.Requests() {
		if r.Model == model {
			n++
		}
	}
	return n
}

// callAttempts are the attempts of each CallModel of a turn, in the order
// they were started (modelCallAttempts): a local call's, which its worker
// retries, as well as a regular activity's.
func (e *fallbackEnv) callAttempts(workflowID string) []int32 {
	e.t.Helper()
	return modelCallAttempts(e.t, e.history(workflowID))
}

// requestedModels are the models the scripted model was asked for, in the
// order the requests came.
func (e *fallbackEnv) requestedModels() []string {
	var out []string
	for _, r := range e.Model.Requests() {
		out = append(out, r.Model)
	}
	return out
}

// TestFallbackAfterRetries: a primary that answers 500 on every attempt
// is retried as its policy says (six attempts of one call, a local call
// that its worker retries); then the step calls the first fallback model,
// which answers, and takes the turn's next step too. The result's
// llm_model, the ledger row, the chat span and the usage and step_finish
// events name the fallback. The history is recorded as
// turn_model_fallback.
func TestFallbackAfterRetries(t *testing.T) {
	e := newFallbackEnv(t)
	id, res, err := e.run("resilient", "During the outage: what is 6*7?")
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, "The result is 42.", res.Output)
	require.Equal(t, "openai:backup-model", res.Metadata.LLMModel)
	require.Equal(t, 6, e.Model.Served("primary-down"), "the primary's six attempts, then no more: the fallback took the second step too")
	require.Equal(t, 2, e.requestsFor("backup-model"))
	require.Zero(t, e.requestsFor("last-model"))
	require.Equal(t, []string{"primary-model", "primary-model", "primary-model", "primary-model", "primary-model", "primary-model",
		"backup-model", "backup-model"}, e.requestedModels(), "the fallback only after the primary's last attempt")
	require.Equal(t, []int32{6, 1, 1}, e.callAttempts(id), "the primary's six requests were one call's attempts; each fallback call answered at once")

	// One ledger row per answered call, under the fallback's name; the
	// step's fallback attempt is numbered after the primary's.
	rows, err := e.Store().JobUsage(context.Background(), "demo", res.JobID)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, r := range rows {
		require.Equal(t, "openai:backup-model", r.Model)
	}
	require.Equal(t, [2]int{1, 7}, [2]int{rows[0].Step, rows[0].Attempt})
	require.Equal(t, [2]int{3, 1}, [2]int{rows[1].Step, rows[1].Attempt})
	require.Equal(t, res.Metadata.TokensUsed, rows[0].Usage.TotalTokens+rows[1].Usage.TotalTokens)

	var usage, finish []string
	for _, ev := range e.events(id) {
		switch ev.Kind {
		case agent.EventUsage:
			usage = append(usage, ev.Model)
		case agent.EventStepFinish:
			finish = append(finish, ev.Model)
		}
	}
	require.Equal(t, []string{"openai:backup-model", "openai:backup-model"}, usage)
	require.Equal(t, []string{"openai:backup-model", "openai:backup-model"}, finish)

	all := e.spans.await("chat backup-model")
	require.Len(t, named(all, "chat primary-model"), 6, "one failed span per attempt of the primary")
	backup := named(all, "chat backup-model")
	require.NotEmpty(t, backup)
	require.Equal(t, "backup-model", attrs(backup[0])["gen_ai.request.model"].AsString())
	require.Equal(t, "backup-model", attrs(backup[0])["gen_ai.response.model"].AsString())

	e.replay(id, "turn_model_fallback")
}

// TestFallbackFailures: a prompt over the primary's context window falls
// back at once, without retries; a refusal of a type the agent does not
// name fails the turn without calling a fallback; a fallback that fails
// too fails the turn with its own error.
func TestFallbackFailures(t *testing.T) {
	e := newFallbackEnv(t)

	t.Run("context length falls back at once", func(t *testing.T) {
		id, res, err := e.run("resilient", "Tell me a long story.")
		require.NoError(t, err)
		require.Equal(t, "A long story, told by a model with room for it.", res.Output)
		require.Equal(t, "openai:backup-model", res.Metadata.LLMModel)
		require.Equal(t, 1, e.Model.Served("primary-too-long"), "a context-length refusal is not retried")
		require.Equal(t, []int32{1, 1}, e.callAttempts(id))
		rows, err := e.Store().JobUsage(context.Background(), "demo", res.JobID)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, "openai:backup-model", rows[0].Model)
	})

	t.Run("a type not named does not fall back", func(t *testing.T) {
		before := e.requestsFor("backup-model")
		id, res, err := e.run("resilient", "Please refuse this.")
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.Equal(t, agent.ErrTypeModelRejected, app.Type())
		require.Contains(t, app.Message(), "unsupported parameter: temperature")
		require.Equal(t, agent.StatusFailed, res.Status)
		require.Equal(t, "openai:primary-model", res.Metadata.LLMModel)
		require.Equal(t, 1, e.Model.Served("primary-refuses"))
		require.Equal(t, before, e.requestsFor("backup-model"), "no fallback was called")
		require.Equal(t, []int32{1}, e.callAttempts(id))
	})

	t.Run("the last fallback's error fails the turn", func(t *testing.T) {
		id, res, err := e.run("pair", "Tell me a very long story.")
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.Equal(t, agent.ErrTypeContextLength, app.Type())
		require.Contains(t, app.Message(), "backup-model's maximum context length is 32768 tokens")
		require.Equal(t, agent.StatusFailed, res.Status)
		require.Equal(t, agent.ErrTypeContextLength, res.Error.Type)
		require.False(t, res.Error.Retryable)
		require.Equal(t, "openai:backup-model", res.Metadata.LLMModel)
		require.Equal(t, 1, e.Model.Served("backup-too-long"))
		require.Equal(t, []int32{1, 1}, e.callAttempts(id))
		stored, err := e.Store().Result(context.Background(), "demo", res.JobID)
		require.NoError(t, err)
		require.Equal(t, agent.ErrTypeContextLength, stored.Error.Type)
		rows, err := e.Store().JobUsage(context.Background(), "demo", res.JobID)
		require.NoError(t, err)
		require.Empty(t, rows, "no call answered: nothing to pay")
	})
}
