package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// aguiScript is httpScript with reasoning before each call, and "book a
// trip" asking which city (ask_user).
var aguiScript = strings.NewReplacer(
	`reply: {tool_calls: [{name: careful_calculator`, `reply: {reasoning: 'It costs: ask first.', tool_calls: [{name: careful_calculator`,
	`reply: {tool_calls: [{name: calculator,`, `reply: {reasoning: 'A product: the calculator knows.', tool_calls: [{name: calculator,`,
	"  - name: answer\n", `  - name: trip
    when: {user: '(?i)^book a trip'}
    reply: {tool_calls: [{name: ask_user, arguments: '{"question": "Which city?", "choices": ["Paris", "Rome"]}'}]}
  - name: answer
`,
).Replace(httpScript)

// aguiCatalogs are httpCatalogs with demo's agents exposed over AG-UI,
// and a planner that asks its user.
var aguiCatalogs = []string{
	strings.NewReplacer("    model: openai:gpt-4o-mini\n", "    model: openai:gpt-4o-mini\n    expose: [ag_ui]\n",
		"tools:\n", "tools:\n  - name: ask_user\n    kind: ask_user\n").Replace(httpCatalogs[0]) + `  - id: planner
    model: openai:gpt-4o-mini
    tools: [ask_user]
    expose: [ag_ui]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
`,
	httpCatalogs[1],
}

// aguiEvent is an AG-UI event as the test reads it.
type aguiEvent struct {
	Type            string          `json:"type"`
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ProtocolVersion string          `json:"protocolVersion"`
	MessageID       string          `json:"messageId"`
	Delta           string          `json:"delta"`
	ToolCallID      string          `json:"toolCallId"`
	Content         string          `json:"content"`
	Result          json.RawMessage `json:"result"`
	Outcome         *struct {
		Type       string `json:"type"`
		Interrupts []struct {
			ID             string          `json:"id"`
			Reason         string          `json:"reason"`
			Message        string          `json:"message"`
			ToolCallID     string          `json:"toolCallId"`
			ResponseSchema json.RawMessage `json:"responseSchema"`
			Metadata       struct {
				Agentflow struct {
					StreamID   string `json:"streamId"`
					CallID     string `json:"callId"`
					ApprovalID string `json:"approvalId"`
				} `json:"agentflow"`
			} `json:"metadata"`
		} `json:"interrupts"`
	} `json:"outcome"`
	Usage []struct {
		Provider     string `json:"provider"`
		Model        string `json:"model"`
		InputTokens  int    `json:"inputTokens"`
		OutputTokens int    `json:"outputTokens"`
		TotalTokens  int    `json:"totalTokens"`
	} `json:"usage"`
}

// aguiRun is a run as run.mjs reports it: the events off the wire, and
// what HttpAgent made of them.
type aguiRun struct {
	Events   []aguiEvent `json:"events"`
	Messages []struct {
		ID         string `json:"id"`
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"toolCallId"`
	} `json:"messages"`
	PendingInterrupts []struct {
		ID string `json:"id"`
	} `json:"pendingInterrupts"`
}

// joined is the deltas of the events of type typ, joined.
func (r aguiRun) joined(typ string) string {
	var b strings.Builder
	for _, e := range r.Events {
		if e.Type == typ {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

func (r aguiRun) has(typ string) bool {
	for _, e := range r.Events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func (r aguiRun) last() aguiEvent { return r.Events[len(r.Events)-1] }

// usage is the run's usage, summed over its providers and models.
func (r aguiRun) usage(t *testing.T) [3]int {
	var u [3]int
	for _, x := range r.last().Usage {
		require.Equal(t, [2]string{"openai", "gpt-4o-mini"}, [2]string{x.Provider, x.Model})
		u[0], u[1], u[2] = u[0]+x.InputTokens, u[1]+x.OutputTokens, u[2]+x.TotalTokens
	}
	return u
}

// TestAGUIClient: AG-UI's own client, HttpAgent (@ag-ui/client 1.0.0),
// runs the door's agents, and every event it is sent is valid by
// @ag-ui/core's EventSchemas (run.mjs). A one-tool turn: reasoning, the
// call and its result, the answer's text exactly the stored result's
// (each delta once), RUN_FINISHED with the success outcome and the
// turn's usage. A call that waits for approval: the run ends with an
// interrupt naming the call and its approval; HttpAgent keeps it
// pending, and its next run resumes it: the approver's decision reaches
// the turn through Approve, and the run goes on with the same turn where
// the first stopped, with the call's result and the answer, and the
// usage of its own model calls only. The same resume again reads the
// same run; a token that may not approve, or another tenant's, is
// refused.
func TestAGUIClient(t *testing.T) {
	dir := nodeClient(t, "agui", "@ag-ui/client")
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script, o.Catalogs = aguiScript, aguiCatalogs })
	id := testserver.RandomID()
	thread, carefulThread, planThread := "agui-"+id, "agui-careful-"+id, "agui-plan-"+id
	runs := map[string]string{"first": "agui-first-" + id, "asked": "agui-asked-" + id, "resumed": "agui-resumed-" + id,
		"question": "agui-question-" + id, "answered": "agui-answered-" + id}
	out := runNode(t, dir, "run.mjs", nodeInput(t, map[string]any{"api": e.api, "token": e.all, "thread": thread, "carefulThread": carefulThread, "planThread": planThread, "runs": runs}))
	var got struct{ First, Asked, Resumed, Question, Answered aguiRun }
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The one-tool turn, a message of the thread's session.
	first := got.First
	require.Equal(t, aguiEvent{Type: "RUN_STARTED", ThreadID: thread, RunID: runs["first"], ProtocolVersion: "1.0"}, first.Events[0])
	require.Equal(t, "A product: the calculator knows.", first.joined("REASONING_MESSAGE_CONTENT"))
	require.JSONEq(t, `{"expression": "12.5 * 4"}`, first.joined("TOOL_CALL_ARGS"))
	stored, err := e.Store().Result(ctx, "demo", runs["first"])
	require.NoError(t, err)
	require.Equal(t, "The result is 50.", stored.Output)
	require.Equal(t, stored.Output, first.joined("TEXT_MESSAGE_CONTENT"), "the answer's text, each delta once")
	end := first.last()
	require.Equal(t, "RUN_FINISHED", end.Type)
	require.Equal(t, "success", end.Outcome.Type)
	require.JSONEq(t, `"The result is 50."`, string(end.Result))
	u := logUsage(e.grpcTurn(contract.TurnWorkflowID("demo", runs["first"])))
	require.Equal(t, [3]int{u.PromptTokens, u.CompletionTokens, u.TotalTokens}, first.usage(t), "the turn's usage")
	answer := first.Messages[len(first.Messages)-1]
	require.Equal(t, "assistant", answer.Role)
	require.Equal(t, stored.Output, answer.Content, "the client's message is the answer")
	require.Empty(t, first.PendingInterrupts)

	// The approval: an interrupt, then its resume.
	asked := got.Asked
	job := runs["asked"]
	streamID := contract.TurnWorkflowID("demo", job)
	stop := asked.last()
	require.Equal(t, "RUN_FINISHED", stop.Type)
	require.Equal(t, "interrupt", stop.Outcome.Type)
	require.Len(t, stop.Outcome.Interrupts, 1)
	interrupt := stop.Outcome.Interrupts[0]
	meta := interrupt.Metadata.Agentflow
	require.Equal(t, streamID, meta.StreamID)
	require.Regexp(t, `^apr_[0-9a-f]{24}$`, meta.ApprovalID)
	require.Equal(t, job+"/approval/"+meta.ApprovalID+"/"+meta.CallID, interrupt.ID)
	require.Equal(t, "tool_call", interrupt.Reason)
	require.Equal(t, meta.CallID, interrupt.ToolCallID)
	require.True(t, asked.has("TOOL_CALL_START") && asked.has("REASONING_START"))
	require.False(t, asked.has("TOOL_CALL_RESULT") || asked.has("TEXT_MESSAGE_START"))
	require.Len(t, asked.PendingInterrupts, 1)
	require.Equal(t, interrupt.ID, asked.PendingInterrupts[0].ID, "HttpAgent keeps the interrupt pending")

	resumed := got.Resumed
	require.Equal(t, aguiEvent{Type: "RUN_STARTED", ThreadID: carefulThread, RunID: runs["resumed"], ProtocolVersion: "1.0"}, resumed.Events[0])
	require.False(t, resumed.has("TOOL_CALL_START"), "the call is not announced again")
	var result aguiEvent
	for _, ev := range resumed.Events {
		if ev.Type == "TOOL_CALL_RESULT" {
			result = ev
		}
	}
	require.Equal(t, meta.CallID, result.ToolCallID)
	require.Equal(t, "42", result.Content)
	whole, err := e.Store().Result(ctx, "demo", job)
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", whole.Output)
	require.Equal(t, whole.Output, asked.joined("TEXT_MESSAGE_CONTENT")+resumed.joined("TEXT_MESSAGE_CONTENT"))
	require.Equal(t, "success", resumed.last().Outcome.Type)
	require.Empty(t, resumed.PendingInterrupts)
	var roles []string
	for _, m := range resumed.Messages {
		roles = append(roles, m.Role)
		if m.Role == "tool" {
			require.Equal(t, meta.CallID, m.ToolCallID)
			require.Equal(t, "42", m.Content)
		}
	}
	require.Equal(t, []string{"user", "reasoning", "assistant", "tool", "assistant"}, roles,
		"the client's thread: the question, the reasoning, the call, its result across the two runs, the answer")
	require.Equal(t, whole.Output, resumed.Messages[len(resumed.Messages)-1].Content)
	u = logUsage(e.grpcTurn(streamID))
	a, r := asked.usage(t), resumed.usage(t)
	require.Equal(t, [3]int{u.PromptTokens, u.CompletionTokens, u.TotalTokens}, [3]int{a[0] + r[0], a[1] + r[1], a[2] + r[2]},
		"each run counts its own model calls")
	require.Positive(t, a[2])
	require.Positive(t, r[2])
	recs, err := e.Store().Approvals(ctx, "demo", job)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, agent.ApprovalApproved, recs[0].Outcome)
	require.Equal(t, "al", recs[0].Approver, "the token's holder decided")
	require.Equal(t, "checked", recs[0].Reason)

	// The question: an input_required interrupt with its choices, answered
	// by the next run through Answer.
	q := got.Question.last()
	require.Equal(t, "interrupt", q.Outcome.Type)
	require.Len(t, q.Outcome.Interrupts, 1)
	asks := q.Outcome.Interrupts[0]
	require.Equal(t, "input_required", asks.Reason)
	require.Equal(t, "Which city?", asks.Message)
	require.Equal(t, runs["question"]+"/question/"+asks.ToolCallID, asks.ID)
	require.JSONEq(t, `{"type":"object","properties":{"answer":{"type":"string","enum":["Paris","Rome"]}},"required":["answer"],"additionalProperties":false}`,
		string(asks.ResponseSchema))
	answered := got.Answered
	require.Equal(t, "success", answered.last().Outcome.Type)
	require.JSONEq(t, `"The result is Rome."`, string(answered.last().Result))
	trip, err := e.Store().Result(ctx, "demo", runs["question"])
	require.NoError(t, err)
	require.Equal(t, trip.Output, answered.joined("TEXT_MESSAGE_CONTENT"))

	// The same resume again: the same run (the call was decided).
	body, err := json.Marshal(map[string]any{"threadId": carefulThread, "runId": runs["resumed"], "messages": []any{},
		"resume": []any{map[string]any{"interruptId": interrupt.ID, "status": "resolved", "payload": map[string]any{"approved": true, "reason": "checked"}}}})
	require.NoError(t, err)
	require.Equal(t, resumed.Events, aguiPostEvents(t, e, "/ag-ui/careful", e.all, string(body)))
	p := e.problem("POST", "/ag-ui/careful", e.user, string(body), http.StatusForbidden)
	require.Contains(t, p.Detail, "needs the role approver")
	e.problem("POST", "/ag-ui/careful", e.rival, string(body), http.StatusNotFound)
}

// aguiPostEvents posts a run's input to path and reads its events.
func aguiPostEvents(t *testing.T, e *httpEnv, path, token, body string) []aguiEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := e.sseCall(ctx, "POST", path, token, body, nil)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out []aguiEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev aguiEvent
			require.NoError(t, json.Unmarshal([]byte(data), &ev), data)
			out = append(out, ev)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// TestAGUIWaits: a client that does not declare AG-UI 1.0 is not sent
// interrupts: its run goes on waiting and ends with the turn, the
// question answered over the API meanwhile. A 1.0 client's run without a
// thread is a thread of its own, which its resume names; a resume whose
// answer the question does not take, one on another thread, and a
// cancelled question are refused, and the question still waits for the
// answer that then ends the turn. On a thread whose turn waits, a 1.0
// client's new message is refused until a run resumes the interrupts.
func TestAGUIWaits(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script, o.Catalogs = aguiScript, aguiCatalogs })
	id := testserver.RandomID()
	post := func(body string) []aguiEvent {
		t.Helper()
		return aguiPostEvents(t, e, "/ag-ui/planner", e.all, body)
	}

	legacy := "agui-legacy-" + id
	done := make(chan []aguiEvent, 1)
	go func() {
		done <- post(`{"runId":"` + legacy + `","messages":[{"id":"m1","role":"user","content":"Book a trip"}]}`)
	}()
	streamID := contract.TurnWorkflowID("demo", legacy)
	var q pb.ListPendingQuestionsResponse
	require.Eventually(t, func() bool {
		// The run's turn starts with the run: until then it is not found.
		code, data := e.call("GET", "/v1/"+streamID+"/questions", e.all, "")
		return code == http.StatusOK && protojson.Unmarshal(data, &q) == nil && len(q.GetQuestions()) == 1
	}, time.Minute, 50*time.Millisecond)
	code, data := e.call("POST", "/v1/"+streamID+"/questions/"+q.GetQuestions()[0].GetCallId(), e.all, `{"answer": "Paris"}`)
	require.Equal(t, http.StatusOK, code, "%s", data)
	events := <-done
	last := events[len(events)-1]
	require.Equal(t, "RUN_FINISHED", last.Type)
	require.Nil(t, last.Outcome, "no outcome for a client from before 1.0")
	require.JSONEq(t, `"The result is Paris."`, string(last.Result))
	require.Contains(t, aguiTypesOf(events), "CUSTOM", "the question's CUSTOM event")

	job := "agui-own-" + id
	asked := post(`{"runId":"` + job + `","protocolVersion":"1.0","messages":[{"id":"m1","role":"user","content":"Book a trip"}]}`)
	require.Equal(t, job, asked[0].ThreadID, "a run without a thread is a thread of its own")
	interrupt := asked[len(asked)-1].Outcome.Interrupts[0]
	resume := func(thread, status, payload string) string {
		return `{"threadId":"` + thread + `","runId":"` + job + `-2","messages":[],"resume":[{"interruptId":"` + interrupt.ID +
			`","status":"` + status + `"` + payload + `}]}`
	}
	p := e.problem("POST", "/ag-ui/planner", e.all, resume(job, "resolved", `,"payload":{"answer":"Berlin"}`), http.StatusBadRequest)
	require.Contains(t, p.Detail, `the answer must be one of the choices: "Paris", "Rome"`)
	p = e.problem("POST", "/ag-ui/planner", e.all, resume("another-thread", "resolved", `,"payload":{"answer":"Rome"}`), http.StatusNotFound)
	require.Contains(t, p.Detail, `is not one of a turn of agent "planner" on thread "another-thread"`)
	p = e.problem("POST", "/ag-ui/planner", e.all, resume(job, "cancelled", ""), http.StatusBadRequest)
	require.Contains(t, p.Detail, "cancels question")
	require.Equal(t, interrupt.ToolCallID, e.waitQuestion(contract.TurnWorkflowID("demo", job), e.all).GetCallId(), "still waiting")
	// A thread's open interrupts block a 1.0 client's new message.
	thread := "agui-thread-" + id
	waits := post(`{"threadId":"` + thread + `","protocolVersion":"1.0","messages":[{"id":"m1","role":"user","content":"Book a trip"}]}`)
	require.Equal(t, "interrupt", waits[len(waits)-1].Outcome.Type)
	p = e.problem("POST", "/ag-ui/planner", e.all, `{"threadId":"`+thread+`","protocolVersion":"1.0","messages":[{"id":"m2","role":"user","content":"Hello?"}]}`, http.StatusConflict)
	require.Contains(t, p.Detail, `thread "`+thread+`" waits for a person`)

	answered := post(resume(job, "resolved", `,"payload":"Rome"`))
	require.Equal(t, job+"-2", answered[0].RunID)
	require.JSONEq(t, `"The result is Rome."`, string(answered[len(answered)-1].Result))
}

func aguiTypesOf(events []aguiEvent) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.Type
	}
	return out
}
