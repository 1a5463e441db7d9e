package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// askScript: "book a trip" asks which city, with choices; "ship it" asks
// a reviewer for an address in free text; an answer comes back as the
// tool's result.
const askScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: trip
    when: {user: '(?i)^book a trip'}
    reply: {tool_calls: [{name: ask_user, arguments: '{"question": "Which city?", "choices": ["Paris", "Rome"]}'}]}
  - name: ship
    when: {user: '(?i)^ship it'}
    reply: {tool_calls: [{name: ask_reviewer, arguments: '{"question": "To which address?"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'Booked for $1.'}
  - name: echo
    reply: {text: 'Hello.'}
`

var askCatalog = `
tenant: demo
default_agent: planner
tools:
  - name: ask_user
    kind: ask_user
  - name: ask_reviewer
    kind: ask_user
    config: {role: approver, timeout_sec: 300}
agents:
  - id: planner
    model: openai:gpt-4o-mini
    tools: [ask_user, ask_reviewer]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
`

// waitQuestion waits until a turn has a question waiting for an answer.
func (e *httpEnv) waitQuestion(streamID, token string) *pb.PendingQuestion {
	e.t.Helper()
	var list pb.ListPendingQuestionsResponse
	require.Eventually(e.t, func() bool {
		e.ok("GET", "/v1/"+streamID+"/questions", token, "", &list)
		return len(list.GetQuestions()) == 1
	}, time.Minute, 50*time.Millisecond)
	return list.GetQuestions()[0]
}

// TestAskUser: an agent asks a person over the API and waits; the answer
// is taken only from a token of the question's tenant with its role, and
// only among its choices; it reaches the model as the tool's result, is
// recorded with who answered, and every event of it is in the log.
func TestAskUser(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script, o.Catalogs = askScript, []string{askCatalog, httpCatalogs[1]} })

	t.Run("choices", func(t *testing.T) {
		job := "ask-" + testserver.RandomID()
		var started pb.StartResponse
		e.ok("POST", "/v1/turns", e.user, `{"job_id": "`+job+`", "prompt": "Book a trip"}`, &started)
		stream := started.GetStreamId()
		q := e.waitQuestion(stream, e.user)
		require.Equal(t, "Which city?", q.GetQuestion())
		require.Equal(t, []string{"Paris", "Rome"}, q.GetChoices())
		require.Equal(t, "user", q.GetRole())
		path := "/v1/" + stream + "/questions/" + q.GetCallId()

		// Refused, and nothing is lost: another tenant, no answer, an
		// answer outside the choices, a call that does not wait.
		e.problem("POST", path, e.rival, `{"answer": "Paris"}`, http.StatusNotFound)
		p := e.problem("POST", path, e.user, `{}`, http.StatusBadRequest)
		require.Contains(t, p.Detail, "answer is required")
		p = e.problem("POST", path, e.user, `{"answer": "Oslo"}`, http.StatusBadRequest)
		require.Contains(t, p.Detail, `the answer must be one of the choices: "Paris", "Rome"`)
		p = e.problem("POST", "/v1/"+stream+"/questions/nope", e.user, `{"answer": "Paris"}`, http.StatusNotFound)
		require.Contains(t, p.Detail, `no question "nope" waits for an answer`)
		require.Equal(t, q.GetCallId(), e.waitQuestion(stream, e.user).GetCallId(), "still waiting")

		// Who answers is the token's holder: a body cannot say.
		p = e.problem("POST", path, e.user, `{"answer": "Rome", "answerer": "someone else"}`, http.StatusBadRequest)
		require.Contains(t, p.Detail, `unknown field "answerer"`)
		var ack pb.AnswerResponse
		e.ok("POST", path, e.user, `{"answer": "Rome"}`, &ack)
		require.Equal(t, agent.QuestionAnswered, ack.GetOutcome())
		p = e.problem("POST", path, e.user, `{"answer": "Paris"}`, http.StatusConflict)
		require.Contains(t, p.Detail, "already answered")

		ee := &env{Server: e.Server, t: t}
		res, err := ee.result(stream)
		require.NoError(t, err)
		require.Equal(t, "Booked for Rome.", res.Output)

		// The model read the answer as the tool's result.
		reqs := e.Model.Requests()
		last := reqs[len(reqs)-1].Messages
		require.Equal(t, "tool", last[len(last)-1].Role)
		require.Equal(t, "Rome", last[len(last)-1].Content)

		recs, err := e.Store().Approvals(context.Background(), "demo", job)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, agent.QuestionAnswered, recs[0].Outcome)
		require.Equal(t, "uma", recs[0].Approver, "the token's holder, not the body's")

		var kinds []string
		for _, ev := range e.events(stream, e.user) {
			switch {
			case ev.GetQuestion() != nil:
				kinds = append(kinds, "question "+ev.GetQuestion().GetText())
			case ev.GetQuestionAnswered() != nil:
				a := ev.GetQuestionAnswered()
				kinds = append(kinds, fmt.Sprintf("%s by %s via %s", a.GetOutcome(), a.GetAnswerer(), a.GetVia()))
			case ev.GetStatus() != nil:
				kinds = append(kinds, ev.GetStatus().GetStatus().String())
			}
		}
		require.Equal(t, []string{"STATUS_RUNNING", "question Which city?", "STATUS_WAITING_INPUT", "answered by uma via update",
			"STATUS_RUNNING", "STATUS_COMPLETED"}, kinds)
		ee.replay(stream, "turn_ask_user")
	})

	t.Run("role", func(t *testing.T) {
		job := "ship-" + testserver.RandomID()
		var started pb.StartResponse
		e.ok("POST", "/v1/turns", e.user, `{"job_id": "`+job+`", "prompt": "Ship it"}`, &started)
		stream := started.GetStreamId()
		q := e.waitQuestion(stream, e.user)
		require.Equal(t, "approver", q.GetRole())
		path := "/v1/" + stream + "/questions/" + q.GetCallId()
		p := e.problem("POST", path, e.user, `{"answer": "12 Rue de la Paix"}`, http.StatusForbidden)
		require.Contains(t, p.Detail, "needs the role approver; uma has the roles user")

		// A reviewer answers over gRPC.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ack, err := pb.NewAgentServiceClient(e.Conn).Answer(grpcAs(ctx, e.approver),
			&pb.AnswerRequest{StreamId: stream, CallId: q.GetCallId(), Answer: "12 Rue de la Paix"})
		require.NoError(t, err)
		require.Equal(t, agent.QuestionAnswered, ack.GetOutcome())
		res, err := (&env{Server: e.Server, t: t}).result(stream)
		require.NoError(t, err)
		require.Equal(t, "Booked for 12 Rue de la Paix.", res.Output)
		recs, err := e.Store().Approvals(ctx, "demo", job)
		require.NoError(t, err)
		require.Equal(t, "ann", recs[0].Approver)
		require.NotContains(t, string(e.log.Bytes()), "12 Rue de la Paix", "answers are not logged")
	})

	// The catalog refuses a bad config.
	err := testserver.ApplyCatalogs(context.Background(), e.Store(), e.Tools(), strings.Replace(askCatalog, "role: approver", "role: Approver", 1))
	require.ErrorContains(t, err, "role")
}
