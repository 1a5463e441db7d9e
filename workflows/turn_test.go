package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// fakeTurn scripts the activities of one turn for the workflow tests: the
// model's replies in order and the tools' results by name. It records
// what the workflow asked for.
type fakeTurn struct {
	agent   agent.Agent
	replies []contract.CallModelResult
	tools   map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error)

	mu         sync.Mutex // activities of one step run concurrently
	modelCalls []contract.CallModelInput
	toolCalls  []contract.ExecuteToolInput
	saved      []agent.TurnResult
	// savedFailures are the tool failures SaveResult was asked to store.
	savedFailures []contract.ToolFailure
	existing      *agent.TurnResult
	// onModel runs inside CallModel before it returns, as a streaming
	// call's last signals do.
	onModel func(contract.CallModelInput)
	// failModel, when it returns an error, fails the call with it.
	failModel func(contract.CallModelInput) error
	approvals []agent.ApprovalRecord
	// dbDown fails that many database step attempts (Route, LoadAgent,
	// SaveResult, RecordApproval) as an unreachable database would.
	dbDown   int
	dbFailed int
	// saveDown fails that many SaveResult attempts the same way.
	saveDown int
	// hold makes calls of these tools run until they are cancelled, or
	// for an hour; toolHeartbeats holds the heartbeat timeout each call
	// ran with.
	hold           map[string]bool
	toolHeartbeats []time.Duration
	// toolTimeouts holds the start-to-close timeout each call ran with.
	toolTimeouts []time.Duration
	// modelTimeouts holds the start-to-close timeout each model call
	// attempt ran with.
	modelTimeouts []time.Duration
}

func newEnv(t *testing.T, f *fakeTurn) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(AgentTurn, workflow.RegisterOptions{Name: contract.AgentTurn})
	registerContract(env)

	env.OnActivity(contract.Route, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RouteInput) (contract.RouteResult, error) {
			if err := f.database(); err != nil {
				return contract.RouteResult{}, err
			}
			if in.AgentID != "" {
				return contract.RouteResult{AgentID: in.AgentID, Rule: contract.RuleExplicit}, nil
			}
			return contract.RouteResult{AgentID: f.agent.ID, Rule: contract.RuleDefault}, nil
		})
	env.OnActivity(contract.LoadAgent, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.LoadAgentInput) (contract.LoadAgentResult, error) {
			if err := f.database(); err != nil {
				return contract.LoadAgentResult{}, err
			}
			if f.existing != nil {
				return contract.LoadAgentResult{Existing: f.existing}, nil
			}
			if in.AgentID != f.agent.ID {
				return contract.LoadAgentResult{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("agent %q not found", in.AgentID), agent.ErrTypeAgentNotFound, nil)
			}
			return contract.LoadAgentResult{Agent: f.agent}, nil
		})
	env.OnActivity(contract.CallModel, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.CallModelInput) (contract.CallModelResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.modelCalls = append(f.modelCalls, in)
			f.modelTimeouts = append(f.modelTimeouts, activity.GetInfo(ctx).StartToCloseTimeout)
			if f.onModel != nil {
				f.onModel(in)
			}
			if f.failModel != nil {
				if err := f.failModel(in); err != nil {
					return contract.CallModelResult{}, err
				}
			}
			if len(f.replies) == 0 {
				return contract.CallModelResult{}, errors.New("no scripted reply left")
			}
			r := f.replies[0]
			if len(f.replies) > 1 {
				f.replies = f.replies[1:]
			}
			return r, nil
		})
	env.OnActivity(contract.ExecuteTool, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
			f.mu.Lock()
			f.toolHeartbeats = append(f.toolHeartbeats, activity.GetInfo(ctx).HeartbeatTimeout)
			f.toolTimeouts = append(f.toolTimeouts, activity.GetInfo(ctx).StartToCloseTimeout)
			if f.hold[in.Call.Name] {
				f.toolCalls = append(f.toolCalls, in)
				f.mu.Unlock()
				select {
				case <-ctx.Done():
					return contract.ExecuteToolResult{}, ctx.Err()
				case <-time.After(time.Hour):
					return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolOK, Preview: "too late"}, nil
				}
			}
			defer f.mu.Unlock()
			f.toolCalls = append(f.toolCalls, in)
			run, ok := f.tools[in.Call.Name]
			if !ok {
				return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolError, Preview: "no such tool"}, nil
			}
			return run(in)
		})
	env.OnActivity(contract.SaveResult, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.SaveResultInput) (agent.TurnResult, error) {
			if err := f.database(); err != nil {
				return agent.TurnResult{}, err
			}
			if f.saveFailure() {
				return agent.TurnResult{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			r := in.Result
			r.ResultRef = "artifact://test-" + in.Request.JobID
			f.saved = append(f.saved, r)
			f.savedFailures = append(f.savedFailures, in.ToolFailures...)
			return r, nil
		})
	env.OnActivity(contract.RecordApproval, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r agent.ApprovalRecord) error {
			if err := f.database(); err != nil {
				return err
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.approvals = append(f.approvals, r)
			return nil
		})
	return env
}

// database fails while the fake database is down.
func (f *fakeTurn) database() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dbFailed < f.dbDown {
		f.dbFailed++
		return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	return nil
}

func (f *fakeTurn) saveFailure() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.saveDown > 0 {
		f.saveDown--
		return true
	}
	return false
}

func testAgent() agent.Agent {
	return agent.Agent{
		TenantID: "t1", ID: "assistant", Version: 3, Model: "openai:gpt-4o-mini",
		Tools:  []agent.Tool{{Name: "calculator", Kind: "calculator"}},
		Limits: agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60},
	}
}

func toolReply(calls ...agent.ToolCall) contract.CallModelResult {
	return contract.CallModelResult{ToolCalls: calls, Usage: agent.Usage{TotalTokens: 10}, Model: "openai:gpt-4o-mini"}
}

func textReply(s string) contract.CallModelResult {
	return contract.CallModelResult{Content: s, Usage: agent.Usage{TotalTokens: 7}, Model: "openai:gpt-4o-mini"}
}

func calc(id, expr string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: "calculator", Arguments: fmt.Sprintf(`{"expression":%q}`, expr)}
}

func okTool(out string) func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
	return func(in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
		return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolOK, Preview: out}, nil
	}
}

func request() agent.TurnRequest {
	return agent.TurnRequest{TenantID: "t1", JobID: "job-1", Prompt: "What is 12.5 * 4?"}
}

// runTurn executes the workflow and returns its result or failure.
func runTurn(t *testing.T, env *testsuite.TestWorkflowEnvironment, req agent.TurnRequest) (agent.TurnResult, *temporal.ApplicationError) {
	t.Helper()
	env.ExecuteWorkflow(contract.AgentTurn, req)
	require.True(t, env.IsWorkflowCompleted())
	if err := env.GetWorkflowError(); err != nil {
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "workflow error is not an application error: %v", err)
		return agent.TurnResult{}, app
	}
	var res agent.TurnResult
	require.NoError(t, env.GetWorkflowResult(&res))
	return res, nil
}

func TestAgentTurn(t *testing.T) {
	tests := []struct {
		name    string
		replies []contract.CallModelResult
		tools   map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error)
		check   func(t *testing.T, f *fakeTurn, res agent.TurnResult)
	}{
		{
			name:    "no tool",
			replies: []contract.CallModelResult{textReply("Hello!")},
			check: func(t *testing.T, f *fakeTurn, res agent.TurnResult) {
				require.Equal(t, agent.StatusCompleted, res.Status)
				require.Equal(t, "Hello!", res.Output)
				require.Empty(t, res.Metadata.ToolCalls)
				require.NotNil(t, res.Metadata.ToolCalls, "tool_calls is [] in JSON, not null")
				require.Equal(t, 7, res.Metadata.TokensUsed)
				require.Len(t, f.modelCalls, 1)
				require.Equal(t, 1, f.modelCalls[0].Seq)
			},
		},
		{
			name:    "one tool",
			replies: []contract.CallModelResult{toolReply(calc("c1", "12.5 * 4")), textReply("12.5 * 4 = 50")},
			tools:   map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("50")},
			check: func(t *testing.T, f *fakeTurn, res agent.TurnResult) {
				require.Equal(t, "12.5 * 4 = 50", res.Output)
				require.Equal(t, []agent.ToolCallRecord{{CallID: "c1", Tool: "calculator", Args: []byte(`{"expression":"12.5 * 4"}`), Status: agent.ToolOK}}, res.Metadata.ToolCalls)
				require.Equal(t, 17, res.Metadata.TokensUsed)
				require.Equal(t, 3, res.Metadata.AgentVersion)
				require.Equal(t, "openai:gpt-4o-mini", res.Metadata.LLMModel)
				require.Equal(t, contract.RuleDefault, res.Metadata.RouteRule)
				require.Len(t, f.toolCalls, 1)
				require.Equal(t, 2, f.toolCalls[0].Seq)
				require.Equal(t, []int{1, 3}, []int{f.modelCalls[0].Seq, f.modelCalls[1].Seq})
				require.Equal(t, 3, f.modelCalls[1].AgentVersion, "the pinned version is used for every call")
			},
		},
		{
			name: "several tool calls in one step",
			replies: []contract.CallModelResult{
				toolReply(calc("a", "1+1"), calc("b", "2+2"), calc("c", "3+3")),
				textReply("2, 4 and 6"),
			},
			tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("ok")},
			check: func(t *testing.T, f *fakeTurn, res agent.TurnResult) {
				require.Equal(t, "2, 4 and 6", res.Output)
				require.Len(t, res.Metadata.ToolCalls, 3)
				seqs := map[string]int{}
				for _, c := range f.toolCalls {
					seqs[c.Call.ID] = c.Seq
				}
				require.Equal(t, map[string]int{"a": 2, "b": 3, "c": 4}, seqs)
				require.Equal(t, 5, f.modelCalls[1].Seq)
				for i, id := range []string{"a", "b", "c"} {
					require.Equal(t, id, res.Metadata.ToolCalls[i].CallID, "records keep the model's order")
				}
			},
		},
		{
			name:    "failed tool is reported to the model",
			replies: []contract.CallModelResult{toolReply(calc("c1", "1/0")), textReply("cannot divide by zero")},
			tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){
				"calculator": func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
					return contract.ExecuteToolResult{}, temporal.NewNonRetryableApplicationError("backend down", "ToolFailed", nil)
				},
			},
			check: func(t *testing.T, f *fakeTurn, res agent.TurnResult) {
				require.Equal(t, agent.StatusCompleted, res.Status)
				require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
				require.Equal(t, []contract.ToolFailure{{Seq: 2, CallID: "c1", Tool: "calculator", Message: "backend down"}},
					f.modelCalls[1].ToolFailures)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTurn{agent: testAgent(), replies: tt.replies, tools: tt.tools}
			env := newEnv(t, f)
			res, failure := runTurn(t, env, request())
			require.Nil(t, failure)
			require.Equal(t, "job-1", res.JobID)
			require.Equal(t, "artifact://test-job-1", res.ResultRef, "the stored result is returned")
			require.Len(t, f.saved, 1)
			tt.check(t, f, res)
		})
	}
}

func TestAgentTurnFailures(t *testing.T) {
	tests := []struct {
		name     string
		req      func(*agent.TurnRequest)
		agent    func(*agent.Agent)
		replies  []contract.CallModelResult
		slow     bool // the model never answers in time
		wantType string
		wantMsg  string
		saved    bool
	}{
		{name: "missing tenant", req: func(r *agent.TurnRequest) { r.TenantID = "" }, wantType: agent.ErrTypeInvalidRequest, wantMsg: "tenant_id is required"},
		{name: "empty prompt", req: func(r *agent.TurnRequest) { r.Prompt = "  " }, wantType: agent.ErrTypeInvalidRequest, wantMsg: "prompt is required"},
		{name: "unknown major version", req: func(r *agent.TurnRequest) { r.Version = "2.0" }, wantType: agent.ErrTypeInvalidRequest, wantMsg: `version "2.0" is not supported`},
		{name: "bad history mode", req: func(r *agent.TurnRequest) { r.History = "all" }, wantType: agent.ErrTypeInvalidRequest, wantMsg: `history "all"`},
		{name: "context over bounds", req: func(r *agent.TurnRequest) {
			r.Context.Metadata = map[string]string{}
			for i := range agent.MaxContextMetadata + 1 {
				r.Context.Metadata[fmt.Sprint("k", i)] = "v"
			}
		}, wantType: agent.ErrTypeInvalidRequest, wantMsg: "context.metadata has 65 keys; the limit is 64"},
		{name: "unknown agent", req: func(r *agent.TurnRequest) { r.AgentID = "nobody" }, wantType: agent.ErrTypeAgentNotFound, wantMsg: `agent "nobody" not found`},
		{name: "malformed envelope", req: func(r *agent.TurnRequest) { r.CreatedAt = "yesterday" }, wantType: agent.ErrTypeInvalidRequest, wantMsg: `created_at "yesterday": want an RFC 3339 time`},
		{
			name:     "max iterations",
			agent:    func(a *agent.Agent) { a.Limits.MaxIterations = 2 },
			replies:  []contract.CallModelResult{toolReply(calc("c", "1+1"))},
			wantType: agent.ErrTypeMaxIterations, wantMsg: "after 2 iterations", saved: true,
		},
		{
			name:     "token budget",
			agent:    func(a *agent.Agent) { a.Limits.TokenBudget = 15 },
			replies:  []contract.CallModelResult{toolReply(calc("c", "1+1"))},
			wantType: agent.ErrTypeTokenBudget, wantMsg: "budget is 15", saved: true,
		},
		{
			name:     "timeout",
			agent:    func(a *agent.Agent) { a.Limits.TurnTimeoutSec = 30 },
			slow:     true,
			wantType: agent.ErrTypeTimeout, wantMsg: "within its timeout of 30s", saved: true,
		},
		{
			name:     "request timeout lowers the agent's",
			req:      func(r *agent.TurnRequest) { r.TimeoutSec = 5 },
			slow:     true,
			wantType: agent.ErrTypeTimeout, wantMsg: "within its timeout of 5s", saved: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTurn{agent: testAgent(), replies: tt.replies,
				tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("2")}}
			if tt.agent != nil {
				tt.agent(&f.agent)
			}
			env := newEnv(t, f)
			if tt.slow {
				env.OnActivity(contract.CallModel, mock.Anything, mock.Anything).
					After(time.Hour).Return(textReply("too late"), nil).Maybe()
			}
			req := request()
			if tt.req != nil {
				tt.req(&req)
			}
			_, failure := runTurn(t, env, req)
			require.NotNil(t, failure)
			require.Equal(t, tt.wantType, failure.Type())
			require.Contains(t, failure.Message(), tt.wantMsg)
			require.True(t, failure.NonRetryable())

			var res agent.TurnResult
			require.NoError(t, failure.Details(&res), "the failure carries the TurnResult")
			require.NotNil(t, res.Error)
			require.Equal(t, tt.wantType, res.Error.Type)
			if tt.saved {
				require.Len(t, f.saved, 1, "a failed turn's result is stored")
				require.Equal(t, agent.StatusFailed, f.saved[0].Status)
				require.Equal(t, agent.StatusFailed, res.Status)
			} else {
				require.Empty(t, f.saved, "a rejected request stores nothing")
				require.Equal(t, agent.StatusRejected, res.Status)
			}
		})
	}
}

func TestAgentTurnReturnsStoredResult(t *testing.T) {
	stored := agent.TurnResult{Version: "1.0", JobID: "job-1", Status: agent.StatusCompleted, Output: "50", ResultRef: "artifact://x"}
	f := &fakeTurn{agent: testAgent(), existing: &stored}
	env := newEnv(t, f)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, agent.StreamCompleted, res.StreamTail[len(res.StreamTail)-1].Status, "the log's end comes with the result, for followers")
	res.StreamTail = nil
	require.Equal(t, stored, res)
	require.Empty(t, f.modelCalls, "a job with a stored result does not call the model again")
	require.Empty(t, f.saved)
}

func TestAgentTurnDefaultsJobIDToWorkflowID(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{textReply("hi")}}
	env := newEnv(t, f)
	env.SetStartWorkflowOptions(clientStartOptions("turn/t1/manual"))
	req := request()
	req.JobID = ""
	res, failure := runTurn(t, env, req)
	require.Nil(t, failure)
	require.Equal(t, "turn/t1/manual", res.JobID)
}

// TestStreamedTurnEvents signals batches from inside CallModel, as a
// streaming call does: the log holds them in order, each step between
// its step_start and step_finish, its streamed events (reasoning, tokens,
// argument deltas) before its usage and tool events; step_finish carries
// the call's usage and finish reason, told from the reply when the
// provider gave none.
func TestStreamedTurnEvents(t *testing.T) {
	first := toolReply(calc("c1", "12.5*4"))
	first.Usage = agent.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	first.FinishReason = agent.FinishToolCalls
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{first, textReply("12.5 * 4 = 50")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("50")}}
	env := newEnv(t, f)
	delta := func(args string) agent.Event {
		return agent.Event{Kind: agent.EventToolArgsDelta, Tool: &agent.ToolEvent{CallID: "c1", Name: "calculator", ArgsDelta: args}}
	}
	streamed := map[int][]agent.Event{
		1: {{Kind: agent.EventReasoning, Text: "A product."}, {Kind: agent.EventToken, Text: "Let me "}, {Kind: agent.EventToken, Text: "compute."},
			delta(""), delta(`{"expression":"12.5*4"}`)},
		3: {{Kind: agent.EventToken, Text: "12.5 * 4"}, {Kind: agent.EventToken, Text: " = 50"}},
	}
	f.onModel = func(in contract.CallModelInput) {
		require.True(t, in.Stream)
		next := in.FirstIndex
		for _, e := range streamed[in.Seq] {
			e.Index, e.Step, e.Attempt = next, in.Seq, 1
			b := agent.TokenBatch{StreamID: in.StreamID, Step: in.Seq, Attempt: 1, First: next, Events: []agent.Event{e}}
			env.SignalWorkflow(contract.SignalTokens, b)
			next++
		}
	}
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, "12.5 * 4 = 50", res.Output)

	v, err := env.QueryWorkflow(contract.QueryEvents, agent.EventsQuery{})
	require.NoError(t, err)
	var page agent.EventsPage
	require.NoError(t, v.Get(&page))
	require.True(t, page.Done)
	var kinds []string
	for i, e := range page.Events {
		require.Equal(t, int64(i+1), e.Index)
		k := string(e.Kind)
		if e.Kind == agent.EventStatus {
			k += ":" + e.Status
		}
		kinds = append(kinds, k)
	}
	require.Equal(t, []string{
		"status:RUNNING", "step_start", "reasoning", "token", "token", "tool_args_delta", "tool_args_delta", "usage", "tool_start", "tool_end", "step_finish",
		"step_start", "token", "token", "usage", "step_finish", "content", "status:COMPLETED",
	}, kinds)
	require.Equal(t, "Let me compute.12.5 * 4 = 50", agent.ReplayText(page.Events))
	require.Equal(t, "A product.", agent.ReplayReasoning(page.Events))
	var steps []string
	for _, e := range page.Events {
		require.NoError(t, e.Validate(), "%s", e)
		switch e.Kind {
		case agent.EventStepStart:
			steps = append(steps, fmt.Sprintf("start %d", e.Step))
		case agent.EventStepFinish:
			steps = append(steps, fmt.Sprintf("finish %d %s %d", e.Step, e.FinishReason, e.Usage.TotalTokens))
		}
	}
	require.Equal(t, []string{"start 1", "finish 1 tool_calls 15", "start 3", "finish 3 stop 7"}, steps,
		"step numbers are the turn's steps, which tool calls share; the second reply gave no reason")
	require.Equal(t, int64(3), f.modelCalls[0].FirstIndex, "the step's first streamed event follows its step_start")
}

// A local tool runs as a local activity with the same input, and a
// failure of it reaches the model like an activity's.
func TestAgentTurnLocalTool(t *testing.T) {
	for _, tt := range []struct {
		name   string
		tool   func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error)
		status string
	}{
		{"ok", okTool("50"), agent.ToolOK},
		{"failed", func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
			return contract.ExecuteToolResult{}, temporal.NewNonRetryableApplicationError("backend down", "ToolFailed", nil)
		}, agent.ToolError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ag := testAgent()
			ag.Tools[0].Execution = agent.ToolLocal
			f := &fakeTurn{agent: ag,
				replies: []contract.CallModelResult{toolReply(calc("c1", "12.5 * 4")), textReply("done")},
				tools:   map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": tt.tool}}
			env := newEnv(t, f)
			res, failure := runTurn(t, env, request())
			require.Nil(t, failure)
			require.Equal(t, "done", res.Output)
			require.Len(t, f.toolCalls, 1)
			require.Equal(t, 2, f.toolCalls[0].Seq)
			require.Equal(t, tt.status, res.Metadata.ToolCalls[0].Status)
			if tt.status == agent.ToolError {
				require.Equal(t, []contract.ToolFailure{{Seq: 2, CallID: "c1", Tool: "calculator", Message: "backend down"}}, f.modelCalls[1].ToolFailures)
			}
		})
	}
}

// A signal whose payload is not a batch (or progress) is dropped: the
// turn goes on, even when that signal is the only one a call sends.
func TestCorruptSignalsDoNotStallTheTurn(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{
		toolReply(calc("c1", "12.5*4")), textReply("12.5 * 4 = 50"),
	}, tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("50")}}
	env := newEnv(t, f)
	f.onModel = func(contract.CallModelInput) {
		env.SignalWorkflow(contract.SignalTokens, "not a batch")
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.SignalToolProgress, 42) }, 0)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, "12.5 * 4 = 50", res.Output)
}

// TestToolCustomEvents: the custom events a running call emits (in its
// tool_progress signals) are logged after its progress message, in order,
// as the call's; one not of its shape is dropped, and a signal with custom
// events only logs no empty tool_progress.
func TestToolCustomEvents(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{toolReply(calc("c1", "12.5*4")), textReply("50")}}
	env := newEnv(t, f)
	f.tools = map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){
		"calculator": func(in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
			env.SignalWorkflow(contract.SignalToolProgress, agent.ToolProgress{CallID: in.Call.ID, Tool: in.Call.Name, Message: "parsing",
				Custom: []agent.CustomEvent{
					{Name: "chart", ID: "c", Value: []byte(`{"points":[1]}`)},
					{Name: "9 not a name", Value: []byte(`1`)},
					{Name: "chart", ID: "c", Value: []byte(`{"points":[1,2]}`)},
				}})
			env.SignalWorkflow(contract.SignalToolProgress, agent.ToolProgress{CallID: in.Call.ID, Tool: in.Call.Name,
				Custom: []agent.CustomEvent{{Name: "done", Value: []byte(`true`)}}})
			return okTool("50")(in)
		},
	}
	_, failure := runTurn(t, env, request())
	require.Nil(t, failure)

	var got []string
	for _, e := range events(t, env) {
		require.NoError(t, e.Validate(), "%s", e)
		switch e.Kind {
		case agent.EventToolProgress:
			got = append(got, "progress "+e.Tool.Message)
		case agent.EventCustom:
			require.Equal(t, &agent.ToolEvent{CallID: "c1", Name: "calculator"}, e.Tool)
			got = append(got, fmt.Sprintf("custom %s %s %s", e.Custom.Name, e.Custom.ID, e.Custom.Value))
		case agent.EventToolStart, agent.EventToolEnd:
			got = append(got, string(e.Kind))
		}
	}
	require.Equal(t, []string{"tool_start", "progress parsing", `custom chart c {"points":[1]}`, `custom chart c {"points":[1,2]}`,
		"custom done  true", "tool_end"}, got)
}
