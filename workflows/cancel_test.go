package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// runCanceled executes a turn that is expected to end CANCELED and
// returns the result its cancellation carries.
func runCanceled(t *testing.T, env *testsuite.TestWorkflowEnvironment, req agent.TurnRequest) agent.TurnResult {
	t.Helper()
	env.ExecuteWorkflow(contract.AgentTurn, req)
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "the turn ends CANCELED, not with %v", err)
	res, ok := contract.FailedResult(err)
	require.True(t, ok, "the cancellation carries the result")
	return res
}

func events(t *testing.T, env *testsuite.TestWorkflowEnvironment) []agent.Event {
	t.Helper()
	v, err := env.QueryWorkflow(contract.QueryEvents, agent.EventsQuery{})
	require.NoError(t, err)
	var p agent.EventsPage
	require.NoError(t, v.Get(&p))
	return p.Events
}

// slowModel makes every model call take an hour unless it is cancelled.
func slowModel(env *testsuite.TestWorkflowEnvironment, f *fakeTurn) {
	env.OnActivity(contract.CallModel, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.CallModelInput) (contract.CallModelResult, error) {
			f.mu.Lock()
			f.modelCalls = append(f.modelCalls, in)
			f.mu.Unlock()
			select {
			case <-ctx.Done():
				return contract.CallModelResult{}, ctx.Err()
			case <-time.After(time.Hour):
				return textReply("too late"), nil
			}
		})
}

func TestCancelSignalStopsTheModelCall(t *testing.T) {
	f := &fakeTurn{agent: testAgent()}
	env := newEnv(t, f)
	slowModel(env, f)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalCancelTurn, agent.CancelRequest{Reason: "wrong question", RequestedBy: "ana"})
	}, time.Second)
	res := runCanceled(t, env, request())

	require.Equal(t, agent.StatusCanceled, res.Status)
	require.Equal(t, agent.ErrTypeCanceled, res.Error.Type)
	require.Equal(t, "the turn was cancelled by ana: wrong question", res.Error.Message)
	require.False(t, res.Error.Retryable)
	require.Len(t, f.saved, 1, "the canceled result is stored")
	require.Equal(t, agent.StatusCanceled, f.saved[0].Status)
	evs := events(t, env)
	last := evs[len(evs)-1]
	require.Equal(t, agent.StreamCanceled, last.Status)
	require.True(t, last.Terminal())
}

// TestCancelStopsToolsInFlight: a cancellation reaches the tool calls in
// flight, which run with a heartbeat timeout: each ends canceled, gets a
// result, and the turn ends CANCELED without waiting for them to finish.
func TestCancelStopsToolsInFlight(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{toolReply(calc("c1", "1+1"), calc("c2", "2+2"))},
		hold: map[string]bool{"calculator": true}}
	env := newEnv(t, f)
	// The test environment resolves a cancelled call at once and leaves
	// its context be (the end-to-end tests show the context cancelled): what
	// counts here is that the turn asked.
	var canceled []string
	env.SetOnActivityCanceledListener(func(info *activity.Info) { canceled = append(canceled, info.ActivityType.Name) })
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalCancelTurn, agent.CancelRequest{Reason: "stuck", RequestedBy: "ana"})
	}, time.Second)
	res := runCanceled(t, env, request())

	require.Equal(t, "the turn was cancelled by ana: stuck", res.Error.Message)
	require.Equal(t, []string{contract.ExecuteTool, contract.ExecuteTool}, canceled, "both calls in flight were cancelled")
	require.Equal(t, []time.Duration{toolHeartbeat, toolHeartbeat}, f.toolHeartbeats)
	require.Equal(t, []agent.ToolCallRecord{
		{CallID: "c1", Tool: "calculator", Args: []byte(`{"expression":"1+1"}`), Status: agent.ToolCanceled},
		{CallID: "c2", Tool: "calculator", Args: []byte(`{"expression":"2+2"}`), Status: agent.ToolCanceled},
	}, res.Metadata.ToolCalls)
	require.Equal(t, []contract.ToolFailure{
		{Seq: 2, CallID: "c1", Tool: "calculator", Message: "the turn was cancelled while the call ran"},
		{Seq: 3, CallID: "c2", Tool: "calculator", Message: "the turn was cancelled while the call ran"},
	}, f.savedFailures, "every call gets a result")
	require.Len(t, f.modelCalls, 1, "no model call after the cancel")
	var ends []string
	for _, ev := range events(t, env) {
		if ev.Kind == agent.EventToolEnd {
			ends = append(ends, ev.Tool.CallID+" "+ev.Tool.Status)
		}
	}
	require.Equal(t, []string{"c1 canceled", "c2 canceled"}, ends)
}

func TestCancelWhileWaitingForApproval(t *testing.T) {
	f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api"), calc("c2", "2+2")}, "c1")
	env.RegisterDelayedCallback(func() {
		require.Len(t, pending(t, env), 1)
		env.SignalWorkflow(contract.SignalCancelTurn, agent.CancelRequest{})
	}, time.Minute)
	res := runCanceled(t, env, req())

	require.Equal(t, "the turn was cancelled", res.Error.Message)
	require.Len(t, f.toolCalls, 1, "the call that needed no approval ran; the waiting one did not")
	require.Equal(t, "calculator", f.toolCalls[0].Call.Name)
	require.Equal(t, []agent.ToolCallRecord{
		{CallID: "c1", Tool: "restart", Args: []byte(`{"service":"api"}`), Status: agent.ToolCanceled},
		{CallID: "c2", Tool: "calculator", Args: []byte(`{"expression":"2+2"}`), Status: agent.ToolOK},
	}, res.Metadata.ToolCalls)
	require.Len(t, f.approvals, 1)
	require.Equal(t, agent.ApprovalCanceled, f.approvals[0].Outcome)
	require.Equal(t, "cancel", f.approvals[0].Via)
	require.Equal(t, []agent.ApprovalEvent{{Outcome: agent.ApprovalCanceled, Via: agent.ViaCancel}}, decisions(t, env))
	require.Equal(t, []contract.ToolFailure{{Seq: 2, CallID: "c1", Tool: "restart",
		Message: "the turn was cancelled before the call was decided; it was not run"}}, f.savedFailures,
		"the call that will not run gets a result, so no call is left unanswered")
	require.Len(t, f.modelCalls, 1, "no model call after the cancel")
	require.Empty(t, pending(t, env))
}

func TestTemporalCancelEndsTheTurnTheSameWay(t *testing.T) {
	f := &fakeTurn{agent: testAgent()}
	env := newEnv(t, f)
	slowModel(env, f)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	res := runCanceled(t, env, request())
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.Equal(t, "the turn was cancelled by temporal: the workflow was cancelled", res.Error.Message)
	require.Len(t, f.saved, 1)
}

func TestCancelAfterTheAnswerChangesNothing(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{textReply("hi")}}
	env := newEnv(t, f)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, agent.StatusCompleted, res.Status)
}

func TestMalformedCancelIsIgnored(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{toolReply(calc("c1", "1+1")), textReply("2")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("2")}}
	env := newEnv(t, f)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalCancelTurn, map[string]any{"reason": 42})
	}, 0)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, agent.StatusCompleted, res.Status)
}

func TestStatusQuery(t *testing.T) {
	_, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api")}, "c1")
	var st agent.TurnStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(contract.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
		env.SignalWorkflow(contract.SignalCancelTurn, agent.CancelRequest{})
	}, time.Minute)
	runCanceled(t, env, req())
	require.Equal(t, agent.TurnStatus{TenantID: "t1", JobID: "job-1", AgentID: "ops", AgentVersion: 3, Status: agent.StreamWaitingApproval,
		Step: 1, TokensUsed: 10, PendingApprovals: 1, LastEventIndex: st.LastEventIndex}, st)
	require.Positive(t, st.LastEventIndex)
	v, err := env.QueryWorkflow(contract.QueryStatus)
	require.NoError(t, err)
	require.NoError(t, v.Get(&st))
	require.Equal(t, agent.StreamCanceled, st.Status)
	require.True(t, st.CancelRequested)
	require.Equal(t, 1, st.ToolCalls)
}
