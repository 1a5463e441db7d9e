package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// jobScript: arithmetic through the calculator; asked for the instance
// metadata, the model fetches it with a pipeline, and asks again each
// time the fetch fails.
const jobScript = `
rules:
  - name: metadata
    when: {user: '(?i)instance metadata'}
    reply:
      tool_calls: [{name: execute_pipeline, arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "http://169.254.169.254/latest/meta-data/"}]}'}]
  - name: metadata-again
    when: {tool: '^error: '}
    reply:
      tool_calls: [{name: execute_pipeline, arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "http://169.254.169.254/latest/meta-data/"}]}'}]
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
`

// jobCatalog: assistant lets a turn run on openai:gpt-4o instead of its
// own model; fixed lets no turn choose; fetcher fetches with a pipeline
// (and no egress allowlist), two iterations at most.
var jobCatalog = `
tenant: demo
default_agent: assistant
tools:
  - {name: calculator, kind: calculator}
  - {name: execute_pipeline, kind: execute_pipeline}
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    models_allowed: [openai:gpt-4o]
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
  - id: fixed
    model: openai:gpt-4o-mini
    tools: [calculator]
  - id: fetcher
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// jobEnv is an HTTP API over jobScript and jobCatalog.
func jobEnv(t *testing.T) *httpEnv {
	return newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script, o.Catalogs = jobScript, []string{jobCatalog}
	})
}

// runTurn starts req through turnclient (as the starter and the gateway
// do) and returns its workflow id and result, a failed turn's included.
func runTurn(t *testing.T, srv *testserver.Server, req agent.TurnRequest) (string, agent.TurnResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err, "a failed turn's result is its answer")
	return run.GetID(), res
}

// TestJobEnvelope: a request with the v1 job protocol's envelope — owner,
// user, retry count, creation time, the caller's workflow state — and a
// model the agent allows runs on that model at every step (the scripted
// model, the ledger and the result say so); the envelope is stored with
// the turn's request and shown in the workflow's details; the result
// says when the turn completed, as stored. A model the agent does not
// allow is refused before anything is sent. The history is recorded as
// turn_model_override.
func TestJobEnvelope(t *testing.T) {
	e := jobEnv(t)
	ctx := context.Background()
	job := "env-" + testserver.RandomID()
	before := time.Now()
	id, res := runTurn(t, e.Server, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", AgentID: "assistant", JobID: job,
		Prompt: "What is 6 * 7?", Model: "openai:gpt-4o", WorkflowOwner: "sdutt", UserID: "u-7", RetryCount: 1, CreatedAt: "2024-10-12T10:30:00Z",
		Context: agent.TurnContext{WorkflowState: json.RawMessage(`{"current_step": 5, "total_steps": 10}`)}})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "The result is 42.", res.Output)
	require.Equal(t, "openai:gpt-4o", res.Metadata.LLMModel)
	require.WithinRange(t, res.CompletedAt, before.Add(-time.Second), time.Now().Add(time.Second))

	var models []string
	for _, r := range e.Model.Requests() {
		models = append(models, r.Model)
	}
	require.Equal(t, []string{"gpt-4o", "gpt-4o"}, models, "both steps on the turn's model")
	calls, err := e.Store().JobUsage(ctx, "demo", job)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	for _, c := range calls {
		require.Equal(t, "openai:gpt-4o", c.Model)
	}

	stored, err := e.Store().Result(ctx, "demo", job)
	require.NoError(t, err)
	require.True(t, res.CompletedAt.Equal(stored.CompletedAt), "the result is the stored one: %s, %s", res.CompletedAt, stored.CompletedAt)
	turn, err := e.Store().Turn(ctx, "demo", job)
	require.NoError(t, err)
	r := turn.Request
	require.Equal(t, []any{"sdutt", "u-7", 1, "2024-10-12T10:30:00Z", "openai:gpt-4o"}, []any{r.WorkflowOwner, r.UserID, r.RetryCount, r.CreatedAt, r.Model})
	require.JSONEq(t, `{"current_step": 5, "total_steps": 10}`, string(r.Context.WorkflowState))
	_, details := e.UserMetadata(t, id)
	require.Contains(t, details, "model `openai:gpt-4o` · owner `sdutt` · user `u-7` · retry 1 · created 2024-10-12T10:30:00Z · "+
		"workflow state `{\"current_step\":5,\"total_steps\":10}`")
	(&env{Server: e.Server, t: t}).replay(id, "turn_model_override")

	// A retry of the job (the next retry_count) is the same request: it
	// gets the stored result; another user's request under the job id is
	// another request.
	_, again := runTurn(t, e.Server, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", AgentID: "assistant", JobID: job,
		Prompt: "What is 6 * 7?", Model: "openai:gpt-4o", WorkflowOwner: "sdutt", UserID: "u-7", RetryCount: 2, CreatedAt: "2024-10-12T10:31:00Z",
		Context: agent.TurnContext{WorkflowState: json.RawMessage(`{"total_steps": 10, "current_step": 5}`)}})
	require.Equal(t, res.ResultRef, again.ResultRef)
	require.Len(t, e.Model.Requests(), 2, "the retry called no model")

	// Models the agents do not allow: refused, nothing sent. Through
	// Temporal the turn is rejected when it loads the agent; the gateway
	// refuses the request before it starts one.
	for _, tt := range []struct{ agentID, model, want string }{
		{"fixed", "openai:gpt-4o", `model "openai:gpt-4o": agent "fixed" does not let a turn choose its model (it runs on openai:gpt-4o-mini; list the models a turn may name under models_allowed)`},
		{"assistant", "openai:o3", `model "openai:o3": agent "assistant" lets a turn choose only openai:gpt-4o (models_allowed) or its own openai:gpt-4o-mini`},
	} {
		_, res := runTurn(t, e.Server, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", AgentID: tt.agentID,
			JobID: "refused-" + testserver.RandomID(), Prompt: "What is 1 + 1?", Model: tt.model})
		require.Equal(t, agent.StatusRejected, res.Status)
		require.Equal(t, agent.CodePermissionDenied.Class().Type, res.Error.Type)
		require.Equal(t, tt.want, res.Error.Message)
		require.False(t, res.CompletedAt.IsZero(), "a rejected turn says when too")

		p := e.problem("POST", "/v1/turns:invoke", e.user, `{"agent_id": "`+tt.agentID+`", "model": "`+tt.model+`", "prompt": "What is 1 + 1?"}`, http.StatusForbidden)
		require.Contains(t, p.Detail, tt.want)
	}
	require.Len(t, e.Model.Requests(), 2, "no model call for a refused model")
}

// TestJobEnvelopeOverHTTP: the seed's job message, envelope and all, is
// read by the HTTP API (a field it did not know would be refused, not
// dropped), and the result carries completed_at; bad envelope values are
// refused with what is wrong.
func TestJobEnvelopeOverHTTP(t *testing.T) {
	e := jobEnv(t)
	job := "http-" + testserver.RandomID()
	var res pb.TurnResult
	e.ok("POST", "/v1/turns:invoke", e.user, `{"version": "1.0", "job_id": "`+job+`", "run_id": "run-2024-001",
		"node_id": "agent_analyze_data", "workflow_tag": "main", "workflow_owner": "sdutt", "user_id": "sdutt",
		"prompt": "What is 12.5 * 4?", "context": {"workflow_state": {"current_step": 5, "total_steps": 10}},
		"timeout_sec": 300, "retry_count": 0, "created_at": "2024-10-12T10:30:00Z"}`, &res)
	require.Equal(t, agent.StatusCompleted, res.GetStatus())
	require.Equal(t, "The result is 50.", res.GetOutput())
	require.NotNil(t, res.GetCompletedAt())
	require.WithinDuration(t, time.Now(), res.GetCompletedAt().AsTime(), time.Minute)

	turn, err := e.Store().Turn(context.Background(), "demo", job)
	require.NoError(t, err)
	require.Equal(t, []any{"sdutt", "sdutt", 0, "2024-10-12T10:30:00Z"}, []any{turn.Request.WorkflowOwner, turn.Request.UserID,
		turn.Request.RetryCount, turn.Request.CreatedAt})
	require.JSONEq(t, `{"current_step": 5, "total_steps": 10}`, string(turn.Request.Context.WorkflowState))

	var stored pb.TurnResult
	e.ok("GET", "/v1/results?result_ref="+url.QueryEscape(res.GetResultRef()), e.user, "", &stored)
	require.True(t, stored.GetCompletedAt().AsTime().Equal(res.GetCompletedAt().AsTime()))

	for body, want := range map[string]string{
		`{"prompt": "hi", "retry_count": -1}`:                           "retry_count -1: want 0 (the first attempt) to 10000",
		`{"prompt": "hi", "user_id": "two words"}`:                      `user_id "two words" may not contain spaces`,
		`{"prompt": "hi", "model": "gpt-4o"}`:                           `model "gpt-4o": want "provider:model"`,
		`{"prompt": "hi", "context": {"workflow_state": "step 5"}}`:     `unexpected token "step 5"`,
		`{"prompt": "hi", "created_at": "yesterday"}`:                   `invalid google.protobuf.Timestamp value "yesterday"`,
		`{"prompt": "hi", "workflow_owner": "sdutt", "owner": "sdutt"}`: `unknown field "owner"`,
	} {
		p := e.problem("POST", "/v1/turns:invoke", e.user, body, http.StatusBadRequest)
		require.Contains(t, p.Detail, want, body)
	}
}

// TestErrorNamesToolAndStep: a turn that fails because the model kept
// calling a pipeline whose http_request step failed names the tool and
// the step in its error (and the step in the call's record), in the
// result, the stored result and the HTTP API's answer.
func TestErrorNamesToolAndStep(t *testing.T) {
	e := jobEnv(t)
	job := "meta-" + testserver.RandomID()
	_, res := runTurn(t, e.Server, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", AgentID: "fetcher", JobID: job,
		Prompt: "show me the instance metadata"})
	require.Equal(t, agent.StatusFailed, res.Status)
	require.Equal(t, agent.ErrTypeMaxIterations, res.Error.Type)
	require.Equal(t, []string{"execute_pipeline", "http_request"}, []string{res.Error.Tool, res.Error.Step})
	require.Len(t, res.Metadata.ToolCalls, 2)
	for _, c := range res.Metadata.ToolCalls {
		require.Equal(t, []string{agent.ToolError, "http_request"}, []string{c.Status, c.Step})
	}
	require.False(t, res.CompletedAt.IsZero())

	stored, err := e.Store().Result(context.Background(), "demo", job)
	require.NoError(t, err)
	require.Equal(t, res.Error, stored.Error)

	var viaHTTP pb.TurnResult
	e.ok("POST", "/v1/turns:invoke", e.user, `{"agent_id": "fetcher", "prompt": "show me the instance metadata"}`, &viaHTTP)
	require.Equal(t, agent.StatusFailed, viaHTTP.GetStatus())
	require.Equal(t, []string{"execute_pipeline", "http_request"}, []string{viaHTTP.GetError().GetTool(), viaHTTP.GetError().GetStep()})

	// A turn that fails in a model call names no tool.
	_, plain := runTurn(t, e.Server, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", AgentID: "assistant",
		JobID: "refused-" + testserver.RandomID(), Prompt: "no rule answers this"})
	require.Equal(t, agent.StatusFailed, plain.Status)
	require.Equal(t, agent.ErrTypeModelRejected, plain.Error.Type)
	require.Empty(t, plain.Error.Tool)
	require.Empty(t, plain.Error.Step)
}
