package webui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/examples/process"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// teamScript: the lead hands "ask <agent>: <task>" to that agent and
// quotes the answer; anyone else calculates.
const teamScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: lead-quotes
    when: {system: 'the lead', tool: '(?s)answered:\n(.*?)\n'}
    reply: {text: 'The researcher says: $1'}
  - name: lead-asks
    when: {system: 'the lead', user: '^ask (\w+): (.+)$'}
    reply: {tool_calls: [{name: delegate, arguments: '{"agent_id": "$1", "prompt": "$2"}'}]}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - name: fallback
    reply: {text: 'Nothing to add.'}
`

const teamCatalog = `
tenant: team
default_agent: researcher
tools:
  - name: calculator
    kind: calculator
  - name: delegate
    kind: delegate_to_agent
    config: {agents: [researcher], max_depth: 1}
agents:
  - id: lead
    model: openai:gpt-4o-mini
    system_prompt: You are the lead.
    tools: [delegate]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
  - id: researcher
    model: openai:gpt-4o-mini
    system_prompt: You are the researcher.
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
`

// TestSummariesOnEveryStartPath starts turns every way agentflow starts
// them and reads the summary and details the Web UI would show of each,
// so that no way in lists its turns without saying what they are. The
// schedules' way (starter schedule) is checked by the starter's
// TestScheduleCommand.
func TestSummariesOnEveryStartPath(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{
		Script:   teamScript,
		Catalogs: []string{teamCatalog},
		Tokens:   map[string]string{"tok-team": "team:user"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-team")
	agents := pb.NewAgentServiceClient(ts.Conn)

	// The gateway (and `starter run`, by the same turnclient.Start).
	gatewayJob := "sum-" + testserver.RandomID()
	res, err := agents.Invoke(gctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: gatewayJob, AgentId: "researcher", Prompt: "What is 2 + 3?"}})
	require.NoError(t, err)
	require.Equal(t, "The result is 5.", res.GetOutput())
	gateway := contract.TurnWorkflowID("team", gatewayJob)

	// A delegated child turn.
	job := "sum-" + testserver.RandomID()
	res, err = agents.Invoke(gctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, AgentId: "lead", Prompt: "ask researcher: What is 6 * 7?"}})
	require.NoError(t, err)
	require.Equal(t, "The researcher says: The result is 42.", res.GetOutput())
	lead := contract.TurnWorkflowID("team", job)
	var child string
	for _, ev := range testserver.History(ctx, t, ts.Client(), lead, "") {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			child = a.GetWorkflowId()
		}
	}
	require.NotEmpty(t, child, "the lead started no child turn")

	// A conversation and its message's child turn (`starter chat` too).
	session := "s-" + testserver.RandomID()
	sent, err := agents.SendMessage(gctx, &pb.SendMessageRequest{SessionId: session, AgentId: "researcher", Prompt: "What is 1 + 1?"})
	require.NoError(t, err)
	require.NoError(t, ts.Client().GetWorkflow(ctx, sent.GetStreamId(), "").Get(ctx, nil), "the conversation's turn")

	// A process workflow's child turns (examples/process).
	queue := "process-" + testserver.RandomID()
	w := sdkworker.New(ts.Client(), queue, sdkworker.Options{})
	process.Register(w)
	require.NoError(t, w.Start())
	defer w.Stop()
	procID := "process-" + testserver.RandomID()
	run, err := ts.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: procID, TaskQueue: queue}, process.Name,
		process.Input{TenantID: "team", Question: "What is 3 * 3?", TaskQueue: ts.TaskQueue})
	require.NoError(t, err)
	var out process.Result
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "The result is 9.", out.Answer)

	tests := []struct {
		name, workflowID, summary string
		details                   []string // in the details, in this order
	}{
		{"gateway", gateway, "researcher: What is 2 + 3?", []string{"tenant `team`", "agent `researcher`", "job `" + gatewayJob + "`", "What is 2 + 3?"}},
		{"delegating turn", lead, "lead: ask researcher: What is 6 * 7?", []string{"tenant `team`", "agent `lead`"}},
		{"delegated child turn", child, "researcher: What is 6 * 7?", []string{"tenant `team`", "agent `researcher`", "What is 6 * 7?"}},
		{"conversation", contract.ConversationWorkflowID("team", session), "conversation " + session, nil},
		{"conversation's turn", sent.GetStreamId(), "researcher: What is 1 + 1?", []string{"agent `researcher`", "session `" + session + "`", "What is 1 + 1?"}},
		{"process step", contract.TurnWorkflowID("team", procID+"-answer"), "process answer: What is 3 * 3?", nil},
		{"process check", contract.TurnWorkflowID("team", procID+"-check"), `process check: Check this answer to "What is 3 * 3?": The result is 9.`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			summary, details := ts.UserMetadata(t, tt.workflowID)
			require.Equal(t, tt.summary, summary, "summary of %s", tt.workflowID)
			rest := details
			for _, d := range tt.details {
				i := strings.Index(rest, d)
				require.GreaterOrEqual(t, i, 0, "details of %s: %q, want %q (in order)", tt.workflowID, details, tt.details)
				rest = rest[i+len(d):]
			}
		})
	}
}
