package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
	wsdoor "github.com/agentflow/agentflow/internal/gateway/ws"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
)

// doorsCatalog: one agent, exposed on every door that asks for it.
const doorsCatalog = `
tenant: demo
default_agent: assistant
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: You answer.
    expose: [mcp, ag_ui]
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// TestChannelDoors: a turn started through the WebSocket, the AI SDK's
// chat, an MCP tools/call, an AG-UI run, a Temporal schedule, an
// evaluation's case and a process's workflow (child turns) names that door in its result, its
// stored result, its usage ledger rows and its AgentflowChannel search
// attribute. TestChannels covers the other doors.
func TestChannelDoors(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script, o.Catalogs = channelScript, []string{doorsCatalog} })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cases := []struct {
		want string
		// start starts a turn through the door, waits for its end, and
		// returns its job id and workflow id.
		start func(t *testing.T) (job, workflowID string)
	}{
		{agent.ChannelWebSocket, func(t *testing.T) (string, string) {
			job := "doors-ws-" + testserver.RandomID()
			c := e.socket(ctx, e.user, "")
			command(t, ctx, c, `{"type": "start", "id": "s1", "job_id": "`+job+`", "prompt": "hi"}`)
			reply(t, ctx, c, wsdoor.SocketAck)
			evs, _ := socketEvents(t, ctx, c, nil)
			require.Equal(t, "Hello.", agent.ReplayText(evs))
			return job, contract.TurnWorkflowID("demo", job)
		}},
		{agent.ChannelAISDK, func(t *testing.T) (string, string) {
			chat := "doors-chat-" + testserver.RandomID()
			chunks, header := e.uiStream("POST", "/v1/ui/chat", e.user, uiBody(t, chat, "assistant", userMessage("hi")))
			require.Equal(t, "finish", chunks[len(chunks)-1].Type)
			return chat + "-1", header.Get("X-Agentflow-Stream-Id")
		}},
		{agent.ChannelMCP, func(t *testing.T) (string, string) {
			session, err := mcp.NewClient(&mcp.Implementation{Name: "agentflow-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint: e.api + mcpdoor.MCPPath, HTTPClient: &http.Client{Transport: mcpBearer{token: e.user, base: http.DefaultTransport}},
			}, sessionMCP)
			require.NoError(t, err)
			defer session.Close()
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "assistant", Arguments: map[string]any{"prompt": "hi"}})
			require.NoError(t, err)
			require.Equal(t, "Hello.", res.Content[0].(*mcp.TextContent).Text)
			var job string
			require.NoError(t, e.Store().Pool().QueryRow(ctx, `SELECT job_id FROM mcp_streams WHERE session_id = $1 AND job_id IS NOT NULL`,
				session.ID()).Scan(&job))
			return job, contract.TurnWorkflowID("demo", job)
		}},
		{agent.ChannelAGUI, func(t *testing.T) (string, string) {
			job := "doors-agui-" + testserver.RandomID()
			events := aguiPostEvents(t, e, "/ag-ui/assistant", e.user,
				`{"runId":"`+job+`","protocolVersion":"1.0","messages":[{"id":"m1","role":"user","content":"hi"}]}`)
			require.Equal(t, "RUN_FINISHED", events[len(events)-1].Type)
			return job, contract.TurnWorkflowID("demo", job)
		}},
		{agent.ChannelSchedule, func(t *testing.T) (string, string) {
			id := "doors-schedule-" + testserver.RandomID()
			out, err := e.Temporal("schedule", "create", "--schedule-id", id, "--interval", "24h",
				"--task-queue", e.TaskQueue, "--type", "AgentTurn", "--workflow-id", contract.TurnWorkflowID("demo", id),
				"--input", `{"tenant_id":"demo","prompt":"hi","history":"fresh"}`)
			require.NoError(t, err, out)
			t.Cleanup(func() { _, _ = e.Temporal("schedule", "delete", "--schedule-id", id) })
			out, err = e.Temporal("schedule", "trigger", "--schedule-id", id)
			require.NoError(t, err, out)
			var wid string
			require.Eventually(t, func() bool {
				resp, err := e.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
					Query: fmt.Sprintf(`TemporalScheduledById = %q`, id)})
				if err != nil || len(resp.GetExecutions()) != 1 {
					return false
				}
				wid = resp.GetExecutions()[0].GetExecution().GetWorkflowId()
				return true
			}, time.Minute, 100*time.Millisecond)
			return wid, wid // a scheduled run's job id is its workflow id
		}},
		{agent.ChannelEval, func(t *testing.T) (string, string) {
			in := agent.EvalInput{TenantID: "demo", EvalID: "doors-eval-" + testserver.RandomID(), AgentID: "assistant", Versions: []int{1},
				Dataset: agent.EvalDataset{Name: "doors", Cases: []agent.EvalCase{
					{ID: "hi", Prompt: "hi", Expect: agent.EvalExpect{Answer: &agent.AnswerExpect{Exact: "Hello."}}}}}}
			run, err := e.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.EvalWorkflowID(in.TenantID, in.EvalID),
				TaskQueue: e.TaskQueue}, contract.Evaluation, in)
			require.NoError(t, err)
			var out agent.EvalRun
			require.NoError(t, run.Get(ctx, &out))
			require.Equal(t, 1, out.Totals[0].Passed)
			job := agent.EvalJobID(in.EvalID, "hi", 1)
			return job, contract.TurnWorkflowID("demo", job)
		}},
		{agent.ChannelProcess, func(t *testing.T) (string, string) {
			out, id := runProcess(t, e.Server, "hi")
			require.Equal(t, "Hello.", out.Answer)
			return id + "-answer", contract.TurnWorkflowID("demo", id+"-answer")
		}},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			job, workflowID := c.start(t)
			e.requireChannel(t, job, workflowID, c.want)
		})
	}
}

// requireChannel asserts that the turn of job (workflow workflowID)
// completed and names channel want in its result, its stored result, its
// usage ledger rows and its AgentflowChannel search attribute.
func (e *httpEnv) requireChannel(t *testing.T, job, workflowID, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := e.turnResult(workflowID)
	require.Equal(t, agent.StatusCompleted, res.Status, job)
	require.Equal(t, want, res.Channel, "%s: the workflow's result", job)
	stored, err := e.Store().Result(ctx, "demo", job)
	require.NoError(t, err)
	require.Equal(t, want, stored.Channel, "%s: the stored result", job)
	var ledger []string
	rows, err := e.Store().Pool().Query(ctx, `SELECT DISTINCT channel FROM usage_ledger WHERE tenant_id = 'demo' AND job_id = $1`, job)
	require.NoError(t, err)
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		ledger = append(ledger, c)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{want}, ledger, "%s: its usage ledger rows", job)
	query := fmt.Sprintf("%s = '%s' AND WorkflowId = '%s'", contract.SearchChannel.GetName(), want, workflowID)
	require.Eventually(t, func() bool {
		resp, err := e.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		return err == nil && len(resp.GetExecutions()) == 1
	}, 30*time.Second, 100*time.Millisecond, "%s: the visibility query %s finds it", job, query)
}
