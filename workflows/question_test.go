package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// askEnv runs a turn whose first reply asks a question with the given
// arguments; the ask tool's fake stores what came of it as its preview.
func askEnv(t *testing.T, config, args string) (*fakeTurn, *testsuite.TestWorkflowEnvironment) {
	a := testAgent()
	a.Tools = append(a.Tools, agent.Tool{Name: "ask", Kind: agent.KindAskUser, Config: []byte(config)})
	a.Limits.ApprovalTimeoutSec = 600
	a.Limits.TurnTimeoutSec = 3600
	f := &fakeTurn{agent: a, replies: []contract.CallModelResult{toolReply(agent.ToolCall{ID: "q1", Name: "ask", Arguments: args}), textReply("done")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){
			"ask": func(in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
				if in.Asked == nil {
					return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolError, Preview: "not asked"}, nil
				}
				if in.Asked.Outcome != agent.QuestionAnswered {
					return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolError, Preview: in.Asked.Message}, nil
				}
				return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolOK, Preview: in.Asked.Answer}, nil
			},
		}}
	return f, newEnv(t, f)
}

func answerUpdate(env *testsuite.TestWorkflowEnvironment, a agent.Answer) *updateResult {
	r := &updateResult{}
	env.UpdateWorkflow(contract.UpdateAnswer, "", &testsuite.TestUpdateCallback{
		OnAccept: func() { r.accepted = true },
		OnReject: func(err error) { r.err = err },
		OnComplete: func(_ any, err error) {
			if err != nil {
				r.err = err
			}
		},
	}, a)
	return r
}

func questionKinds(t *testing.T, env *testsuite.TestWorkflowEnvironment) []string {
	t.Helper()
	var kinds []string
	for _, e := range events(t, env) {
		require.NoError(t, e.Validate(), "%s", e)
		k := string(e.Kind)
		if e.Kind == agent.EventStatus {
			k = e.Status
		}
		if q := e.Question; q != nil && e.Kind == agent.EventQuestionAnswered {
			k += fmt.Sprintf(" %s by %q via %s", q.Outcome, q.Answerer, q.Via)
		}
		kinds = append(kinds, k)
	}
	return kinds
}

// TestQuestionAnswered: the call waits; answers from a token without the
// question's role, outside its choices or to another call are refused;
// the first fitting answer is the call's result; a second is refused.
func TestQuestionAnswered(t *testing.T) {
	f, env := askEnv(t, `{"role":"approver"}`, `{"question":"Which region?","choices":["eu","us"]}`)
	var noRole, notAChoice, other, good, twice *updateResult
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(contract.QueryPendingQuestions)
		require.NoError(t, err)
		var p []agent.PendingQuestion
		require.NoError(t, v.Get(&p))
		require.Len(t, p, 1)
		require.Equal(t, "Which region?", p[0].Question)
		require.Equal(t, []string{"eu", "us"}, p[0].Choices)
		require.Equal(t, "approver", p[0].Role)
		require.Equal(t, 10*time.Minute, p[0].Deadline.Sub(p[0].AskedAt), "the agent's approval timeout")
		require.Empty(t, f.toolCalls, "nothing is stored before the answer")

		noRole = answerUpdate(env, agent.Answer{CallID: "q1", Text: "eu", Answerer: "bo", Roles: []string{"user"}})
		notAChoice = answerUpdate(env, agent.Answer{CallID: "q1", Text: "asia", Answerer: "ana", Roles: []string{"approver"}})
		other = answerUpdate(env, agent.Answer{CallID: "q9", Text: "eu", Answerer: "ana", Roles: []string{"approver"}})
		good = answerUpdate(env, agent.Answer{CallID: "q1", Text: "eu", Answerer: "ana", Roles: []string{"user", "approver"}})
		twice = answerUpdate(env, agent.Answer{CallID: "q1", Text: "us", Answerer: "ana", Roles: []string{"approver"}})
	}, time.Minute)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)

	require.ErrorContains(t, noRole.err, `answering call "q1" needs the role approver; bo has the roles user`)
	require.ErrorContains(t, notAChoice.err, `the answer must be one of the choices: "eu", "us"`)
	require.ErrorContains(t, other.err, `no question "q9" waits for an answer (waiting: q1)`)
	require.True(t, good.accepted)
	require.NoError(t, good.err)
	require.ErrorContains(t, twice.err, `question "q1" was already answered or closed`)

	require.Len(t, f.toolCalls, 1)
	require.Equal(t, &contract.AskedOutcome{Outcome: agent.QuestionAnswered, Answer: "eu", Answerer: "ana"}, f.toolCalls[0].Asked)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.Len(t, f.approvals, 1)
	require.Equal(t, agent.QuestionAnswered, f.approvals[0].Outcome)
	require.Equal(t, "ana", f.approvals[0].Approver)
	require.Equal(t, agent.ViaUpdate, f.approvals[0].Via)
	require.Equal(t, time.Minute, f.approvals[0].DecidedAt.Sub(f.approvals[0].RequestedAt))
	require.Equal(t, []string{"RUNNING", "step_start", "usage", "tool_start", "question", "WAITING_INPUT",
		`question_answered answered by "ana" via update`, "RUNNING", "tool_end", "step_finish",
		"step_start", "usage", "step_finish", "content", "COMPLETED"}, questionKinds(t, env))
}

// TestQuestionBySignal: an operator answers with the temporal CLI's
// signal; one that does not fit is ignored and the call still waits.
func TestQuestionBySignal(t *testing.T) {
	f, env := askEnv(t, ``, `{"question":"Ship to which address?"}`)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalAnswer, agent.Answer{CallID: "q1", Text: "here", Answerer: "ops"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Empty(t, f.toolCalls, "an answer from no role is ignored")
		env.SignalWorkflow(contract.SignalAnswer, agent.Answer{CallID: "q1", Text: "12 Rue de la Paix", Answerer: "ops", Roles: []string{"user"}})
	}, 2*time.Minute)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.Equal(t, "12 Rue de la Paix", f.toolCalls[0].Asked.Answer)
	require.Equal(t, agent.ViaSignal, f.approvals[0].Via)
}

// TestQuestionTimesOut: no answer within the config's timeout: the model
// reads that no one answered.
func TestQuestionTimesOut(t *testing.T) {
	f, env := askEnv(t, `{"timeout_sec":120}`, `{"question":"Proceed?","choices":["yes","no"]}`)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
	require.Equal(t, agent.ApprovalTimedOut, f.toolCalls[0].Asked.Outcome)
	require.Contains(t, f.toolCalls[0].Asked.Message, "no one answered within 2m0s")
	require.Equal(t, agent.ApprovalTimedOut, f.approvals[0].Outcome)
	require.Equal(t, 2*time.Minute, f.approvals[0].DecidedAt.Sub(f.approvals[0].RequestedAt))
	require.Contains(t, questionKinds(t, env), `question_answered timed_out by "" via timeout`)
}

// TestQuestionCanceled: cancelling the turn closes its question.
func TestQuestionCanceled(t *testing.T) {
	f, env := askEnv(t, ``, `{"question":"Proceed?"}`)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalCancelTurn, agent.CancelRequest{RequestedBy: "ana"})
	}, time.Minute)
	res := runCanceled(t, env, request())
	require.Equal(t, "the turn was cancelled by ana", res.Error.Message)
	require.Equal(t, agent.ToolCanceled, res.Metadata.ToolCalls[0].Status)
	require.Empty(t, f.toolCalls)
	require.Equal(t, agent.ApprovalCanceled, f.approvals[0].Outcome)
	require.Contains(t, questionKinds(t, env), `question_answered canceled by "" via cancel`)
}

// TestQuestionBadArguments: a question the model wrote badly is refused
// at once, and the model reads why.
func TestQuestionBadArguments(t *testing.T) {
	f, env := askEnv(t, ``, `{"question":"Pick","choices":["a","a"]}`)
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
	require.Contains(t, f.modelCalls[1].ToolFailures[0].Message, `choice "a" is listed twice`)
	require.Empty(t, f.approvals, "no one was asked")
}
