package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
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

// a2aCardExample is calc's agent card as README.md shows it: the JSON
// block that starts with its name.
func a2aCardExample(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(data), "```json\n{\n  \"name\": \"calc\"")
	require.True(t, ok, "README.md shows calc's agent card")
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
	opts.Tokens = map[string]string{"tok": "demo", "tok2": "other", "approver": "demo:approver:ops"}
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

	// The card as served, as the README shows it.
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
			a2a.ErrInvalidRequest, "has ended completed and takes no more input"},
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
			strings.Repeat("a", gateway.MaxBodyBytes) + `"}]}}}`, 413, -32600, "larger than"},
		{"no token", "", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, 401, -32600, "missing bearer token"},
		{"an approver's token", "approver", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, 403, -32600, "needs the role user"},
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
	require.ErrorIs(t, err, a2a.ErrInvalidRequest)
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
