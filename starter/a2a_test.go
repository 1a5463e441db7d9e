package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	a2adoor "github.com/agentflow/agentflow/internal/gateway/a2a"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/sse"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

const a2aScript = `
rules:
  - name: trip
    when: {user: '(?i)^book a trip'}
    reply: {tool_calls: [{name: ask_user, arguments: '{"question": "Which city?", "choices": ["Paris", "Rome"]}'}]}
  - name: booked
    when: {user: '(?i)^book a trip', tool: '^(Paris|Rome)$'}
    reply: {text: 'Booked for $1.'}
  - name: careful
    when: {user: '(?i)carefully: what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: careful_calculator, arguments: '{"expression": "$1"}'}]}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - name: echo
    reply: {text: 'Hello over A2A.'}
`

const a2aCatalog = `
tenant: demo
default_agent: calc
tools:
  - name: calculator
    kind: calculator
  - name: careful_calculator
    kind: calculator
    approval: always
  - name: ask_user
    kind: ask_user
agents:
  - id: calc
    description: Does arithmetic with a calculator.
    model: openai:gpt-4o-mini
    tools: [calculator]
    expose: [a2a]
  - id: careful
    description: Does arithmetic once a person approves.
    model: openai:gpt-4o-mini
    tools: [careful_calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
    expose: [a2a]
  - id: hidden
    model: openai:gpt-4o-mini
    expose: [mcp]
  - id: planner
    description: Books trips, asking where to.
    model: openai:gpt-4o-mini
    tools: [ask_user]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
    expose: [a2a]
`

const a2aOtherCatalog = `
tenant: other
agents:
  - id: theirs
    model: openai:gpt-4o-mini
    expose: [a2a]
`

// a2aCardExample is calc's agent card as docs/guides/a2a.md shows it:
// the JSON block that starts with its name.
func a2aCardExample(t *testing.T) string {
	t.Helper()
	page, err := docs.Page("guides/a2a.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(page, "```json\n{\n  \"name\": \"calc\"")
	require.True(t, ok, "docs/guides/a2a.md shows calc's agent card")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	return "{\n  \"name\": \"calc\"" + block
}

// a2aEnv is a server with A2A agents, and a2a-go clients of them.
type a2aEnv struct {
	t   *testing.T
	srv *testserver.Server
	ctx context.Context
}

func startA2A(t *testing.T, opts testserver.Options) *a2aEnv {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	if opts.SharedModel == nil {
		opts.Script, opts.Catalogs = a2aScript, []string{a2aCatalog, a2aOtherCatalog}
	}
	opts.Tokens = map[string]string{"tok": "demo", "tok2": "other", "approver": "demo:approver:ops", "both": "demo:user+approver:alice"}
	opts.HTTPAPI = true
	opts.Logger = zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	srv := testserver.Start(t, opts)
	// The SDK's AuthInterceptor sends the credential of the session the
	// context names for the card's bearer scheme.
	return &a2aEnv{t: t, srv: srv, ctx: a2aclient.WithSessionID(ctx, "s")}
}

func (e *a2aEnv) base(agentID string) string {
	return "http://" + e.srv.HTTPAPIAddr() + a2adoor.A2APrefix + agentID
}

// card resolves an agent's card with a2a-go's resolver.
func (e *a2aEnv) card(agentID, token string) (*a2a.AgentCard, error) {
	return agentcard.NewResolver(nil).Resolve(e.ctx, e.base(agentID), agentcard.WithRequestHeader("Authorization", "Bearer "+token))
}

// client is a2a-go's client of an agent's card, with token.
func (e *a2aEnv) client(card *a2a.AgentCard, token string) *a2aclient.Client {
	e.t.Helper()
	creds := a2aclient.NewInMemoryCredentialsStore()
	creds.Set("s", "bearer", a2aclient.AuthCredential(token))
	c, err := a2aclient.NewFromCard(e.ctx, card, a2aclient.WithInterceptors(&a2aclient.AuthInterceptor{Service: creds}))
	require.NoError(e.t, err)
	return c
}

func userMessage(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})}
}

func answerText(t *testing.T, task *a2a.Task) string {
	t.Helper()
	require.Len(t, task.Artifacts, 1, "the answer's artifact")
	var b strings.Builder
	for _, p := range task.Artifacts[0].Parts {
		tp, ok := p.(a2a.TextPart)
		require.True(t, ok, "a text part: %T", p)
		b.WriteString(tp.Text)
	}
	return b.String()
}

func statusText(s a2a.TaskStatus) string {
	if s.Message == nil {
		return ""
	}
	var out []string
	for _, p := range s.Message.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			out = append(out, tp.Text)
		}
	}
	return strings.Join(out, " ")
}

// TestA2AServer: a2a-go's client reads an exposed agent's card, sends it
// a message (a durable one-tool turn, answered with the completed task
// and its answer artifact), streams one (the task, then its status and
// artifact updates in order), reads tasks back and resubscribes to one;
// a contextId is a session. Agents not exposed and other tenants' agents
// and tasks are refused with the protocol's errors.
func TestA2AServer(t *testing.T) {
	e := startA2A(t, testserver.Options{})
	ctx := e.ctx

	card, err := e.card("calc", "tok")
	require.NoError(t, err)
	require.Equal(t, "calc", card.Name)
	require.Equal(t, "Does arithmetic with a calculator.", card.Description)
	require.Equal(t, e.base("calc"), card.URL)
	require.Equal(t, a2adoor.A2AProtocolVersion, card.ProtocolVersion)
	require.Equal(t, a2a.TransportProtocolJSONRPC, card.PreferredTransport)
	require.True(t, card.Capabilities.Streaming)
	require.Len(t, card.Skills, 1)
	require.Equal(t, "Does arithmetic with a calculator.", card.Skills[0].Description)
	require.Equal(t, a2a.HTTPAuthSecurityScheme{Scheme: "bearer", Description: "an agentflow API token with the user role"}, card.SecuritySchemes["bearer"])

	// The card as served, as docs/guides/a2a.md shows it.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base("calc")+"/.well-known/agent-card.json", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, strings.ReplaceAll(a2aCardExample(t), "127.0.0.1:8080", e.srv.HTTPAPIAddr()), string(raw))

	def, err := agentcard.NewResolver(nil).Resolve(ctx, "http://"+e.srv.HTTPAPIAddr(), agentcard.WithRequestHeader("Authorization", "Bearer tok"))
	require.NoError(t, err)
	require.Equal(t, card, def, "the well-known card is the default agent's")

	for _, tc := range []struct{ agent, token string }{{"calc", ""}, {"calc", "nope"}, {"hidden", "tok"}, {"theirs", "tok"}, {"calc", "tok2"}} {
		_, err := e.card(tc.agent, tc.token)
		var notOK *agentcard.ErrStatusNotOK
		require.ErrorAs(t, err, &notOK, "agent %s, token %q", tc.agent, tc.token)
	}

	c := e.client(card, "tok")
	res, err := c.SendMessage(ctx, userMessage("What is 12.5 * 4?"))
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "a task: %T", res)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.True(t, strings.HasPrefix(string(task.ID), "turn/demo/"), "the turn's stream id: %q", task.ID)
	require.NotEmpty(t, task.ContextID)
	require.Equal(t, "The result is 50.", answerText(t, task))

	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	require.Equal(t, task.ContextID, got.ContextID)
	require.Equal(t, "The result is 50.", answerText(t, got))

	// Streamed: the task first, then its states in order, the answer
	// before the final update.
	var states []a2a.TaskState
	var notes []string
	var answer string
	var streamed a2a.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, userMessage("What is 2 + 3?")) {
		require.NoError(t, err)
		switch ev := ev.(type) {
		case *a2a.Task:
			require.Empty(t, states, "the task comes first")
			streamed = ev.ID
			states = append(states, ev.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			require.Equal(t, streamed, ev.TaskID)
			if states[len(states)-1] != ev.Status.State {
				states = append(states, ev.Status.State)
			}
			notes = append(notes, statusText(ev.Status))
			require.Equal(t, ev.Status.State.Terminal(), ev.Final)
		case *a2a.TaskArtifactUpdateEvent:
			require.NotEqual(t, a2a.TaskStateCompleted, states[len(states)-1], "the answer before the end")
			answer += answerText(t, &a2a.Task{Artifacts: []*a2a.Artifact{ev.Artifact}})
		default:
			t.Fatalf("unexpected event %T", ev)
		}
	}
	require.Equal(t, []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted}, states)
	require.Contains(t, notes, "calling the tool calculator")
	require.Equal(t, "The result is 5.", answer)

	// Resubscribing to a task that ended: the task, once.
	var again []a2a.Event
	for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: streamed}) {
		require.NoError(t, err)
		again = append(again, ev)
	}
	require.Len(t, again, 1)
	require.Equal(t, a2a.TaskStateCompleted, again[0].(*a2a.Task).Status.State)

	// A contextId is a session: its messages go to its Conversation.
	msg := userMessage("hello")
	msg.Message.ContextID = "chat-1"
	res, err = c.SendMessage(ctx, msg)
	require.NoError(t, err)
	task = res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Equal(t, "chat-1", task.ContextID)
	require.Equal(t, "Hello over A2A.", answerText(t, task))
	got, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, "chat-1", got.ContextID)

	// Refusals, with the protocol's errors; nothing starts.
	other := e.client(card, "tok2")
	hidden := e.client(&a2a.AgentCard{URL: e.base("hidden"), PreferredTransport: a2a.TransportProtocolJSONRPC,
		SecuritySchemes: card.SecuritySchemes, Security: card.Security}, "tok")
	filePart := userMessage("x")
	filePart.Message.Parts = append(filePart.Message.Parts, a2a.FilePart{File: a2a.FileURI{URI: "https://example.com/a.txt"}})
	forTask := userMessage("more")
	forTask.Message.TaskID = streamed
	for _, tc := range []struct {
		name string
		call func() error
		kind error
		want string
	}{
		{"another tenant's agent", func() error { _, err := other.SendMessage(ctx, userMessage("hi")); return err },
			a2a.ErrInvalidRequest, `no agent "calc" is served over A2A`},
		{"an agent not exposed", func() error { _, err := hidden.SendMessage(ctx, userMessage("hi")); return err },
			a2a.ErrInvalidRequest, `no agent "hidden" is served over A2A`},
		{"another tenant's task", func() error {
			theirs, err := e.card("theirs", "tok2")
			require.NoError(t, err)
			_, err = e.client(theirs, "tok2").GetTask(ctx, &a2a.TaskQueryParams{ID: streamed})
			return err
		}, a2a.ErrTaskNotFound, "not found"},
		{"a task that does not exist", func() error { _, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: "turn/demo/nope"}); return err },
			a2a.ErrTaskNotFound, "not found"},
		{"a malformed task id", func() error { _, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: "nope"}); return err },
			a2a.ErrTaskNotFound, "not found"},
		{"a file part", func() error { _, err := c.SendMessage(ctx, filePart); return err },
			a2a.ErrUnsupportedContentType, "send text or data parts"},
		{"a message for a task that has ended", func() error { _, err := c.SendMessage(ctx, forTask); return err },
			a2a.ErrUnsupportedOperation, "has ended completed and takes no more input"},
		{"an empty message", func() error { _, err := c.SendMessage(ctx, userMessage("  ")); return err },
			a2a.ErrInvalidParams, "the message has no text"},
		{"a cancel of a finished task", func() error { _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: streamed}); return err },
			a2a.ErrTaskNotCancelable, "has already ended completed"},
		{"push notifications", func() error {
			_, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: streamed})
			return err
		}, a2a.ErrPushNotificationNotSupported, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, tc.kind)
			require.ErrorContains(t, err, tc.want)
		})
	}

	// Nothing was started for the refusals: the turns above are the
	// tenant's workflows (the session's are its Conversation and turn).
	require.Eventually(t, func() bool {
		n, err := e.srv.Client().CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "TaskQueue = '" + e.srv.TaskQueue + "'"})
		return err == nil && n.GetCount() == 4
	}, 10*time.Second, 100*time.Millisecond)

	// Malformed JSON-RPC, unknown methods, oversized bodies, no token.
	for _, tc := range []struct {
		name, token, body string
		status            int
		code              int
		want              string
	}{
		{"not JSON", "tok", `{"jsonrpc":`, 200, -32700, "parse error"},
		{"not JSON-RPC 2.0", "tok", `{"jsonrpc":"1.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, 200, -32600, "invalid request"},
		{"an unknown method", "tok", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}`, 200, -32601, "method not found"},
		{"params of the wrong shape", "tok", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":3}}`, 200, -32700, "parse error"},
		{"an oversized body", "tok", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"` +
			strings.Repeat("a", gateway.MaxBodyBytes) + `"}]}}}`, 413, -32602, "larger than"},
		// What A2A leaves to the binding: HTTP's status, and -32000.
		{"no token", "", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, 401, -32000, "missing bearer token"},
		{"an approver's token", "approver", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, 403, -32000, "needs the role user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base("calc"), strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			var out struct {
				Error struct {
					Code    int            `json:"code"`
					Message string         `json:"message"`
					Data    map[string]any `json:"data"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &out), "%s", body)
			require.Equal(t, tc.code, out.Error.Code, "%s", body)
			require.Contains(t, string(body), tc.want)
		})
	}
}

// TestA2AApprovalAndCancel: a task whose tool call waits for approval is
// input-required; approved over the approvals API it completes, and a
// client that resubscribed sees it through. A task cancelled while it
// waits ends canceled. Tasks are turns, not a gateway's memory: a second
// gateway (another process's, sharing only the database, Temporal and
// the task queue) answers for the tasks the first one started.
func TestA2AApprovalAndCancel(t *testing.T) {
	dbURL := devtest.Database(t)
	first := startA2A(t, testserver.Options{DatabaseURL: dbURL})
	e := startA2A(t, testserver.Options{SharedModel: first.srv.Model, DatabaseURL: dbURL, TaskQueue: first.srv.TaskQueue})
	ctx := e.ctx
	firstCard, err := first.card("careful", "tok")
	require.NoError(t, err)
	card, err := e.card("careful", "tok")
	require.NoError(t, err)
	c := e.client(card, "tok")

	res, err := first.client(firstCard, "tok").SendMessage(ctx, userMessage("carefully: what is 6 * 7?"))
	require.NoError(t, err)
	task := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State, "message/send returns when the task needs input")
	require.Contains(t, statusText(task.Status), "waits for a person's approval")
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateInputRequired, got.Status.State)

	// A client resubscribes; the call is approved over the approvals API.
	events := make(chan a2a.Event, 64)
	done := make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID}) {
			if err != nil {
				done <- err
				return
			}
			events <- ev
		}
		done <- nil
	}()
	snapshot := <-events
	require.Equal(t, a2a.TaskStateInputRequired, snapshot.(*a2a.Task).Status.State)

	pending, err := turnclient.PendingApprovals(ctx, e.srv.Client(), string(task.ID))
	require.NoError(t, err)
	require.Len(t, pending, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+e.srv.HTTPAPIAddr()+"/v1/"+string(task.ID)+"/approvals/"+pending[0].CallID,
		strings.NewReader(`{"approval_id": "`+pending[0].ApprovalID+`", "approved": true, "reason": "fine"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer approver")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	var states []a2a.TaskState
	var answer string
	for ev := range events {
		switch ev := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			if len(states) == 0 || states[len(states)-1] != ev.Status.State {
				states = append(states, ev.Status.State)
			}
		case *a2a.TaskArtifactUpdateEvent:
			answer += answerText(t, &a2a.Task{Artifacts: []*a2a.Artifact{ev.Artifact}})
		}
	}
	require.NoError(t, <-done)
	require.Equal(t, []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}, states)
	require.Equal(t, "The result is 42.", answer)
	got, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	require.Equal(t, "The result is 42.", answerText(t, got))

	// Cancelled while it waits: canceled, and then not cancelable.
	res, err = c.SendMessage(ctx, userMessage("carefully: what is 1 + 1?"))
	require.NoError(t, err)
	waiting := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateInputRequired, waiting.Status.State)
	canceled, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: waiting.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCanceled, canceled.Status.State)
	_, err = c.CancelTask(ctx, &a2a.TaskIDParams{ID: waiting.ID})
	require.True(t, errors.Is(err, a2a.ErrTaskNotCancelable), "%v", err)
	got, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: waiting.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCanceled, got.Status.State)

	// Another tenant's token cannot cancel or read it.
	theirs, err := e.card("theirs", "tok2")
	require.NoError(t, err)
	_, err = e.client(theirs, "tok2").CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	require.ErrorIs(t, err, a2a.ErrTaskNotFound)
}

// TestA2AQuestion: an agent's question makes its task input-required, with
// the question and its choices as the status message; the peer answers
// the A2A way — a message with the task's id — and the task goes on to
// its answer, by message/send (blocking) and by message/stream. An answer
// outside the choices is refused and the task still waits; a message to
// a task that asks nothing is refused.
func TestA2AQuestion(t *testing.T) {
	e := startA2A(t, testserver.Options{})
	ctx := e.ctx
	card, err := e.card("planner", "tok")
	require.NoError(t, err)
	c := e.client(card, "tok")

	ask := func() *a2a.Task {
		res, err := c.SendMessage(ctx, userMessage("Book a trip"))
		require.NoError(t, err)
		task := res.(*a2a.Task)
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
		require.Contains(t, statusText(task.Status), "Which city? (choices: Paris, Rome)")
		return task
	}
	answer := func(task *a2a.Task, text string) *a2a.MessageSendParams {
		m := userMessage(text)
		m.Message.TaskID, m.Message.ContextID = task.ID, task.ContextID
		return m
	}

	task := ask()
	_, err = c.SendMessage(ctx, answer(task, "Oslo"))
	require.ErrorIs(t, err, a2a.ErrInvalidParams)
	require.ErrorContains(t, err, `the answer must be one of the choices: "Paris", "Rome"`)
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateInputRequired, got.Status.State, "the task still waits")
	res, err := c.SendMessage(ctx, answer(task, "Rome"))
	require.NoError(t, err)
	done := res.(*a2a.Task)
	require.Equal(t, task.ID, done.ID)
	require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
	require.Equal(t, "Booked for Rome.", answerText(t, done))
	_, err = c.SendMessage(ctx, answer(task, "Paris"))
	require.ErrorIs(t, err, a2a.ErrUnsupportedOperation)
	require.ErrorContains(t, err, "has ended completed and takes no more input")

	// Streamed: the task as it is once answered, then its updates to the
	// end.
	task = ask()
	var first *a2a.Task
	var last a2a.TaskState
	var text string
	for ev, err := range c.SendStreamingMessage(ctx, answer(task, "Paris")) {
		require.NoError(t, err)
		switch ev := ev.(type) {
		case *a2a.Task:
			require.Nil(t, first, "one task, first")
			first, last = ev, ev.Status.State
			if len(ev.Artifacts) > 0 {
				text = answerText(t, ev)
			}
		case *a2a.TaskStatusUpdateEvent:
			require.NotNil(t, first, "the task comes first")
			last = ev.Status.State
		case *a2a.TaskArtifactUpdateEvent:
			text += answerText(t, &a2a.Task{Artifacts: []*a2a.Artifact{ev.Artifact}})
		}
	}
	require.Equal(t, task.ID, first.ID)
	require.NotEqual(t, a2a.TaskStateInputRequired, first.Status.State, "the answer was taken before the task was read")
	require.Equal(t, a2a.TaskStateCompleted, last)
	require.Equal(t, "Booked for Paris.", text)
}

// a2aV1Error is a JSON-RPC error as A2A 1.0 writes it.
type a2aV1Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    []struct {
		Type   string `json:"@type"`
		Reason string `json:"reason"`
		Domain string `json:"domain"`
	} `json:"data"`
}

// rpc sends a JSON-RPC request to an agent's endpoint as an A2A 1.0
// client does (A2A-Version: version, unless empty) and returns its
// result or error.
func (e *a2aEnv) rpc(agentID, token, version, method string, params any) (json.RawMessage, *a2aV1Error) {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(e.t, err)
	resp := e.post(agentID, token, version, body, "application/json")
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	var out struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *a2aV1Error     `json:"error"`
	}
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out))
	require.JSONEq(e.t, "1", string(out.ID), "the request's id")
	return out.Result, out.Error
}

func (e *a2aEnv) post(agentID, token, version string, body []byte, accept string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.base(agentID), strings.NewReader(string(body)))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	return resp
}

// v1StreamEvent is one of a 1.0 stream's results.
type v1StreamEvent struct {
	Task *struct {
		ID        string `json:"id"`
		ContextID string `json:"contextId"`
		Status    struct {
			State string `json:"state"`
		} `json:"status"`
	} `json:"task"`
	StatusUpdate *struct {
		TaskID string `json:"taskId"`
		Status struct {
			State   string `json:"state"`
			Message *struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
		} `json:"status"`
		Final *bool `json:"final"`
	} `json:"statusUpdate"`
	ArtifactUpdate *struct {
		Artifact struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"artifact"`
	} `json:"artifactUpdate"`
}

// stream sends a 1.0 streaming request and reads its events to the end
// of the stream; a JSON-RPC error ends it.
func (e *a2aEnv) stream(agentID, token, method string, params any) ([]v1StreamEvent, *a2aV1Error) {
	var events []v1StreamEvent
	rerr := e.streamEach(agentID, token, method, params, func(ev v1StreamEvent) { events = append(events, ev) })
	return events, rerr
}

// streamEach is stream, handing on each event as it comes.
func (e *a2aEnv) streamEach(agentID, token, method string, params any, each func(v1StreamEvent)) *a2aV1Error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "s", "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.base(agentID), strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &a2aV1Error{Message: err.Error()}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &a2aV1Error{Message: resp.Status}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var out struct {
			Error *a2aV1Error `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Error == nil {
			return &a2aV1Error{Message: "a refusal that is not an error"}
		}
		return out.Error
	}
	rd := sse.NewReader(resp.Body)
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &a2aV1Error{Message: err.Error()}
		}
		var out struct {
			ID     string        `json:"id"`
			Result v1StreamEvent `json:"result"`
			Error  *a2aV1Error   `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &out); err != nil || out.ID != "s" {
			return &a2aV1Error{Message: "not a JSON-RPC answer to the request: " + ev.Data}
		}
		if out.Error != nil {
			return out.Error
		}
		each(out.Result)
	}
}

func v1Message(text string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": testserver.RandomID(), "role": "ROLE_USER",
		"parts": []map[string]any{{"text": text}}}}
}

// v1TaskOf reads a task result.
type v1TaskResult struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string `json:"state"`
		Message *struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		ArtifactID string `json:"artifactId"`
		Parts      []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"artifacts"`
}

func v1Task(t *testing.T, raw json.RawMessage, wrapped bool) v1TaskResult {
	t.Helper()
	var out struct {
		Task *v1TaskResult `json:"task"`
	}
	if wrapped {
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
		require.NotNil(t, out.Task, "a task: %s", raw)
		return *out.Task
	}
	var task v1TaskResult
	require.NoError(t, json.Unmarshal(raw, &task), "%s", raw)
	return task
}

func (r v1TaskResult) answer() string {
	var b strings.Builder
	for _, a := range r.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// TestA2AV1: A2A 1.0 on the same endpoint and card as 0.3. SendMessage
// runs a turn whose task id is its stream id; GetTask reads it;
// SendStreamingMessage streams the task, then its updates, to its end;
// the 0.3 methods still answer beside them. Bad input on every 1.0
// method gets 1.0's error codes, and starts nothing. A question is
// answered by a message for its task, as on 0.3.
func TestA2AV1(t *testing.T) {
	e := startA2A(t, testserver.Options{})
	ctx := e.ctx

	res, rerr := e.rpc("calc", "tok", "1.0", "SendMessage", v1Message("What is 12.5 * 4?"))
	require.Nil(t, rerr)
	task := v1Task(t, res, true)
	require.Equal(t, "TASK_STATE_COMPLETED", task.Status.State)
	require.True(t, strings.HasPrefix(task.ID, "turn/demo/"), "the turn's stream id: %q", task.ID)
	require.Equal(t, "The result is 50.", task.answer())
	// The task id is the turn's stream id on every door.
	page, err := turnclient.Events(ctx, e.srv.Client(), task.ID, agent.EventsQuery{})
	require.NoError(t, err)
	require.True(t, page.Done)

	res, rerr = e.rpc("calc", "tok", "1.0", "GetTask", map[string]any{"id": task.ID})
	require.Nil(t, rerr)
	got := v1Task(t, res, false)
	require.Equal(t, task.ID, got.ID)
	require.Equal(t, "The result is 50.", got.answer())
	// Without the header, a 1.0 method is still 1.0's; 0.3's methods
	// answer beside it.
	_, rerr = e.rpc("calc", "tok", "", "GetTask", map[string]any{"id": task.ID})
	require.Nil(t, rerr)
	legacy, err := e.client(mustCard(t, e, "calc"), "tok").GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(task.ID)})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, legacy.Status.State)

	// Streamed: the task first, then its updates; the stream ends with it.
	events, rerr := e.stream("calc", "tok", "SendStreamingMessage", v1Message("What is 2 + 3?"))
	require.Nil(t, rerr)
	require.NotNil(t, events[0].Task, "the task comes first")
	streamed := events[0].Task.ID
	var states []string
	var text string
	for _, ev := range events[1:] {
		require.Nil(t, ev.Task, "one task")
		switch {
		case ev.StatusUpdate != nil:
			require.Equal(t, streamed, ev.StatusUpdate.TaskID)
			require.Nil(t, ev.StatusUpdate.Final, "1.0's updates have no final")
			if len(states) == 0 || states[len(states)-1] != ev.StatusUpdate.Status.State {
				states = append(states, ev.StatusUpdate.Status.State)
			}
		case ev.ArtifactUpdate != nil:
			for _, p := range ev.ArtifactUpdate.Artifact.Parts {
				text += p.Text
			}
		default:
			t.Fatalf("an event of no kind: %+v", ev)
		}
	}
	require.Equal(t, []string{"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}, states)
	require.Equal(t, "The result is 5.", text)

	// The other tenant's agent answers its token: its not-found is the task's.
	_, rerr = e.rpc("theirs", "tok2", "1.0", "GetTask", map[string]any{"id": "turn/other/nope"})
	require.Equal(t, -32001, rerr.Code)
	for _, tc := range []struct {
		name, agent, token, version, method string
		params                              any
		code                                int
		want                                string
	}{
		{"an unknown task", "calc", "tok", "1.0", "GetTask", map[string]any{"id": "turn/demo/nope"}, -32001, "not found"},
		{"a malformed task id", "calc", "tok", "1.0", "CancelTask", map[string]any{"id": "nope"}, -32001, "not found"},
		{"another tenant's task", "theirs", "tok2", "1.0", "GetTask", map[string]any{"id": task.ID}, -32001, "not found"},
		{"another tenant's task, cancelled", "theirs", "tok2", "1.0", "CancelTask", map[string]any{"id": task.ID}, -32001, "not found"},
		{"another tenant's task, subscribed", "theirs", "tok2", "1.0", "SubscribeToTask", map[string]any{"id": task.ID}, -32001, "not found"},
		{"another tenant's agent", "calc", "tok2", "1.0", "SendMessage", v1Message("hi"), -32600, `no agent "calc" is served over A2A`},
		{"an agent not exposed", "hidden", "tok", "1.0", "SendMessage", v1Message("hi"), -32600, `no agent "hidden" is served over A2A`},
		{"a version not served", "calc", "tok", "0.5", "GetTask", map[string]any{"id": task.ID}, -32009, `A2A-Version "0.5" is not served`},
		{"a 0.3 method named as 1.0", "calc", "tok", "1.0", "tasks/get", map[string]any{"id": task.ID}, -32601, "1.0's name for it is GetTask"},
		{"a 1.0 method named as 0.3", "calc", "tok", "0.3", "GetTask", map[string]any{"id": task.ID}, -32601, "whose name for it is tasks/get"},
		{"an unknown method", "calc", "tok", "1.0", "tasks/list", map[string]any{}, -32601, `method "tasks/list" is not an A2A 1.0 method`},
		{"malformed params", "calc", "tok", "1.0", "SendMessage", map[string]any{"message": 3}, -32602, "params.message"},
		{"a 0.3 message", "calc", "tok", "1.0", "SendMessage", map[string]any{"message": map[string]any{"kind": "message", "messageId": "m", "role": "user",
			"parts": []any{map[string]any{"kind": "text", "text": "hi"}}}}, -32602, `want "ROLE_USER"`},
		{"no task id", "calc", "tok", "1.0", "GetTask", map[string]any{}, -32602, "params.id is required"},
		{"a file", "calc", "tok", "1.0", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER",
			"parts": []any{map[string]any{"url": "https://example.com/a.txt"}}}}, -32005, "send text or data parts"},
		{"a message for a task that ended", "calc", "tok", "1.0", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER",
			"taskId": task.ID, "parts": []any{map[string]any{"text": "more"}}}}, -32004, "has ended completed and takes no more input"},
		{"a cancel of a finished task", "calc", "tok", "1.0", "CancelTask", map[string]any{"id": task.ID}, -32002, "has already ended completed"},
		{"a subscription to a finished task", "calc", "tok", "1.0", "SubscribeToTask", map[string]any{"id": task.ID}, -32004, "has ended completed"},
		{"a list page too large", "calc", "tok", "1.0", "ListTasks", map[string]any{"pageSize": 500}, -32602, "params.pageSize is 500"},
		{"push notifications", "calc", "tok", "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "url": "https://x"}, -32003, "not sent"},
		{"the extended card", "calc", "tok", "1.0", "GetExtendedAgentCard", map[string]any{}, -32007, "served to the token's holder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rerr *a2aV1Error
			if tc.method == "SubscribeToTask" {
				_, rerr = e.stream(tc.agent, tc.token, tc.method, tc.params)
			} else {
				_, rerr = e.rpc(tc.agent, tc.token, tc.version, tc.method, tc.params)
			}
			require.NotNil(t, rerr)
			require.Equal(t, tc.code, rerr.Code, rerr.Message)
			require.Contains(t, rerr.Message, tc.want)
			// A2A's ErrorInfo first; agentflow's type after it, when the
			// error is one of agentflow's classes.
			require.NotEmpty(t, rerr.Data)
			require.LessOrEqual(t, len(rerr.Data), 2)
			require.Equal(t, "type.googleapis.com/google.rpc.ErrorInfo", rerr.Data[0].Type)
			require.Equal(t, "a2a-protocol.org", rerr.Data[0].Domain)
			if len(rerr.Data) == 2 {
				require.Equal(t, "agentflow.v1", rerr.Data[1].Domain)
			}
		})
	}

	// Refused before the call is read, in 1.0's shape too.
	for _, tc := range []struct {
		name, token, body string
		status, code      int
		reason            string // agentflow's, the last of the error's details
	}{
		{"no token", "", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, http.StatusUnauthorized, -32000, "Unauthenticated"},
		{"an approver's token", "approver", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, http.StatusForbidden, -32000, "PermissionDenied"},
		{"an oversized body", "tok", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"text":"` +
			strings.Repeat("a", gateway.MaxBodyBytes) + `"}]}}}`, http.StatusRequestEntityTooLarge, -32602, "InvalidRequest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.post("calc", tc.token, "1.0", []byte(tc.body), "application/json")
			defer resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode)
			var out struct {
				Error a2aV1Error `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			require.Equal(t, tc.code, out.Error.Code)
			require.NotEmpty(t, out.Error.Data, "1.0's error details")
			last := out.Error.Data[len(out.Error.Data)-1]
			require.Equal(t, "agentflow.v1", last.Domain)
			require.Equal(t, tc.reason, last.Reason)
		})
	}

	// Nothing was started for the refusals.
	require.Eventually(t, func() bool {
		n, err := e.srv.Client().CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "TaskQueue = '" + e.srv.TaskQueue + "'"})
		return err == nil && n.GetCount() == 2
	}, 10*time.Second, 100*time.Millisecond)

	// A question (ask_user) makes the task input-required; the answer is
	// a message for the task, as on 0.3: one outside the choices is
	// -32602 and the task still waits; a streamed one goes on to the end.
	res, rerr = e.rpc("planner", "tok", "1.0", "SendMessage", v1Message("Book a trip"))
	require.Nil(t, rerr)
	asked := v1Task(t, res, true)
	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", asked.Status.State)
	require.Contains(t, asked.Status.Message.Parts[0].Text, "Which city? (choices: Paris, Rome)")
	answer := func(text string) map[string]any {
		return map[string]any{"message": map[string]any{"messageId": testserver.RandomID(), "role": "ROLE_USER", "taskId": asked.ID,
			"contextId": asked.ContextID, "parts": []any{map[string]any{"text": text}}}}
	}
	_, rerr = e.rpc("planner", "tok", "1.0", "SendMessage", answer("Oslo"))
	require.NotNil(t, rerr)
	require.Equal(t, -32602, rerr.Code)
	require.Contains(t, rerr.Message, `the answer must be one of the choices: "Paris", "Rome"`)
	events, rerr = e.stream("planner", "tok", "SendStreamingMessage", answer("Rome"))
	require.Nil(t, rerr)
	require.Equal(t, asked.ID, events[0].Task.ID)
	require.NotEqual(t, "TASK_STATE_INPUT_REQUIRED", events[0].Task.Status.State, "the answer was taken before the task was read")
	last := events[len(events)-1]
	// The stream ends with the task's final status; when the answer
	// completed the task before the stream first read it, the task it
	// sends first is already final, and is all it sends.
	if last.StatusUpdate == nil {
		require.Len(t, events, 1, "the stream ends with the task's final status: %s", describeV1Events(events))
		require.Equal(t, "TASK_STATE_COMPLETED", last.Task.Status.State)
		got, rerr := e.rpc("planner", "tok", "1.0", "GetTask", map[string]any{"id": asked.ID})
		require.Nil(t, rerr)
		require.Equal(t, "Booked for Rome.", v1Task(t, got, false).answer())
		return
	}
	require.Equal(t, "TASK_STATE_COMPLETED", last.StatusUpdate.Status.State)
	text = ""
	for _, ev := range events {
		if ev.ArtifactUpdate != nil {
			for _, p := range ev.ArtifactUpdate.Artifact.Parts {
				text += p.Text
			}
		}
	}
	require.Equal(t, "Booked for Rome.", text)
}

func mustCard(t *testing.T, e *a2aEnv, agentID string) *a2a.AgentCard {
	t.Helper()
	card, err := e.card(agentID, "tok")
	require.NoError(t, err)
	return card
}

// TestA2AApprovalByMessage: a task whose call waits for approval is
// input-required on both versions; a message for the task decides it
// when the token may approve (a data part {"approved": …} or the text
// approve or reject), and is refused, the call still waiting, when it may
// not. A turn started over 1.0 is approved over the approvals API as any
// turn, and a 1.0 subscriber follows it to its end.
func TestA2AApprovalByMessage(t *testing.T) {
	e := startA2A(t, testserver.Options{})
	ctx := e.ctx

	// 1.0: SendMessage answers input-required; the user's token cannot
	// decide; the approver's message does, and SendMessage follows the
	// task to its end.
	res, rerr := e.rpc("careful", "both", "1.0", "SendMessage", v1Message("carefully: what is 6 * 7?"))
	require.Nil(t, rerr)
	task := v1Task(t, res, true)
	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", task.Status.State)
	require.Contains(t, task.Status.Message.Parts[0].Text, "waits for a person's approval")
	forTask := func(parts ...map[string]any) map[string]any {
		return map[string]any{"message": map[string]any{"messageId": testserver.RandomID(), "role": "ROLE_USER", "taskId": task.ID,
			"contextId": task.ContextID, "parts": parts}}
	}
	_, rerr = e.rpc("careful", "tok", "1.0", "SendMessage", forTask(map[string]any{"data": map[string]any{"approved": true}}))
	require.NotNil(t, rerr)
	require.Equal(t, -32600, rerr.Code)
	require.Contains(t, rerr.Message, "waits for a person with the approver role")
	_, rerr = e.rpc("careful", "both", "1.0", "SendMessage", forTask(map[string]any{"text": "maybe"}))
	require.NotNil(t, rerr)
	require.Equal(t, -32602, rerr.Code)
	require.Contains(t, rerr.Message, `send a data part {"approved": true|false, "reason": "…"}, or the text approve or reject`)
	pending, err := turnclient.PendingApprovals(ctx, e.srv.Client(), task.ID)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the call still waits")
	res, rerr = e.rpc("careful", "both", "1.0", "SendMessage", forTask(map[string]any{"data": map[string]any{"approved": true, "reason": "fine"}}))
	require.Nil(t, rerr)
	done := v1Task(t, res, true)
	require.Equal(t, task.ID, done.ID)
	require.Equal(t, "TASK_STATE_COMPLETED", done.Status.State)
	require.Equal(t, "The result is 42.", done.answer())

	// 0.3 (a2a-go's client): the same rule; "reject" rejects.
	c := e.client(mustCard(t, e, "careful"), "both")
	r03, err := c.SendMessage(ctx, userMessage("carefully: what is 1 + 1?"))
	require.NoError(t, err)
	waiting := r03.(*a2a.Task)
	require.Equal(t, a2a.TaskStateInputRequired, waiting.Status.State)
	m := userMessage("reject")
	m.Message.TaskID, m.Message.ContextID = waiting.ID, waiting.ContextID
	r03, err = c.SendMessage(ctx, m)
	require.NoError(t, err)
	require.Equal(t, waiting.ID, r03.(*a2a.Task).ID)
	require.NotEqual(t, a2a.TaskStateInputRequired, r03.(*a2a.Task).Status.State, "decided")

	// 1.0 on one door, the approvals API on another: a subscriber sees
	// the task through to its end.
	res, rerr = e.rpc("careful", "tok", "1.0", "SendMessage", v1Message("carefully: what is 2 * 4?"))
	require.Nil(t, rerr)
	task = v1Task(t, res, true)
	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", task.Status.State)
	type result struct {
		events []v1StreamEvent
		err    *a2aV1Error
	}
	sub := make(chan result, 1)
	subscribed := make(chan struct{})
	go func() {
		var r result
		r.err = e.streamEach("careful", "tok", "SubscribeToTask", map[string]any{"id": task.ID}, func(ev v1StreamEvent) {
			if len(r.events) == 0 {
				close(subscribed)
			}
			r.events = append(r.events, ev)
		})
		sub <- r
	}()
	select {
	case <-subscribed:
	case r := <-sub:
		t.Fatalf("the subscription ended before its first event: %+v", r.err)
	}
	pending, err = turnclient.PendingApprovals(ctx, e.srv.Client(), task.ID)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+e.srv.HTTPAPIAddr()+"/v1/"+task.ID+"/approvals/"+pending[0].CallID,
		strings.NewReader(`{"approval_id": "`+pending[0].ApprovalID+`", "approved": true}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer approver")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r := <-sub
	require.Nil(t, r.err)
	require.NotNil(t, r.events[0].Task, "the task first")
	last := r.events[len(r.events)-1]
	require.NotNil(t, last.StatusUpdate)
	require.Equal(t, "TASK_STATE_COMPLETED", last.StatusUpdate.Status.State)
	var text string
	for _, ev := range r.events {
		if ev.ArtifactUpdate != nil {
			for _, p := range ev.ArtifactUpdate.Artifact.Parts {
				text += p.Text
			}
		}
	}
	require.Equal(t, "The result is 8.", text)
}

// describeV1Events says what a 1.0 stream sent, for a failure's message.
func describeV1Events(events []v1StreamEvent) string {
	var out []string
	for _, ev := range events {
		switch {
		case ev.Task != nil:
			out = append(out, "task "+ev.Task.Status.State)
		case ev.StatusUpdate != nil:
			out = append(out, "status "+ev.StatusUpdate.Status.State)
		case ev.ArtifactUpdate != nil:
			out = append(out, "artifact")
		default:
			out = append(out, "?")
		}
	}
	return strings.Join(out, ", ")
}
