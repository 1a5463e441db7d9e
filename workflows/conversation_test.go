package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestSendMessageJobIDNamesOneMessage: a job id the conversation accepted
// lately — in this run or, carried, in an earlier one — answers its own
// message again and refuses another one with Conflict; a job id carried
// without a hash (from an earlier release) refuses nothing.
func TestSendMessageJobIDNamesOneMessage(t *testing.T) {
	in := agent.ConversationInput{TenantID: "demo", SessionID: "s1", AgentID: "assistant"}
	hello := (&conversation{in: in}).hash("j1", agent.SendMessage{Prompt: "hello"})
	in.Carry = &agent.ConversationCarry{Accepted: 2, Recent: []string{"old", "j1"}, RecentHashes: map[string]string{"j1": hello}}

	tests := []struct {
		name     string
		msg      agent.SendMessage
		wantType string // "": accepted, answered with the job's turn
	}{
		{"the same message", agent.SendMessage{Prompt: "hello", JobID: "j1"}, ""},
		{"another prompt", agent.SendMessage{Prompt: "bye", JobID: "j1"}, agent.ErrTypeConflict},
		{"another context", agent.SendMessage{Prompt: "hello", JobID: "j1", Context: agent.TurnContext{UIPage: "/x"}}, agent.ErrTypeConflict},
		{"carried without a hash", agent.SendMessage{Prompt: "anything", JobID: "old"}, ""},
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	Register(env)
	results := make([]*sendResult, len(tests))
	env.RegisterDelayedCallback(func() {
		for i, tt := range tests {
			results[i] = send(env, tt.msg)
		}
	}, time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Second)
	env.ExecuteWorkflow(contract.Conversation, in)

	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := results[i]
			if tt.wantType != "" {
				require.False(t, r.accepted)
				require.Equal(t, tt.wantType, contract.ErrorOf(r.err).Code.Class().Type, "%v", r.err)
				require.Contains(t, r.err.Error(), "names another message of this session")
				return
			}
			require.True(t, r.accepted)
			require.NoError(t, r.err)
			require.Equal(t, agent.SendMessageResult{TurnWorkflowID: "turn/demo/" + tt.msg.JobID, JobID: tt.msg.JobID}, r.res)
		})
	}
}

type sendResult struct {
	accepted bool
	err      error
	res      agent.SendMessageResult
}

func send(env *testsuite.TestWorkflowEnvironment, m agent.SendMessage) *sendResult {
	r := &sendResult{}
	env.UpdateWorkflow(contract.UpdateSendMessage, "", &testsuite.TestUpdateCallback{
		OnAccept: func() { r.accepted = true },
		OnReject: func(err error) { r.err = err },
		OnComplete: func(v any, err error) {
			r.err = err
			r.res, _ = v.(agent.SendMessageResult)
		},
	}, m)
	return r
}
