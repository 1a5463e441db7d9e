package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// channelScript answers every prompt at once, but the lead's "ask
// <agent>: <task>", which it delegates.
const channelScript = `
rules:
  - name: lead-asks
    when: {system: 'the lead', user: '^ask (\w+): (.+)$'}
    reply: {tool_calls: [{name: delegate, arguments: '{"agent_id": "$1", "prompt": "$2"}'}]}
  - name: lead-done
    when: {system: 'the lead', tool: '.'}
    reply: {text: 'Done.'}
  - name: hello
    reply: {text: 'Hello.'}
`

const channelCatalog = `
tenant: demo
default_agent: assistant
tools:
  - name: delegate
    kind: delegate_to_agent
    config: {agents: [assistant], max_depth: 1}
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: You answer.
    expose: [a2a]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
  - id: lead
    model: openai:gpt-4o-mini
    system_prompt: You are the lead.
    tools: [delegate]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
`

// TestChannels: a turn through each door, and one started with the
// temporal CLI, says where it came from in its stored result, in its
// usage ledger rows and in its AgentflowChannel search attribute; a
// delegated turn is "delegate". A body that names a channel changes
// nothing: the HTTP API and the OpenAI door refuse the field (as they
// refuse every field they do not know) and start nothing.
func TestChannels(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script, o.Catalogs = channelScript, []string{channelCatalog} })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jobs := map[string]string{} // job id → the channel it must say

	// gRPC.
	job := "ch-grpc-" + testserver.RandomID()
	res, err := pb.NewAgentServiceClient(e.Conn).Invoke(grpcAs(ctx, e.user), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "hi"}})
	require.NoError(t, err)
	require.Equal(t, agent.ChannelGRPC, res.GetChannel(), "the result says it")
	jobs[job] = agent.ChannelGRPC

	// The HTTP API; a body that names a channel is refused, and starts nothing.
	job = "ch-http-" + testserver.RandomID()
	var started pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, `{"job_id": "`+job+`", "prompt": "hi"}`, &started)
	jobs[job] = agent.ChannelHTTP
	refused := "ch-refused-" + testserver.RandomID()
	p := e.problem("POST", "/v1/turns", e.user, `{"job_id": "`+refused+`", "prompt": "hi", "channel": "a2a"}`, http.StatusBadRequest)
	require.Contains(t, p.Detail, "channel")
	e.requireNotStarted("demo", refused)

	// SSE: the answer streams to its end.
	job = "ch-sse-" + testserver.RandomID()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.api+"/v1/turns:stream", strings.NewReader(`{"job_id": "`+job+`", "prompt": "hi"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.user)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), "COMPLETED")
	jobs[job] = agent.ChannelSSE

	// OpenAI's client; a body that also says "channel" is refused too,
	// and starts nothing.
	job = "ch-openai-" + testserver.RandomID()
	oc := openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.user), option.WithMaxRetries(0))
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("hi")},
		option.WithHeader("Idempotency-Key", job))
	require.NoError(t, err)
	jobs[job] = agent.ChannelOpenAI
	refused = "ch-refused-" + testserver.RandomID()
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("hi")},
		option.WithHeader("Idempotency-Key", refused), option.WithJSONSet("channel", agent.ChannelA2A))
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Contains(t, apiErr.Message, "channel")
	e.requireNotStarted("demo", refused)

	// A2A 1.0: the task id is the turn's stream id.
	task := v1TaskOf(t, e.a2aV1("assistant", e.user, "SendMessage", map[string]any{"message": map[string]any{
		"messageId": testserver.RandomID(), "role": "ROLE_USER", "parts": []map[string]any{{"text": "hi"}}}}), true)
	jobs[task.ID[len("turn/demo/"):]] = agent.ChannelA2A

	// The temporal CLI, naming no channel.
	job = "ch-cli-" + testserver.RandomID()
	out, err := e.Temporal("workflow", "start", "--type", "AgentTurn", "--task-queue", e.TaskQueue,
		"--workflow-id", contract.TurnWorkflowID("demo", job), "--input", `{"tenant_id":"demo","job_id":"`+job+`","prompt":"hi"}`)
	require.NoError(t, err, out)
	jobs[job] = agent.ChannelTemporal

	// A delegation: the lead's turn is HTTP's, its child's "delegate".
	lead := "ch-lead-" + testserver.RandomID()
	e.ok("POST", "/v1/turns", e.user, `{"job_id": "`+lead+`", "agent_id": "lead", "prompt": "ask assistant: hi"}`, &started)
	require.Equal(t, agent.StatusCompleted, e.turnResult(started.GetStreamId()).Status)
	jobs[lead] = agent.ChannelHTTP
	var child string
	require.NoError(t, e.Store().Pool().QueryRow(ctx, `SELECT job_id FROM agent_results WHERE tenant_id = 'demo' AND job_id LIKE $1`,
		lead+"-%").Scan(&child))
	require.NotEqual(t, lead, child)
	jobs[child] = agent.ChannelDelegate

	for job, want := range jobs {
		e.requireChannel(t, job, contract.TurnWorkflowID("demo", job), want)
	}

	// Usage splits by channel.
	var usage pb.GetUsageResponse
	e.ok("GET", "/v1/usage?since_duration=1h&group_by=channel", e.admin, "", &usage)
	keys := map[string]int64{}
	for _, r := range usage.GetRows() {
		keys[r.GetKey()] = r.GetCalls()
	}
	require.Equal(t, map[string]int64{agent.ChannelGRPC: 1, agent.ChannelHTTP: 3, agent.ChannelSSE: 1, agent.ChannelOpenAI: 1,
		agent.ChannelA2A: 1, agent.ChannelTemporal: 1, agent.ChannelDelegate: 1}, keys)
}
