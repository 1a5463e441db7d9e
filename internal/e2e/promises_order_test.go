package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// orderScript: the calculator, then an answer whose last sentence the
// agent's output guard refuses.
const orderScript = `
rules:
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1. The launch code is 0000.'}
`

const orderCatalog = `
tenant: demo
tools:
  - {name: calculator, kind: calculator}
agents:
  - id: guarded
    model: openai:gpt-4o-mini
    tools: [calculator]
    guardrails:
      - output: {regex: ['\b0000\b'], refusal: "I can't share that."}
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

// TestWrapperOrder: the order of seed 003's decorator stack, asserted on
// a real turn's effects. Innermost, the guard (the chat middleware) runs
// inside the model call's span (observability): what the span records
// of the answer is the answer past the guard, not what the model wrote. Outermost, tool execution (function invocation)
// wraps both: the model call that asked for the tool has ended, span and
// all, before the tool runs, in a span of its own outside every model
// call's, and the next model call starts after the tool has ended.
func TestWrapperOrder(t *testing.T) {
	tp, rec := newTracing(t)
	ts := testserver.Start(t, testserver.Options{Script: orderScript, Catalogs: []string{orderCatalog}, TracerProvider: tp, TraceContent: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := agent.TurnRequest{TenantID: "demo", JobID: "order-" + testserver.RandomID(), AgentID: "guarded", Prompt: "What is 6 * 7?"}
	run, err := turnclient.Start(ctx, ts.Client(), ts.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusFailed, res.Status)
	require.Equal(t, agent.ErrTypeGuardrailTripped, res.Error.Type, "the guard tripped on the answer")

	all := rec.await("RunWorkflow:" + contract.AgentTurn)
	chats := named(all, "chat gpt-4o-mini")
	require.Len(t, chats, 2)
	if chats[1].StartTime.Before(chats[0].StartTime) {
		chats[0], chats[1] = chats[1], chats[0]
	}
	tool := one(t, all, "execute_tool calculator")

	// Observability wraps the guard: the second call's span records the
	// answer as the guard left it — cut where it broke the rule, the
	// refusal in its place —, never what the model wrote.
	a := attrs(chats[1])
	out := a["gen_ai.output.messages"].AsString()
	require.Contains(t, out, "The result is 42. I can't share that.")
	require.NotContains(t, out, "0000", "the span records the answer past the guard")
	require.Equal(t, []string{"content_filter"}, a["gen_ai.response.finish_reasons"].AsStringSlice())

	// Function invocation wraps both: call, then tool, then call.
	for _, c := range chats {
		require.False(t, isAncestor(all, c, tool), "the tool runs outside the model call's span")
	}
	require.False(t, tool.StartTime.Before(chats[0].EndTime), "the tool runs after the call that asked for it ended")
	require.False(t, chats[1].StartTime.Before(tool.EndTime), "the next call starts after the tool ended")
}
