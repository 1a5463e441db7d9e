package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// parentID is the workflow id of the delegating turn in these tests.
const parentID = "turn/t1/job-1"

// team scripts the activities of a turn and of the child turns it
// delegates to: several agents, each with its model's replies in order.
type team struct {
	mu      sync.Mutex
	agents  map[string]agent.Agent
	replies map[string][]contract.CallModelResult // by agent id
	// slow agents' model calls last until they are cancelled.
	slow map[string]bool

	loads  []contract.LoadAgentInput
	models []contract.CallModelInput
	tools  []contract.ExecuteToolInput
	saved  map[string]agent.TurnResult // by job id
	// onModel runs inside CallModel before it returns.
	onModel func(contract.CallModelInput)
}

func delegateSpec(config string) agent.Tool {
	return agent.Tool{Name: "delegate", Kind: agent.KindDelegate, Config: []byte(config)}
}

func teamAgent(id string, limits agent.Limits, tools ...agent.Tool) agent.Agent {
	return agent.Agent{TenantID: "t1", ID: id, Version: 1, Model: "openai:gpt-4o-mini", Tools: tools, Limits: limits}
}

func delegateCall(id, agentID, prompt string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: "delegate", Arguments: fmt.Sprintf(`{"agent_id":%q,"prompt":%q}`, agentID, prompt)}
}

func newTeamEnv(t *testing.T, tm *team) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(AgentTurn, workflow.RegisterOptions{Name: contract.AgentTurn})
	registerContract(env)
	env.SetStartWorkflowOptions(clientStartOptions(parentID))
	tm.saved = map[string]agent.TurnResult{}

	env.OnActivity(contract.Route, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RouteInput) (contract.RouteResult, error) {
			return contract.RouteResult{AgentID: in.AgentID, Rule: contract.RuleExplicit}, nil
		})
	env.OnActivity(contract.LoadAgent, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.LoadAgentInput) (contract.LoadAgentResult, error) {
			tm.mu.Lock()
			defer tm.mu.Unlock()
			tm.loads = append(tm.loads, in)
			ag, ok := tm.agents[in.AgentID]
			if !ok {
				return contract.LoadAgentResult{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("agent %q not found", in.AgentID), agent.ErrTypeAgentNotFound, nil)
			}
			return contract.LoadAgentResult{Agent: ag}, nil
		})
	env.OnActivity(contract.CallModel, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.CallModelInput) (contract.CallModelResult, error) {
			tm.mu.Lock()
			tm.models = append(tm.models, in)
			slow := tm.slow[in.AgentID]
			onModel := tm.onModel
			tm.mu.Unlock()
			if onModel != nil {
				onModel(in)
			}
			if slow {
				select {
				case <-ctx.Done():
					return contract.CallModelResult{}, ctx.Err()
				case <-time.After(time.Hour):
				}
			}
			tm.mu.Lock()
			defer tm.mu.Unlock()
			rs := tm.replies[in.AgentID]
			if len(rs) == 0 {
				return contract.CallModelResult{}, errors.New("no scripted reply left")
			}
			if len(rs) > 1 {
				tm.replies[in.AgentID] = rs[1:]
			}
			return rs[0], nil
		})
	env.OnActivity(contract.ExecuteTool, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
			tm.mu.Lock()
			defer tm.mu.Unlock()
			tm.tools = append(tm.tools, in)
			if d := in.Delegated; d != nil {
				if d.Status != agent.StatusCompleted {
					return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolError, Preview: "error: " + d.Error.Message}, nil
				}
				return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolOK, Preview: d.Output + " " + d.ResultRef,
					Data: &agent.DataPreview{Type: agent.DataDataset, Ref: d.DataRef, RowCount: 2}}, nil
			}
			return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolOK, Preview: "50"}, nil
		})
	env.OnActivity(contract.SaveResult, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.SaveResultInput) (agent.TurnResult, error) {
			tm.mu.Lock()
			defer tm.mu.Unlock()
			r := in.Result
			r.ResultRef = "artifact://test-" + in.Request.JobID
			tm.saved[in.Request.JobID] = r
			return r, nil
		})
	return env
}

// childLoads are the requests of the child turns that started.
func (tm *team) childLoads() []agent.TurnRequest {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	var out []agent.TurnRequest
	for _, l := range tm.loads {
		if l.Request.Parent != nil && l.Request.Parent.WorkflowID == parentID {
			out = append(out, l.Request)
		}
	}
	return out
}

// TestDelegateRunsAChildTurn: a delegate_to_agent call runs as a child
// AgentTurn of the named agent; its answer is stored as the call's
// result and read by the model; its tokens are the turn's; its stream
// enters the turn's log between the call's tool_start and tool_end.
func TestDelegateRunsAChildTurn(t *testing.T) {
	tm := &team{
		agents: map[string]agent.Agent{
			"lead":       teamAgent("lead", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60, TokenBudget: 1000}, delegateSpec(`{"agents":["researcher"]}`)),
			"researcher": teamAgent("researcher", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60}, agent.Tool{Name: "calculator", Kind: "calculator"}),
		},
		replies: map[string][]contract.CallModelResult{
			"lead":       {toolReply(delegateCall("c1", "researcher", "What is 12.5 * 4?")), textReply("The researcher says 50.")},
			"researcher": {toolReply(calc("r1", "12.5 * 4")), textReply("It is 50.")},
		},
	}
	env := newTeamEnv(t, tm)
	const childID = "turn/t1/job-1-c1"
	tm.onModel = func(in contract.CallModelInput) {
		if in.AgentID != "researcher" || in.Seq != 3 {
			return
		}
		// The child streams its answer to its parent, as CallModel does
		// for a notify workflow.
		require.Equal(t, parentID, in.Notify)
		for k, text := range []string{"It is ", "50."} {
			i := in.FirstIndex + int64(k)
			require.NoError(t, env.SignalWorkflowByID(parentID, contract.SignalNotifyTokens, agent.TokenBatch{StreamID: in.StreamID, Step: in.Seq, Attempt: 1, First: i,
				Events: []agent.Event{{StreamID: in.StreamID, Index: i, Kind: agent.EventToken, Text: text}}}))
		}
	}
	req := request()
	req.AgentID = "lead"
	req.Context = agent.TurnContext{UserRole: "analyst", Metadata: map[string]string{"team": "blue"}}
	req.Caller = &agent.Caller{Name: "ana", Roles: []string{"user", "analyst"}}
	res, failure := runTurn(t, env, req)
	require.Nil(t, failure)
	require.Equal(t, "The researcher says 50.", res.Output)

	children := tm.childLoads()
	require.Len(t, children, 1)
	child := children[0]
	require.Equal(t, "job-1-c1", child.JobID, "a deterministic job id: a retry finds the same child")
	require.Equal(t, "researcher", child.AgentID)
	require.Equal(t, "What is 12.5 * 4?", child.Prompt)
	require.Equal(t, agent.HistoryFresh, child.History)
	require.Empty(t, child.SessionID)
	require.Equal(t, req.Context, child.Context, "the turn's context goes to the child")
	require.Equal(t, req.Caller, child.Caller, "the child acts for the same caller: its tools' policies see the same roles")
	require.Equal(t, &agent.ParentRef{WorkflowID: parentID, CallID: "c1", Depth: 1}, child.Parent)
	require.Equal(t, 1000-10, child.TokenBudget, "the child gets what the turn has left")
	require.Equal(t, parentID, child.Notify)
	require.Positive(t, child.TimeoutSec)
	require.LessOrEqual(t, child.TimeoutSec, 60)

	stored, ok := tm.saved["job-1-c1"]
	require.True(t, ok, "the child stored its result")
	require.Equal(t, "It is 50.", stored.Output)

	// The call's result is the child's, stored as the call's step.
	var delegated *contract.ExecuteToolInput
	for _, in := range tm.tools {
		if in.Delegated != nil {
			delegated = &in
		}
	}
	require.NotNil(t, delegated)
	require.Equal(t, "job-1", delegated.JobID)
	require.Equal(t, 2, delegated.Seq)
	require.Equal(t, "c1", delegated.Call.ID)
	require.Equal(t, "It is 50.", delegated.Delegated.Output)
	require.Equal(t, "artifact://test-job-1-c1", delegated.Delegated.ResultRef)
	require.Nil(t, delegated.Delegated.Metadata.ToolCalls, "the child's tool calls stay in its own result")

	// Tokens: the lead's two replies and the child's two.
	require.Equal(t, 10+7+10+7, res.Metadata.TokensUsed)
	require.Equal(t, 17, stored.Metadata.TokensUsed)
	require.Equal(t, []agent.ToolCallRecord{{CallID: "c1", Tool: "delegate", Args: []byte(delegateCall("c1", "researcher", "What is 12.5 * 4?").Arguments), Status: agent.ToolOK}},
		res.Metadata.ToolCalls)

	// The log: the call's frame holds the child's events, marked.
	evs := events(t, env)
	var kinds []string
	for i, e := range evs {
		require.Equal(t, int64(i+1), e.Index)
		require.Equal(t, parentID, e.StreamID)
		k := string(e.Kind)
		if e.Child != nil {
			require.Equal(t, "c1", e.Child.CallID)
			require.Equal(t, childID, e.Child.StreamID)
			k = "child:" + k
		}
		kinds = append(kinds, k)
	}
	require.Equal(t, []string{
		"status", "step_start", "usage", "tool_start",
		"child:tool_start", "child:tool_end", "child:token", "child:token",
		"tool_end", "step_finish", "step_start", "usage", "step_finish", "content", "status",
	}, kinds)
	require.True(t, evs[len(evs)-1].Terminal())
	require.Equal(t, "It is 50.", agent.ReplayText(agent.ChildEvents(evs, "c1")))
	require.Empty(t, agent.ReplayText(evs), "the child's text is not the turn's")
	start := agent.ChildEvents(evs, "c1")[0]
	require.Equal(t, "calculator", start.Tool.Name)
	require.Equal(t, "r1", start.Tool.CallID)

	v, err := env.QueryWorkflow(contract.QueryStatus)
	require.NoError(t, err)
	var st agent.TurnStatus
	require.NoError(t, v.Get(&st))
	require.Equal(t, agent.StreamCompleted, st.Status)
	require.Equal(t, 34, st.TokensUsed)
}

// TestDelegateRefused: calls the tool's config or the turn's limits do
// not allow start no child; the model reads why as the call's result.
func TestDelegateRefused(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		call    agent.ToolCall
		req     func(*agent.TurnRequest)
		limits  func(*agent.Limits)
		wantMsg string
	}{
		{name: "beyond max_depth", config: `{"max_depth":2}`, call: delegateCall("c1", "researcher", "go deeper"),
			req: func(r *agent.TurnRequest) {
				r.Parent = &agent.ParentRef{WorkflowID: "turn/t1/up", CallID: "u1", Depth: 2}
			},
			wantMsg: "delegation refused: this turn is 2 delegation(s) deep, and delegate allows chains of at most 2"},
		{name: "default max_depth", call: delegateCall("c1", "researcher", "go deeper"),
			req: func(r *agent.TurnRequest) {
				r.Parent = &agent.ParentRef{WorkflowID: "turn/t1/up", CallID: "u1", Depth: 2}
			},
			wantMsg: "chains of at most 2"},
		{name: "an agent not listed", config: `{"agents":["writer"]}`, call: delegateCall("c1", "researcher", "x"),
			wantMsg: `agent "researcher" is not one this tool may delegate to; it may delegate to writer`},
		{name: "itself", call: delegateCall("c1", "lead", "x"), wantMsg: `agent "lead" cannot delegate to itself`},
		{name: "bad arguments", call: agent.ToolCall{ID: "c1", Name: "delegate", Arguments: `{"agent":"researcher"}`},
			wantMsg: `unknown field "agent"`},
		{name: "no tokens left", call: delegateCall("c1", "researcher", "x"),
			limits:  func(l *agent.Limits) { l.TokenBudget = 10 },
			wantMsg: "this turn has used 10 of its 10 tokens and has none to give"},
		{name: "a request's lower budget", call: delegateCall("c1", "researcher", "x"),
			req:     func(r *agent.TurnRequest) { r.TokenBudget = 10 },
			wantMsg: "this turn has used 10 of its 10 tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits := agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60, TokenBudget: 1000}
			if tt.limits != nil {
				tt.limits(&limits)
			}
			tm := &team{
				agents: map[string]agent.Agent{
					"lead":       teamAgent("lead", limits, delegateSpec(tt.config)),
					"researcher": teamAgent("researcher", agent.Limits{}),
				},
				replies: map[string][]contract.CallModelResult{
					"lead": {toolReply(tt.call), {Content: "I will answer myself."}},
				},
			}
			env := newTeamEnv(t, tm)
			req := request()
			req.AgentID = "lead"
			if tt.req != nil {
				tt.req(&req)
			}
			res, failure := runTurn(t, env, req)
			require.Nil(t, failure)
			require.Equal(t, "I will answer myself.", res.Output)
			require.Empty(t, tm.childLoads(), "no child started")
			require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
			require.Len(t, tm.models, 2)
			failures := tm.models[1].ToolFailures
			require.Len(t, failures, 1)
			require.Equal(t, "c1", failures[0].CallID)
			require.Equal(t, 2, failures[0].Seq)
			require.Contains(t, failures[0].Message, tt.wantMsg)
		})
	}
}

// TestDelegateBudget: a child may spend what the turn has left, no more;
// one that goes over fails TokenBudgetExceeded, and so does the turn,
// whose budget its tokens count against.
func TestDelegateBudget(t *testing.T) {
	tm := &team{
		agents: map[string]agent.Agent{
			"lead":       teamAgent("lead", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60, TokenBudget: 100}, delegateSpec("")),
			"researcher": teamAgent("researcher", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60, TokenBudget: 500}, agent.Tool{Name: "calculator", Kind: "calculator"}),
		},
		replies: map[string][]contract.CallModelResult{
			"lead": {toolReply(delegateCall("c1", "researcher", "think hard")), textReply("never")},
			"researcher": {{ToolCalls: []agent.ToolCall{calc("r1", "1+1")}, Usage: agent.Usage{TotalTokens: 95}},
				textReply("never either")},
		},
	}
	env := newTeamEnv(t, tm)
	req := request()
	req.AgentID = "lead"
	_, failure := runTurn(t, env, req)
	require.NotNil(t, failure)
	require.Equal(t, agent.ErrTypeTokenBudget, failure.Type())
	require.Equal(t, "turn used 105 tokens (95 of them by the agents it delegated to); the agent's budget is 100", failure.Message())

	child := tm.childLoads()[0]
	require.Equal(t, 90, child.TokenBudget, "the lower of the child agent's 500 and the 90 left")
	stored := tm.saved["job-1-c1"]
	require.Equal(t, agent.StatusFailed, stored.Status)
	require.Equal(t, agent.ErrTypeTokenBudget, stored.Error.Type)
	require.Equal(t, "turn used 95 tokens; the budget its request set is 90", stored.Error.Message)
	parent := tm.saved["job-1"]
	require.Equal(t, 105, parent.Metadata.TokensUsed)
	require.Equal(t, agent.ToolError, parent.Metadata.ToolCalls[0].Status)
}

// TestDelegateShareBudget: calls delegated side by side share what the
// turn has left.
func TestDelegateShareBudget(t *testing.T) {
	tm := &team{
		agents: map[string]agent.Agent{
			"lead":   teamAgent("lead", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60, TokenBudget: 110}, delegateSpec("")),
			"a":      teamAgent("a", agent.Limits{}),
			"b":      teamAgent("b", agent.Limits{}),
			"unused": teamAgent("unused", agent.Limits{}),
		},
		replies: map[string][]contract.CallModelResult{
			"lead": {toolReply(delegateCall("c1", "a", "x"), delegateCall("c2", "b", "y")), textReply("both answered")},
			"a":    {textReply("from a")},
			"b":    {textReply("from b")},
		},
	}
	env := newTeamEnv(t, tm)
	req := request()
	req.AgentID = "lead"
	res, failure := runTurn(t, env, req)
	require.Nil(t, failure)
	require.Equal(t, "both answered", res.Output)
	children := tm.childLoads()
	require.Len(t, children, 2)
	for _, c := range children {
		require.Equal(t, 50, c.TokenBudget, "(110 - 10) / 2")
	}
	require.Equal(t, 10+7+7+7, res.Metadata.TokensUsed)
}

// TestDelegateCancel: cancelling the turn cancels the child turn in
// flight; both end CANCELED, and the child's tokens still count.
func TestDelegateCancel(t *testing.T) {
	for _, tt := range []struct {
		name       string
		cancel     func(env *testsuite.TestWorkflowEnvironment)
		callStatus string
	}{
		{"by the cancel_turn signal", func(env *testsuite.TestWorkflowEnvironment) {
			env.SignalWorkflow(contract.SignalCancelTurn, agent.CancelRequest{Reason: "enough", RequestedBy: "ana"})
		}, agent.ToolCanceled},
		// As for any tool call in flight: the turn learns that Temporal
		// cancelled it after the round.
		{"by Temporal", func(env *testsuite.TestWorkflowEnvironment) { env.CancelWorkflow() }, agent.ToolError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tm := &team{
				agents: map[string]agent.Agent{
					"lead":       teamAgent("lead", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 600}, delegateSpec("")),
					"researcher": teamAgent("researcher", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 600}),
				},
				replies: map[string][]contract.CallModelResult{
					"lead":       {toolReply(delegateCall("c1", "researcher", "take your time"))},
					"researcher": {textReply("too late")},
				},
				slow: map[string]bool{"researcher": true},
			}
			env := newTeamEnv(t, tm)
			env.RegisterDelayedCallback(func() { tt.cancel(env) }, time.Second)
			req := request()
			req.AgentID = "lead"
			res := runCanceled(t, env, req)
			require.Equal(t, agent.StatusCanceled, res.Status)
			require.Len(t, tm.childLoads(), 1, "the child ran")
			child := tm.saved["job-1-c1"]
			require.Equal(t, agent.StatusCanceled, child.Status, "the child was cancelled and stored its result")
			parent := tm.saved["job-1"]
			require.Equal(t, agent.StatusCanceled, parent.Status)
			require.Equal(t, tt.callStatus, parent.Metadata.ToolCalls[0].Status)
			require.True(t, strings.Contains(parent.Error.Message, "cancelled"), parent.Error.Message)
		})
	}
}
