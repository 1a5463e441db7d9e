package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// testScript drives the model in these tests: arithmetic goes through the
// calculator; marked prompts make the model fail the way providers do.
const testScript = `
pacing: {chunk_words: 1, delay_ms: 15}
rules:
  - name: two-calcs
    when: {user: '(?i)^compare ([-0-9.+*/^() ]+) and ([-0-9.+*/^() ]+)$'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}, {name: calculator, arguments: '{"expression": "$2"}'}]}
  - name: story
    when: {user: '^tell a story'}
    reply: {text: '` + storyText + `'}
  - name: slow-calc
    when: {user: '^slowly, what is ([-0-9.+*/^() ]+)\?'}
    reply: {delay_ms: 1500, tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: steered
    when: {user: '^now make it about (.+)$'}
    reply: {text: 'A story about $1.'}
  - name: cut
    when: {user: '^cut a story'}
    fault: {cut_after_chunks: 25, times: 1}
    reply: {text: '` + storyText + `'}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - name: flaky
    when: {user: 'flaky'}
    fault: {status: 500, times: 2}
    reply: {text: 'recovered from 500'}
  - name: throttled
    when: {user: 'throttled'}
    fault: {status: 429, retry_after_sec: 3, times: 1}
    reply: {text: 'recovered from 429'}
  - name: rejected
    when: {user: 'rejected'}
    fault: {status: 400, times: -1, message: 'unsupported parameter: temperature'}
  - name: fallback
    reply: {text: "I don't know."}
`

// storyText is a reply long enough to stream for about a second.
const storyText = "Once upon a time a durable agent streamed its answer word by word to a client " +
	"that was watching closely, and every word arrived exactly once and in order, even when the " +
	"model call failed half way and was tried again, or the worker died and a new one took over, " +
	"or the client went away for a while and came back asking for what it had missed. The end."

const testCatalog = `
tenant: demo
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: Use the calculator for arithmetic.
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
    model_execution: activity
`

// env is a worker on a private database and task queue, with a scripted
// model, and the helpers these tests share.
type env struct {
	*testserver.Server
	t *testing.T
}

func newEnv(t *testing.T) *env { return newEnvWith(t, testScript) }

// newEnvWith is newEnv with another model script.
func newEnvWith(t *testing.T, modelScript string) *env {
	t.Helper()
	return &env{Server: testserver.Start(t, testserver.Options{Script: modelScript, Catalogs: []string{testCatalog}}), t: t}
}

// startWithCLI starts an AgentTurn exactly as docs/guides/grpc.md shows.
func (e *env) startWithCLI(workflowID, input string) {
	e.t.Helper()
	out, err := e.Temporal("workflow", "start", "--type", "AgentTurn", "--task-queue", e.TaskQueue,
		"--workflow-id", workflowID, "--input", input)
	require.NoError(e.t, err, out)
}

func (e *env) result(workflowID string) (agent.TurnResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res agent.TurnResult
	err := e.Client().GetWorkflow(ctx, workflowID, "").Get(ctx, &res)
	return res, err
}

// history is the events of a workflow's latest run.
func (e *env) history(workflowID string) []*historypb.HistoryEvent {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return testserver.History(ctx, e.t, e.Client(), workflowID, "")
}

// replay checks that the current workflow code replays a real history, and
// saves it under workflows/testdata when AGENTFLOW_RECORD_HISTORIES=1.
func (e *env) replay(workflowID, name string) {
	e.t.Helper()
	if _, err := agent.StreamTenant(workflowID); err == nil {
		// A turn recorded whole: its stream ends once the result is
		// stored, a moment before its workflow closes.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.Client().GetWorkflow(ctx, workflowID, "").Get(ctx, nil)
	}
	e.replayEvents(e.history(workflowID), name)
}

// replayEvents is replay for one run's events.
func (e *env) replayEvents(events []*historypb.HistoryEvent, name string) {
	e.t.Helper()
	testserver.Replay(e.t, events, filepath.Join("..", "..", "workflows", "testdata"), name)
}

func (e *env) resultRows(jobID string) (count int, status string, tokens int, toolCalls []byte) {
	e.t.Helper()
	ctx := context.Background()
	err := e.Store().Pool().QueryRow(ctx,
		`SELECT count(*) OVER (), status, coalesce(tokens_used, 0), coalesce(tool_calls, 'null'::jsonb)
		   FROM agent_results WHERE tenant_id = 'demo' AND job_id = $1`, jobID).
		Scan(&count, &status, &tokens, &toolCalls)
	if err != nil && strings.Contains(err.Error(), "no rows") {
		return 0, "", 0, nil
	}
	require.NoError(e.t, err)
	return count, status, tokens, toolCalls
}

func TestTurnStartedWithTemporalCLI(t *testing.T) {
	e := newEnv(t)
	job := "job-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	e.startWithCLI(id, `{"version":"1.0","job_id":"`+job+`","tenant_id":"demo","agent_id":"assistant","prompt":"What is 12.5 * 4?"}`)

	res, err := e.result(id)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, "The result is 50.", res.Output)
	require.Equal(t, job, res.JobID)
	require.Len(t, res.Metadata.ToolCalls, 1)
	require.Equal(t, "calculator", res.Metadata.ToolCalls[0].Tool)
	require.JSONEq(t, `{"expression":"12.5 * 4"}`, string(res.Metadata.ToolCalls[0].Args))
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.Positive(t, res.Metadata.TokensUsed)
	require.Equal(t, 1, res.Metadata.AgentVersion)
	require.Equal(t, "assistant", res.Metadata.AgentID)
	require.Equal(t, "explicit", res.Metadata.RouteRule)
	require.Contains(t, res.Metadata.LLMModel, "gpt-4o-mini")
	require.True(t, strings.HasPrefix(res.ResultRef, "artifact://"), res.ResultRef)

	count, status, tokens, toolCalls := e.resultRows(job)
	require.Equal(t, 1, count)
	require.Equal(t, agent.StatusCompleted, status)
	require.Equal(t, res.Metadata.TokensUsed, tokens)
	require.Contains(t, string(toolCalls), "calculator")

	stored, err := e.Store().ResultByRef(context.Background(), "demo", res.ResultRef)
	require.NoError(t, err)
	require.Equal(t, res.Output, stored.Output)

	// The Web UI sees the search attributes the workflow set.
	desc, err := e.Client().DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	tenant, ok := desc.TypedSearchAttributes.GetKeyword(contract.SearchTenant)
	require.True(t, ok)
	require.Equal(t, "demo", tenant)
	ag, ok := desc.TypedSearchAttributes.GetKeyword(contract.SearchAgent)
	require.True(t, ok)
	require.Equal(t, "assistant", ag)

	// The status query, as docs/guides/grpc.md shows it.
	out, err := e.Temporal("workflow", "query", "--workflow-id", id, "--name", contract.QueryStatus, "--output", "json")
	require.NoError(t, err, out)
	require.Contains(t, out, `"status": "COMPLETED"`)
	require.Contains(t, out, `"tool_calls": 1`)

	e.replay(id, "turn_one_tool")
}

func TestSameJobTwiceGivesOneResult(t *testing.T) {
	e := newEnv(t)
	job := "job-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	input := `{"job_id":"` + job + `","tenant_id":"demo","prompt":"What is 7 * 6?"}`

	e.startWithCLI(id, input)
	first, err := e.result(id)
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", first.Output)
	require.Equal(t, "default", first.Metadata.RouteRule)

	// A second run of the same job (the first one has closed, so Temporal
	// allows a new run under the same id) returns the stored result.
	e.startWithCLI(id, input)
	second, err := e.result(id)
	require.NoError(t, err)
	// Each run's value ends with its own log's end; the result is one.
	first.StreamTail, second.StreamTail = nil, nil
	require.Equal(t, first, second)

	count, _, _, _ := e.resultRows(job)
	require.Equal(t, 1, count)
	require.Equal(t, 1, e.Model.Served("calc"), "the model was not called again")
}

func TestBadInputFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, input, wantType, wantMsg string
		id                             string // default: not a turn/<tenant>/<job> id
	}{
		{"missing tenant", `{"prompt":"hi"}`, agent.ErrTypeInvalidRequest, "tenant_id is required", ""},
		{"empty prompt", `{"tenant_id":"demo","prompt":""}`, agent.ErrTypeInvalidRequest, "prompt is required", ""},
		{"unknown agent", `{"tenant_id":"demo","agent_id":"nobody","prompt":"hi"}`, agent.ErrTypeAgentNotFound, `"nobody"`, ""},
		{"unknown tenant", `{"tenant_id":"ghost","prompt":"hi"}`, agent.ErrTypeAgentNotFound, `"ghost"`, ""},
		{"unknown major version", `{"version":"2.0","tenant_id":"demo","prompt":"hi"}`, agent.ErrTypeInvalidRequest, `version "2.0" is not supported`, ""},
		{"malformed JSON", `{"tenant_id":["demo"],"prompt":"hi"}`, agent.ErrTypeInvalidRequest, "field tenant_id must be a string, not an array", ""},
		{"not an object", `"What is 1+1?"`, agent.ErrTypeInvalidRequest, "must be a JSON object", ""},
		{"id of another tenant", `{"tenant_id":"demo","prompt":"hi"}`, agent.ErrTypeInvalidRequest,
			`belongs to tenant "acme", but the request's tenant_id is "demo"`, "turn/acme/" + testserver.RandomID()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := tt.id
			if id == "" {
				id = "bad-input-" + testserver.RandomID()
			}
			e.startWithCLI(id, tt.input)
			_, err := e.result(id)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "want an application error, got %v", err)
			require.Equal(t, tt.wantType, app.Type())
			require.Contains(t, app.Message(), tt.wantMsg)
			require.True(t, app.NonRetryable())

			for _, ev := range e.history(id) {
				require.NotEqual(t, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, ev.GetEventType(), "nothing is retried or called")
			}
		})
	}
	// The CLI itself refuses input that is not JSON at all.
	out, err := e.Temporal("workflow", "start", "--type", "AgentTurn", "--task-queue", e.TaskQueue,
		"--workflow-id", "turn/bad/"+testserver.RandomID(), "--input", `{"tenant_id": demo}`)
	require.Error(t, err)
	require.Contains(t, strings.ToLower(out), "json")
}

func TestModelFailures(t *testing.T) {
	e := newEnv(t)
	run := func(prompt string) (string, agent.TurnResult, error) {
		job := "job-" + testserver.RandomID()
		id := contract.TurnWorkflowID("demo", job)
		input, err := json.Marshal(agent.TurnRequest{TenantID: "demo", JobID: job, Prompt: prompt})
		require.NoError(t, err)
		e.startWithCLI(id, string(input))
		res, err := e.result(id)
		return id, res, err
	}

	t.Run("500 is retried", func(t *testing.T) {
		_, res, err := run("flaky please")
		require.NoError(t, err)
		require.Equal(t, "recovered from 500", res.Output)
		require.Equal(t, 3, e.Model.Served("flaky"), "two failures, then the reply")
	})

	t.Run("429 waits for Retry-After", func(t *testing.T) {
		id, res, err := run("throttled please")
		require.NoError(t, err)
		require.Equal(t, "recovered from 429", res.Output)
		var scheduled, started time.Time
		var attempt int32
		for _, ev := range e.history(id) {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				scheduled = ev.GetEventTime().AsTime()
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				started = ev.GetEventTime().AsTime()
				attempt = ev.GetActivityTaskStartedEventAttributes().GetAttempt()
			}
		}
		require.Equal(t, int32(2), attempt)
		// The default first retry comes after 1 s; Retry-After asked for 3 s.
		require.GreaterOrEqual(t, started.Sub(scheduled), 3*time.Second)
	})

	t.Run("400 fails the turn", func(t *testing.T) {
		id, _, err := run("rejected please")
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.Equal(t, agent.ErrTypeModelRejected, app.Type())
		require.Contains(t, app.Message(), "unsupported parameter: temperature")
		var res agent.TurnResult
		require.NoError(t, app.Details(&res))
		require.Equal(t, agent.StatusFailed, res.Status)
		require.NotNil(t, res.Error)
		require.False(t, res.Error.Retryable)
		require.Equal(t, 1, e.Model.Served("rejected"), "a 400 is not retried")

		count, status, _, _ := e.resultRows(res.JobID)
		require.Equal(t, 1, count)
		require.Equal(t, agent.StatusFailed, status)
		e.replay(id, "turn_model_rejected")
	})
}

// A tool of a local kind runs as a local activity (a marker in the turn's
// history, no activity task); `execution: activity` makes it an activity.
func TestToolExecution(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	remote := strings.Replace(testCatalog, "tenant: demo", "tenant: remote", 1)
	remote = strings.Replace(remote, "    kind: calculator\n", "    kind: calculator\n    execution: activity\n", 1)
	e.ApplyCatalog(t, remote)

	for _, tt := range []struct {
		tenant           string
		activities, locs int // ExecuteTool activities; local activity markers
	}{
		{"demo", 0, 4},   // Route, LoadAgent, ExecuteTool, SaveResult
		{"remote", 1, 3}, // Route, LoadAgent, SaveResult
	} {
		t.Run(tt.tenant, func(t *testing.T) {
			req := agent.TurnRequest{TenantID: tt.tenant, JobID: "job-" + testserver.RandomID(), Prompt: "What is 6 * 7?"}
			req.Normalize()
			run, err := e.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
			require.NoError(t, err)
			var res agent.TurnResult
			require.NoError(t, run.Get(ctx, &res))
			require.Equal(t, "The result is 42.", res.Output)
			require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)

			tools, markers := 0, 0
			for _, ev := range e.history(run.GetID()) {
				switch ev.EventType {
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
					if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.ExecuteTool {
						tools++
					}
				case enumspb.EVENT_TYPE_MARKER_RECORDED:
					// Local activities' markers, not GetVersion's.
					if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
						markers++
					}
				}
			}
			require.Equal(t, tt.activities, tools)
			require.Equal(t, tt.locs, markers)
		})
	}
}
