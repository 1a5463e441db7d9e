package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// promiseScript: arithmetic through the calculator; a model that says
// nothing; one whose first call hangs.
const promiseScript = `
rules:
  - name: silent
    when: {user: '^say nothing'}
    reply: {text: ' '}
  - name: hung
    when: {user: '^hang'}
    fault: {stall: true, times: 1}
    reply: {text: 'answered the retry'}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
`

// promiseCatalog: assistant answers with the seed's placeholder when its
// model says nothing, terse with its own; hasty gives each model call a
// second.
const promiseCatalog = `
tenant: demo
default_agent: assistant
tools:
  - {name: calculator, kind: calculator}
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
  - id: terse
    model: openai:gpt-4o-mini
    empty_answer: (no answer)
  - id: hasty
    model: openai:gpt-4o-mini
    limits: {turn_timeout_sec: 60, model_timeout_sec: 1}
`

const promiseToken = "promise-token"

func promiseEnv(t *testing.T) *env {
	t.Helper()
	return &env{Server: testserver.Start(t, testserver.Options{Script: promiseScript, Catalogs: []string{promiseCatalog},
		Tokens: map[string]string{promiseToken: "demo:user:pat"}}), t: t}
}

func promiseCtx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+promiseToken)
}

// TestPromisesThroughTheGateway: a model that answers nothing gives the
// caller its agent's placeholder (the seed's "No output from agent.", or
// the catalog's), and a result names its session, over gRPC (and so the
// HTTP API) as returned and as stored.
func TestPromisesThroughTheGateway(t *testing.T) {
	e := promiseEnv(t)
	ctx, cancel := context.WithTimeout(promiseCtx(context.Background()), 2*time.Minute)
	defer cancel()
	api := pb.NewAgentServiceClient(e.Conn)
	session := "s-" + testserver.RandomID()
	for _, tt := range []struct{ agent, want string }{
		{"assistant", agent.DefaultEmptyAnswer},
		{"terse", "(no answer)"},
	} {
		res, err := api.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: tt.agent, SessionId: session, Prompt: "say nothing"}})
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.GetStatus())
		require.Equal(t, tt.want, res.GetOutput())
		require.Equal(t, session, res.GetSessionId())

		stored, err := api.GetResult(ctx, &pb.GetResultRequest{ResultRef: res.GetResultRef()})
		require.NoError(t, err)
		require.Equal(t, tt.want, stored.GetOutput())
		require.Equal(t, session, stored.GetSessionId())
	}
	res, err := api.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", res.GetOutput(), "an answer is kept")
	require.Empty(t, res.GetSessionId(), "a turn without a session names none")
}

// TestEnvelopeFromTheCLI: a TurnRequest started with the temporal CLI is
// decoded strictly — a misspelt field fails the turn at once with a
// non-retryable InvalidRequest that names it, before anything runs — and
// the seed's job envelope, which names its session only in
// context.session_id, runs in that session.
func TestEnvelopeFromTheCLI(t *testing.T) {
	e := promiseEnv(t)
	for _, tt := range []struct{ input, field string }{
		{`{"tenant_id":"demo","promt":"What is 1+1?"}`, `"promt"`},
		{`{"tenant_id":"demo","prompt":"What is 1+1?","sesion_id":"s1"}`, `"sesion_id"`},
		{`{"tenant_id":"demo","prompt":"What is 1+1?","context":{"session":"s1"}}`, `"session"`},
	} {
		id := "strict-" + testserver.RandomID()
		e.startWithCLI(id, tt.input)
		_, err := e.result(id)
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "want an application error, got %v", err)
		require.Equal(t, agent.ErrTypeInvalidRequest, app.Type())
		require.Contains(t, app.Message(), "unknown field "+tt.field)
		require.True(t, app.NonRetryable())
		for _, ev := range e.history(id) {
			require.NotEqual(t, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, ev.GetEventType(), "nothing runs")
			require.NotEqual(t, enumspb.EVENT_TYPE_MARKER_RECORDED, ev.GetEventType(), "no local activity runs either")
		}
	}

	session, job := "sess-"+testserver.RandomID(), testserver.RandomID()
	id := "turn/demo/" + job
	e.startWithCLI(id, fmt.Sprintf(`{"version": "1.0", "job_id": %q, "run_id": "run-2024-001", "node_id": "agent_analyze_data",
		"workflow_tag": "main", "workflow_owner": "sdutt", "user_id": "sdutt", "tenant_id": "demo", "prompt": "What is 6 * 7?",
		"context": {"workflow_state": {"current_step": 5, "total_steps": 10}, "session_id": %q},
		"timeout_sec": 300, "retry_count": 0, "created_at": "2024-10-12T10:30:00Z"}`, job, session))
	res, err := e.result(id)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, session, res.SessionID)
	msgs, err := e.Store().SessionMessages(context.Background(), "demo", session, 10)
	require.NoError(t, err)
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Content)
	}
	require.Contains(t, texts, "What is 6 * 7?", "the exchange is the session's")
	require.Contains(t, texts, "The result is 42.")
}

// TestModelCallTimeout: a model call that runs over its agent's
// model_timeout_sec (a provider that hangs) times out and is retried as
// any timed-out call is, and the retry answers; the turn completes. The
// call is a local one: its worker ends the attempt at the timeout
// (cancelling the request) and retries it, and its history records the
// call once, with the attempt that answered.
func TestModelCallTimeout(t *testing.T) {
	e := promiseEnv(t)
	start := time.Now()
	id, res := runTurn(t, e.Server, agent.TurnRequest{TenantID: "demo", AgentID: "hasty", JobID: testserver.RandomID(), Prompt: "hang on"})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "answered the retry", res.Output)
	require.Less(t, time.Since(start), 30*time.Second, "the hung call was given up after a second, not the turn's minute")
	hung := 0
	for _, r := range e.Model.Requests() {
		if r.Rule == "hung" {
			hung++
		}
	}
	require.Equal(t, 2, hung, "the hung call and its retry")
	// The scripted model holds a hung request until its client gives up
	// (or for minutes): none held now means the first attempt's request
	// was cancelled, not left behind while the retry ran.
	require.Zero(t, e.Model.InFlight(), "the hung request was given up")
	require.Equal(t, []int32{2}, modelCallAttempts(t, e.history(id)), "one model call, answered at its second attempt")
	rows, err := e.Store().JobUsage(context.Background(), "demo", res.JobID)
	require.NoError(t, err)
	require.Len(t, rows, 1, "only the retry answered")
	require.Equal(t, 2, rows[0].Attempt, "the ledger has the answer of the second attempt")
}

// TestLoadRun: a short load run in the test suite (the long one is `go
// tool task bench`): many turns at once through the gateway against the
// scripted model, each completing with its own answer and no error.
func TestLoadRun(t *testing.T) {
	const turns = 24
	e := promiseEnv(t)
	ctx, cancel := context.WithTimeout(promiseCtx(context.Background()), 3*time.Minute)
	defer cancel()
	api := pb.NewAgentServiceClient(e.Conn)
	var wg sync.WaitGroup
	errs := make([]error, turns)
	outputs := make([]string, turns)
	for i := range turns {
		wg.Go(func() {
			res, err := api.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: fmt.Sprintf("What is %d * 3?", i+1)}})
			if err != nil {
				errs[i] = err
				return
			}
			if res.GetStatus() != agent.StatusCompleted || res.GetError() != nil {
				errs[i] = fmt.Errorf("turn %d: %s %v", i, res.GetStatus(), res.GetError())
			}
			outputs[i] = res.GetOutput()
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for i, out := range outputs {
		require.Equal(t, fmt.Sprintf("The result is %d.", 3*(i+1)), strings.TrimSpace(out), "turn %d has its own answer", i)
	}
}
