package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestConversationExtractsMemoriesWhenIdle: a conversation idle for
// memoryIdleAfter after turns of an authenticated caller starts one
// MemoryExtract for them, with that caller and the position; a longer
// silence starts no second one for the same position, a later turn
// starts one for its own, and turns of no caller start none.
func TestConversationExtractsMemoriesWhenIdle(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	Register(env)
	env.OnWorkflow(contract.AgentTurn, mock.Anything, mock.Anything, mock.Anything).Return(agent.TurnResult{Status: agent.StatusCompleted, Output: "noted"}, nil)
	env.RegisterActivityWithOptions(func(context.Context, contract.AgentOnBusyInput) (contract.AgentOnBusyResult, error) {
		return contract.AgentOnBusyResult{}, nil
	}, activity.RegisterOptions{Name: contract.AgentOnBusy})
	var mu sync.Mutex
	var got []contract.MemoryExtractInput
	env.RegisterActivityWithOptions(func(_ context.Context, in contract.MemoryExtractInput) (contract.ExtractMemoriesResult, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, in)
		return contract.ExtractMemoriesResult{Stored: 1}, nil
	}, activity.RegisterOptions{Name: contract.ExtractMemories})

	alice := &agent.Caller{Name: "alice", Issuer: agent.IssuerStaticToken, Subject: "alice"}
	var sent []*sendResult
	at := func(d time.Duration, m agent.SendMessage) {
		env.RegisterDelayedCallback(func() { sent = append(sent, send(env, m)) }, d)
	}
	at(time.Second, agent.SendMessage{Prompt: "I drink only green tea", Caller: alice})
	at(2*time.Second, agent.SendMessage{Prompt: "and I live in Porto", Caller: alice})
	at(2*time.Hour, agent.SendMessage{Prompt: "my daughter is Ana", Caller: alice})
	at(4*time.Hour, agent.SendMessage{Prompt: "from the CLI, no credential"})
	env.RegisterDelayedCallback(env.CancelWorkflow, 6*time.Hour)
	env.ExecuteWorkflow(contract.Conversation, agent.ConversationInput{TenantID: "demo", SessionID: "s1", AgentID: "assistant"})

	for _, r := range sent {
		require.True(t, r.accepted)
		require.NoError(t, r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []contract.MemoryExtractInput{
		{TenantID: "demo", SessionID: "s1", AgentID: "assistant", Caller: alice, Through: 2},
		{TenantID: "demo", SessionID: "s1", AgentID: "assistant", Caller: alice, Through: 3},
	}, got)
}

// TestConversationMemoryIdleFromInput: a conversation whose input names
// its idle time (memory_idle_sec) extracts once it has been quiet that
// long, and not before.
func TestConversationMemoryIdleFromInput(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	Register(env)
	env.OnWorkflow(contract.AgentTurn, mock.Anything, mock.Anything, mock.Anything).Return(agent.TurnResult{Status: agent.StatusCompleted, Output: "noted"}, nil)
	env.RegisterActivityWithOptions(func(context.Context, contract.AgentOnBusyInput) (contract.AgentOnBusyResult, error) {
		return contract.AgentOnBusyResult{}, nil
	}, activity.RegisterOptions{Name: contract.AgentOnBusy})
	var mu sync.Mutex
	var at []time.Time
	env.RegisterActivityWithOptions(func(context.Context, contract.MemoryExtractInput) (contract.ExtractMemoriesResult, error) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, env.Now())
		return contract.ExtractMemoriesResult{Stored: 1}, nil
	}, activity.RegisterOptions{Name: contract.ExtractMemories})

	alice := &agent.Caller{Name: "alice", Issuer: agent.IssuerStaticToken, Subject: "alice"}
	start := env.Now()
	var sent *sendResult
	env.RegisterDelayedCallback(func() { sent = send(env, agent.SendMessage{Prompt: "I drink only green tea", Caller: alice}) }, time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, 5*time.Minute)
	env.ExecuteWorkflow(contract.Conversation, agent.ConversationInput{TenantID: "demo", SessionID: "s1", AgentID: "assistant", MemoryIdleSec: 30})

	require.True(t, sent.accepted)
	require.NoError(t, sent.err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, at, 1)
	took := at[0].Sub(start)
	require.GreaterOrEqual(t, took, 31*time.Second, "one second to the message, thirty quiet")
	require.Less(t, took, 2*time.Minute)
}
