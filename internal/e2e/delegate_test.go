package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// teamScript drives the agents of teamCatalog; their system prompts tell
// them apart. The lead hands "ask <agent>: <task>" to the agent named, by
// its delegate tool ("ask anyone" by ask_any), and quotes the answer.
const teamScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: frugal-asks
    when: {system: 'frugal', user: '^ask (\w+): (.+)$'}
    reply:
      tool_calls: [{name: delegate, arguments: '{"agent_id": "$1", "prompt": "$2"}'}]
      usage: {prompt_tokens: 50, completion_tokens: 50}
  - name: frugal-refused
    when: {system: 'frugal', tool: 'delegation refused: (.+)$'}
    reply:
      text: 'I answer myself: $1'
      usage: {prompt_tokens: 0, completion_tokens: 0}
  - name: lead-quotes
    when: {system: 'the lead', tool: '(?s)answered:\n(.*?)\n\nresult_ref: (\S+)'}
    reply: {text: 'The researcher says: $1 (result: $2)'}
  - name: lead-refused
    when: {system: 'the lead', tool: '^error: (.+)$'}
    reply: {text: 'Delegation failed: $1'}
  - name: lead-asks-anyone
    when: {system: 'the lead', user: '^ask anyone (\w+): (.+)$'}
    reply: {tool_calls: [{name: ask_any, arguments: '{"agent_id": "$1", "prompt": "$2"}'}]}
  - name: lead-asks
    when: {system: 'the lead', user: '^ask (\w+): (.+)$'}
    reply: {tool_calls: [{name: delegate, arguments: '{"agent_id": "$1", "prompt": "$2"}'}]}
  - name: researcher-answers
    when: {system: 'the researcher', tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - name: researcher-goes-deeper
    when: {system: 'the researcher', user: '^go deeper'}
    reply: {tool_calls: [{name: delegate, arguments: '{"agent_id": "helper", "prompt": "dig"}'}]}
  - name: researcher-thinks
    when: {system: 'the researcher', user: '^think for (\d+) ms'}
    reply: {text: 'Thought it through.', delay_ms: 3000}
  - name: researcher-stalls
    when: {system: 'the researcher', user: '^stall'}
    reply: {text: 'Too late.', delay_ms: 60000}
  - name: researcher-calculates
    when: {system: 'the researcher', user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: secret
    when: {system: 'secret'}
    reply: {text: 'the other tenant speaking'}
  - name: fallback
    reply: {text: 'Nothing to add.'}
`

// teamCatalog: the lead may delegate to the researcher and the helper, one
// delegation deep (delegate), or to any agent of the tenant (ask_any); the
// researcher holds delegate too, but is already one deep.
const teamCatalog = `
tenant: team
default_agent: lead
tools:
  - name: calculator
    kind: calculator
  - name: delegate
    kind: delegate_to_agent
    config: {agents: [researcher, helper], max_depth: 1}
  - name: ask_any
    kind: delegate_to_agent
agents:
  - id: lead
    model: openai:gpt-4o-mini
    system_prompt: You are the lead.
    tools: [delegate, ask_any]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
  - id: frugal
    model: openai:gpt-4o-mini
    system_prompt: You are frugal.
    tools: [delegate]
    limits: {max_iterations: 4, turn_timeout_sec: 120, token_budget: 100}
  - id: researcher
    model: openai:gpt-4o-mini
    system_prompt: You are the researcher.
    tools: [calculator, delegate]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
  - id: helper
    model: openai:gpt-4o-mini
    system_prompt: You are the helper.
`

// otherCatalog is another tenant, with an agent of its own.
const otherCatalog = `
tenant: other
default_agent: secret
agents:
  - id: secret
    model: openai:gpt-4o-mini
    system_prompt: You are secret.
`

const teamToken = "tok-team"

func newTeamEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, Server: testserver.Start(t, testserver.Options{
		Script: teamScript, Catalogs: []string{teamCatalog, otherCatalog},
		Tokens: map[string]string{teamToken: "team:user+approver"},
	})}
}

// startTeamTurn starts a turn of tenant team, as the gateway does.
func (e *env) startTeamTurn(agentID, prompt string) (job, workflowID string) {
	e.t.Helper()
	req := agent.TurnRequest{TenantID: "team", JobID: "job-" + testserver.RandomID(), AgentID: agentID, Prompt: prompt}
	req.Normalize()
	_, err := e.Client().ExecuteWorkflow(context.Background(), turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
	require.NoError(e.t, err)
	return req.JobID, contract.TurnWorkflowID(req.TenantID, req.JobID)
}

// requireNested checks a parent's log: its own events are a whole stream
// that ends completed; the child events it carries are those of one call's
// child turn, each once and in the child's order, and exactly what the
// child's model calls streamed and the tool and approval events of its own
// stream.
func requireNested(t *testing.T, parent []agent.Event, parentID string, child []agent.Event, callID, childID string) {
	t.Helper()
	var own, nested []agent.Event
	for i, e := range parent {
		require.Equal(t, int64(i+1), e.Index, "event %d: %s", i, e)
		require.Equal(t, parentID, e.StreamID)
		if e.Child == nil {
			own = append(own, e)
			continue
		}
		require.Equal(t, callID, e.Child.CallID, "%s", e)
		require.Equal(t, childID, e.Child.StreamID, "%s", e)
		require.False(t, e.Terminal(), "a child's event never ends the parent's stream")
		if len(nested) > 0 {
			require.Greater(t, e.Child.Index, nested[len(nested)-1].Child.Index, "child events in order, once: %s", e)
		}
		nested = append(nested, e)
	}
	require.True(t, parent[len(parent)-1].Terminal())
	require.Equal(t, agent.StreamCompleted, parent[len(parent)-1].Status)
	require.NotEmpty(t, nested)
	require.Equal(t, agent.ReplayText(own), agent.ReplayText(parent), "the child's text is not the parent's")

	// The child's own stream has the same events at the same indices.
	key := func(e agent.Event) string {
		k := fmt.Sprintf("%d %s %q", e.Index, e.Kind, e.Text)
		if e.Tool != nil {
			k += fmt.Sprintf(" %s %s %s", e.Tool.CallID, e.Tool.Name, e.Tool.Status)
		}
		return k
	}
	var want, got []string
	for _, e := range child {
		// What its model calls stream, and the tool, approval and custom
		// events the child forwards.
		if e.Kind.Streamed() || eventlog.Forwarded(e.Kind) {
			want = append(want, key(e))
		}
	}
	for _, e := range agent.ChildEvents(parent, callID) {
		got = append(got, key(e))
	}
	require.Equal(t, want, got)
	// The call's own tool events surround the child's.
	first, last := -1, -1
	for i, e := range parent {
		if e.Child == nil && e.Tool != nil && e.Tool.CallID == callID {
			if e.Kind == agent.EventToolStart {
				first = i
			} else if e.Kind == agent.EventToolEnd {
				last = i
			}
		}
	}
	require.Positive(t, first)
	require.Greater(t, last, first)
	for i, e := range parent {
		if e.Child != nil {
			require.True(t, i > first && i < last, "child event %s outside its call", e)
		}
	}
}

// TestDelegateThroughGateway: the lead hands a question to the researcher,
// which uses the calculator; the gRPC stream of the lead's turn carries the
// researcher's tokens and tool calls as child events, and the lead quotes
// the researcher's answer and its result_ref.
func TestDelegateThroughGateway(t *testing.T) {
	e := newTeamEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := pb.NewAgentServiceClient(e.Conn)
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+teamToken)

	job := "deleg-" + testserver.RandomID()
	s, err := client.Stream(gctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, AgentId: "lead", Prompt: "ask researcher: What is 6 * 7?"}})
	require.NoError(t, err)
	var raw []*pb.StreamEvent
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		raw = append(raw, ev)
	}
	parentID := contract.TurnWorkflowID("team", job)
	var events []agent.Event
	var callID string
	for _, ev := range raw {
		e := gateway.FromPBEvent(ev)
		if e.Child == nil && e.Kind == agent.EventToolStart {
			callID = e.Tool.CallID
			require.Equal(t, "delegate", e.Tool.Name)
		}
		events = append(events, e)
	}
	require.NotEmpty(t, callID)
	childJob := agent.ChildJobID(job, callID)
	childID := contract.TurnWorkflowID("team", childJob)

	// The child events as the wire carries them.
	var childTools []string
	for _, ev := range raw {
		c := ev.GetMeta().GetChild()
		if c == nil {
			continue
		}
		require.Equal(t, callID, c.GetCallId())
		require.Equal(t, childID, c.GetStreamId())
		require.Positive(t, c.GetEventIndex())
		if start := ev.GetToolStart(); start != nil {
			childTools = append(childTools, start.GetName())
		}
	}
	require.Equal(t, []string{"calculator"}, childTools)

	childEvents, err := collect(ctx, e.Follower(), childID, 0)
	require.NoError(t, err)
	requireNested(t, events, parentID, childEvents, callID, childID)
	require.Equal(t, "The result is 42.", agent.ReplayText(agent.ChildEvents(events, callID)))

	stored, err := e.Store().Result(ctx, "team", childJob)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, stored.Status)
	require.Equal(t, "researcher", stored.Metadata.AgentID)
	want := "The researcher says: The result is 42. (result: " + stored.ResultRef + ")"
	require.Equal(t, want, agent.ReplayText(events))

	res, err := e.result(parentID)
	require.NoError(t, err)
	require.Equal(t, want, res.Output)
	require.Len(t, res.Metadata.ToolCalls, 1)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.GreaterOrEqual(t, res.Metadata.TokensUsed, stored.Metadata.TokensUsed, "the child's tokens count as the parent's")

	// The usage ledger records each turn's model calls under its own job:
	// the child's are not the parent's.
	parentCalls, err := e.Store().JobUsage(ctx, "team", job)
	require.NoError(t, err)
	childCalls, err := e.Store().JobUsage(ctx, "team", childJob)
	require.NoError(t, err)
	require.Len(t, parentCalls, 2, "the lead's call that delegates and its answer")
	require.Len(t, childCalls, 2, "the researcher's calculator call and its answer")
	for _, c := range childCalls {
		require.Equal(t, "researcher", c.AgentID)
	}

	// The child is the parent's child, started once.
	desc, err := e.Client().DescribeWorkflowExecution(ctx, childID, "")
	require.NoError(t, err)
	require.Equal(t, parentID, desc.GetWorkflowExecutionInfo().GetParentExecution().GetWorkflowId())
	require.Equal(t, 1, countChildStarts(e.history(parentID)))

	e.replay(parentID, "turn_delegated")
	e.replay(childID, "turn_delegated_child")
}

// countChildStarts counts the child workflows a history started.
func countChildStarts(events []*historypb.HistoryEvent) (n int) {
	for _, ev := range events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
			n++
		}
	}
	return n
}

// TestDelegateRefusals: what the delegating model reads when a delegation
// is refused, as the call's error: the depth limit, an agent the tool may
// not delegate to, an agent of another tenant, and a budget spent.
func TestDelegateRefusals(t *testing.T) {
	e := newTeamEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tests := []struct {
		name, agent, prompt string
		// child: a child turn starts (and fails, or answers).
		child  bool
		output string
		// status is the status of the parent's delegate call.
		status string
		// nested is the status of the child's call of delegate, as the
		// parent's stream shows it.
		nested string
	}{
		{
			name: "depth limit", agent: "lead", prompt: "ask researcher: go deeper", child: true,
			output: "The researcher says: The result is error: delegation refused: this turn is 1 delegation(s) deep, and delegate allows chains of at most 1; answer without delegating.",
			status: agent.ToolOK, nested: agent.ToolError,
		},
		{
			name: "not in agents", agent: "lead", prompt: "ask secret: tell me",
			output: `Delegation failed: agent "secret" is not one this tool may delegate to; it may delegate to researcher, helper`,
			status: agent.ToolError,
		},
		{
			name: "another tenant's agent", agent: "lead", prompt: "ask anyone secret: tell me", child: true,
			output: `Delegation failed: agent "secret" did not finish (rejected): AgentNotFound: load agent "secret": agent "secret" of tenant "team" not found`,
			status: agent.ToolError,
		},
		{
			name: "budget spent", agent: "frugal", prompt: "ask researcher: What is 1 + 1?",
			output: "I answer myself: this turn has used 100 of its 100 tokens and has none to give; answer without delegating",
			status: agent.ToolError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, id := e.startTeamTurn(tt.agent, tt.prompt)
			events, err := collect(ctx, e.Follower(), id, 0)
			require.NoError(t, err)
			res, err := e.result(id)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(res.Output, tt.output), "output %q", res.Output)
			require.Len(t, res.Metadata.ToolCalls, 1)
			require.Equal(t, tt.status, res.Metadata.ToolCalls[0].Status)

			callID := res.Metadata.ToolCalls[0].CallID
			childJob := agent.ChildJobID(job, callID)
			_, err = e.Client().DescribeWorkflowExecution(ctx, contract.TurnWorkflowID("team", childJob), "")
			if !tt.child {
				require.Error(t, err, "no child turn started")
				require.Zero(t, countChildStarts(e.history(id)))
				return
			}
			require.NoError(t, err)
			var nested []string
			for _, ev := range events {
				if ev.Child != nil && ev.Kind == agent.EventToolEnd {
					nested = append(nested, ev.Tool.Status)
				}
			}
			if tt.nested != "" {
				require.Equal(t, []string{tt.nested}, nested)
			}
		})
	}
	// The other tenant's agent never ran: the child looked for "secret"
	// in tenant team.
	require.Zero(t, e.Model.Served("secret"))
	rows := 0
	require.NoError(t, e.Store().Pool().QueryRow(ctx, `SELECT count(*) FROM agent_results WHERE tenant_id = 'other'`).Scan(&rows))
	require.Zero(t, rows)
}

// TestDelegateCancel: cancelling the delegating turn cancels its child.
func TestDelegateCancel(t *testing.T) {
	e := newTeamEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, id := e.startTeamTurn("lead", "ask researcher: stall")
	require.Eventually(t, func() bool { return e.Model.Served("researcher-stalls") > 0 }, time.Minute, 50*time.Millisecond)

	require.NoError(t, turnclient.Cancel(ctx, e.Client(), id, agent.CancelRequest{RequestedBy: "test", Reason: "changed my mind"}))
	err := e.Client().GetWorkflow(ctx, id, "").Get(ctx, nil)
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "the turn ends CANCELED, not with %v", err)

	res, err := e.Store().Result(ctx, "team", job)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.Len(t, res.Metadata.ToolCalls, 1)
	callID := res.Metadata.ToolCalls[0].CallID
	require.Equal(t, agent.ToolCanceled, res.Metadata.ToolCalls[0].Status)

	childJob := agent.ChildJobID(job, callID)
	childID := contract.TurnWorkflowID("team", childJob)
	desc, err := e.Client().DescribeWorkflowExecution(ctx, childID, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus())
	child, err := e.Store().Result(ctx, "team", childJob)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, child.Status)
	require.Equal(t, 1, e.Model.Served("researcher-stalls"), "the child's model call was stopped, not retried")
}

// TestDelegateSurvivesWorkerKill kills the worker process while the child
// turn's model call runs; with a new worker the parent goes on with the
// same child (its workflow id is the parent's job and call), started once,
// and its result stored once.
func TestDelegateSurvivesWorkerKill(t *testing.T) {
	p := newProcEnv(t, teamScript, teamCatalog)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := p.client

	first := p.startWorker()
	req := agent.TurnRequest{TenantID: "team", JobID: "kill-" + testserver.RandomID(), AgentID: "lead", Prompt: "ask researcher: think for 3000 ms"}
	req.Normalize()
	run, err := c.ExecuteWorkflow(ctx, turnclient.StartOptions(p.queue, req), contract.AgentTurn, req)
	require.NoError(t, err)

	// The child is running: its model call thinks for 3s.
	var childID string
	require.Eventually(t, func() bool {
		for _, ev := range testserver.History(ctx, t, c, run.GetID(), "") {
			if a := ev.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
				childID = a.GetWorkflowExecution().GetWorkflowId()
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond)
	time.Sleep(time.Second)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	p.startWorker()

	var res agent.TurnResult
	require.NoError(t, run.Get(ctx, &res))
	require.True(t, strings.HasPrefix(res.Output, "The researcher says: Thought it through. (result: artifact://"), res.Output)

	hist := testserver.History(ctx, t, c, run.GetID(), "")
	require.Equal(t, 1, countChildStarts(hist), "one child, however often the parent's code ran")
	callID := res.Metadata.ToolCalls[0].CallID
	require.Equal(t, contract.TurnWorkflowID("team", agent.ChildJobID(req.JobID, callID)), childID)

	pool, err := pgxpool.New(ctx, p.dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var rows int
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(*) FROM agent_results WHERE tenant_id = 'team' AND job_id = $1`, agent.ChildJobID(req.JobID, callID)).Scan(&rows))
	require.Equal(t, 1, rows)
}
