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

// TestSendMessageRefusesATakenJobID: a message whose job id's workflow
// runs another request (here the Conversation itself holds the id) is
// refused with Conflict when its turn is to start, and leaves nothing
// behind: no transcript entry, and the job id is not remembered as this
// session's, so sending it again is refused the same way rather than
// answered with the other request's turn.
func TestSendMessageRefusesATakenJobID(t *testing.T) {
	in := agent.ConversationInput{TenantID: "demo", SessionID: "s1", AgentID: "assistant"}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	Register(env)
	env.SetStartWorkflowOptions(clientStartOptions(contract.TurnWorkflowID("demo", "j1")))
	var first, again *sendResult
	var transcript agent.Transcript
	env.RegisterDelayedCallback(func() { first = send(env, agent.SendMessage{Prompt: "hello", JobID: "j1"}) }, time.Second)
	env.RegisterDelayedCallback(func() { again = send(env, agent.SendMessage{Prompt: "bye", JobID: "j1"}) }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(contract.QueryTranscript)
		require.NoError(t, err)
		require.NoError(t, v.Get(&transcript))
		env.CancelWorkflow()
	}, 3*time.Second)
	env.ExecuteWorkflow(contract.Conversation, in)

	for _, r := range []*sendResult{first, again} {
		require.True(t, r.accepted)
		require.Error(t, r.err)
		require.Equal(t, agent.ErrTypeConflict, contract.ErrorOf(r.err).Code.Class().Type, "%v", r.err)
		require.Contains(t, r.err.Error(), `job id "j1" names a turn that another request started`)
	}
	require.Zero(t, transcript.Turns)
	require.Empty(t, transcript.Window)
	require.Empty(t, transcript.Pending)
}
