package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// openAIScript: arithmetic through the calculator, a reasoned answer, a
// story whose first stream is cut, an introduction, and a greeting for
// anything else.
const openAIScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: cut
    when: {user: '^cut a story$'}
    fault: {cut_after_chunks: 25, times: 1}
    reply: {reasoning: 'The user wants the story told exactly once.', text: '` + storyText + `'}
  - name: think
    when: {user: '^why\?$'}
    reply: {reasoning: 'The user asks why.', text: 'Because it is durable.', usage: {prompt_tokens: 12, completion_tokens: 9, reasoning_tokens: 5}}
  - name: calc
    when: {user: '(?i)^what is ([-0-9.+*/() ]+)\?$'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - name: intro
    when: {user: '(?i)^my name is (\w+)'}
    reply: {text: 'Nice to meet you, $1.'}
  - name: greet
    reply: {text: 'Hello from the agent.'}
`

// openAIEnv is a server with the HTTP API, the catalogs of the HTTP
// tests (tenant demo: assistant with the calculator, careful; tenant
// rival: desk), and OpenAI clients with a token of each tenant.
type openAIEnv struct {
	*testserver.Server
	t            *testing.T
	api          string
	demo, rival  openai.Client
	token, rivTk string
	// userTk is a token of demo's without the approver role (responses'
	// environment only).
	userTk string
}

func newOpenAIEnv(t *testing.T) *openAIEnv {
	t.Helper()
	e := &openAIEnv{t: t, token: "secret-" + testserver.RandomID(), rivTk: "secret-" + testserver.RandomID()}
	e.Server = testserver.Start(t, testserver.Options{Script: openAIScript, Catalogs: httpCatalogs, HTTPAPI: true,
		Tokens: map[string]string{e.token: "demo:user:uma", e.rivTk: "rival:user:riv"}})
	e.api = "http://" + e.HTTPAPIAddr()
	// The client's own retries off: a test sees each answer as it is.
	e.demo = openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.token), option.WithMaxRetries(0))
	e.rival = openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.rivTk), option.WithMaxRetries(0))
	return e
}

func userMessages(texts ...string) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	for _, s := range texts {
		out = append(out, openai.UserMessage(s))
	}
	return out
}

// streamed is what a client read of a streamed completion.
type streamed struct {
	id, content, reasoning, finish string
	usage                          openai.CompletionUsage
	usageChunks, chunks            int
}

// stream reads a streamed completion to its end with the client.
func (e *openAIEnv) stream(ctx context.Context, c openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) (streamed, error) {
	s := c.Chat.Completions.NewStreaming(ctx, params, opts...)
	defer s.Close()
	var out streamed
	for s.Next() {
		ch := s.Current()
		out.chunks++
		out.id = ch.ID
		if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
			out.usage = ch.Usage
			out.usageChunks++
			require.Empty(e.t, ch.Choices, "the usage chunk has no choice")
			continue
		}
		require.Zero(e.t, out.usageChunks, "the usage chunk is the last")
		require.Len(e.t, ch.Choices, 1)
		d := ch.Choices[0].Delta
		out.content += d.Content
		if f, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
			var r string
			require.NoError(e.t, json.Unmarshal([]byte(f.Raw()), &r))
			out.reasoning += r
		}
		if ch.Choices[0].FinishReason != "" {
			out.finish = ch.Choices[0].FinishReason
		}
	}
	return out, s.Err()
}

// turnEvents is a turn's whole log once it has ended.
func (e *openAIEnv) turnEvents(streamID string) []agent.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var page agent.EventsPage
	require.Eventually(e.t, func() bool {
		var err error
		page, err = turnclient.Events(ctx, e.Client(), streamID, agent.EventsQuery{})
		return err == nil && page.Done
	}, time.Minute, 50*time.Millisecond)
	return page.Events
}

// logUsage is the usage events of a log, summed.
func logUsage(events []agent.Event) agent.Usage {
	var u agent.Usage
	for _, ev := range events {
		if ev.Kind == agent.EventUsage && ev.Child == nil {
			u = u.Add(*ev.Usage)
		}
	}
	return u
}

// requireAPIError: err is the API error an OpenAI client reads, with its
// status and code.
func requireAPIError(t *testing.T, err error, status int, code string) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "an API error: %v", err)
	require.Equal(t, status, apiErr.StatusCode, "%s", apiErr.RawJSON())
	require.Equal(t, code, apiErr.Code, "%s", apiErr.RawJSON())
	return apiErr
}

// requireNoTurn: no turn of the job was started.
func (e *openAIEnv) requireNoTurn(tenant, job string) {
	e.t.Helper()
	_, err := e.Client().DescribeWorkflowExecution(context.Background(), contract.TurnWorkflowID(tenant, job), "")
	var nf *serviceerror.NotFound
	require.True(e.t, errors.As(err, &nf), "no turn %s: %v", job, err)
}

// TestOpenAIClient: OpenAI's Go client, as any application holding one
// would, lists the tenant's agents as models, gets an answer whole and
// streamed (reasoning, text and usage), continues a conversation in a
// session, attaches to a turn by its idempotency key, and reads every
// refusal as an API error with its status; another tenant's agents are
// not found.
func TestOpenAIClient(t *testing.T) {
	e := newOpenAIEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("models", func(t *testing.T) {
		page, err := e.demo.Models.List(ctx)
		require.NoError(t, err)
		var ids []string
		for _, m := range page.Data {
			require.Equal(t, "model", string(m.Object))
			require.Equal(t, "demo", m.OwnedBy)
			ids = append(ids, m.ID)
		}
		require.Equal(t, []string{"assistant", "careful"}, ids)
		m, err := e.demo.Models.Get(ctx, "careful")
		require.NoError(t, err)
		require.Equal(t, "careful", m.ID)

		page, err = e.rival.Models.List(ctx)
		require.NoError(t, err)
		require.Len(t, page.Data, 1)
		require.Equal(t, "desk", page.Data[0].ID)
		_, err = e.demo.Models.Get(ctx, "desk")
		requireAPIError(t, err, http.StatusNotFound, "model_not_found")
		_, err = e.rival.Models.Get(ctx, "assistant")
		requireAPIError(t, err, http.StatusNotFound, "model_not_found")
	})

	t.Run("a completion, whole", func(t *testing.T) {
		var resp *http.Response
		c, err := e.demo.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "assistant", Messages: userMessages("What is 6 * 7?"), Temperature: openai.Float(0.2), User: openai.String("end-user-1"),
		}, option.WithResponseInto(&resp))
		require.NoError(t, err)
		require.Len(t, c.Choices, 1)
		require.Equal(t, "The result is 42.", c.Choices[0].Message.Content)
		require.Equal(t, "assistant", string(c.Choices[0].Message.Role))
		require.Equal(t, "stop", c.Choices[0].FinishReason)
		require.Equal(t, "chat.completion", string(c.Object))
		require.Equal(t, "assistant", c.Model)

		// The answer is the turn's: its id, its output, its usage.
		streamID := resp.Header.Get("X-Agentflow-Stream-Id")
		require.Equal(t, contract.TurnWorkflowID("demo", c.ID), streamID)
		var res agent.TurnResult
		require.NoError(t, e.Client().GetWorkflow(ctx, streamID, "").Get(ctx, &res))
		require.Equal(t, res.Output, c.Choices[0].Message.Content)
		u := logUsage(e.turnEvents(streamID))
		require.Equal(t, int64(u.TotalTokens), c.Usage.TotalTokens)
		require.Equal(t, int64(u.PromptTokens), c.Usage.PromptTokens)
		require.Positive(t, c.Usage.TotalTokens)
	})

	t.Run("a completion, streamed with its reasoning and usage", func(t *testing.T) {
		var resp *http.Response
		got, err := e.stream(ctx, e.demo, openai.ChatCompletionNewParams{
			Model: "assistant", Messages: userMessages("why?"),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, option.WithResponseInto(&resp))
		require.NoError(t, err)
		require.Equal(t, "Because it is durable.", got.content)
		// The reasoning is the log's, as reasoning_content deltas.
		require.Equal(t, agent.ReplayReasoning(e.turnEvents(resp.Header.Get("X-Agentflow-Stream-Id"))), got.reasoning)
		require.Equal(t, "stop", got.finish)
		require.Equal(t, 1, got.usageChunks, "the usage, in the last chunk")
		require.Equal(t, int64(12), got.usage.PromptTokens)
		require.Equal(t, int64(9), got.usage.CompletionTokens)
		require.Equal(t, int64(21), got.usage.TotalTokens)
		require.Equal(t, int64(5), got.usage.CompletionTokensDetails.ReasoningTokens)

		// Without stream_options.include_usage, no usage chunk.
		got, err = e.stream(ctx, e.demo, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("why?")})
		require.NoError(t, err)
		require.Equal(t, "Because it is durable.", got.content)
		require.Zero(t, got.usageChunks)
	})

	t.Run("a conversation in a session", func(t *testing.T) {
		session := option.WithHeader("X-Agentflow-Session", "s-"+testserver.RandomID())
		first, err := e.demo.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("My name is Ada.")}, session)
		require.NoError(t, err)
		require.Equal(t, "Nice to meet you, Ada.", first.Choices[0].Message.Content)

		// A chat UI sends the whole conversation again; the session's
		// transcript is the history, so the model reads it once.
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("My name is Ada."),
			openai.AssistantMessage("Nice to meet you, Ada."), openai.UserMessage("Who am I?")}
		key := option.WithHeader("Idempotency-Key", "who-"+testserver.RandomID())
		second, err := e.stream(ctx, e.demo, openai.ChatCompletionNewParams{Model: "assistant", Messages: msgs}, session, key)
		require.NoError(t, err)
		require.Equal(t, "Hello from the agent.", second.content)
		req := lastRequest(t, e, "Who am I?")
		require.Equal(t, []string{"user: My name is Ada.", "assistant: Nice to meet you, Ada.", "user: Who am I?"}, req)

		// The same request again attaches to the turn its key started.
		calls := len(e.Model.Requests())
		again, err := e.stream(ctx, e.demo, openai.ChatCompletionNewParams{Model: "assistant", Messages: msgs}, session, key)
		require.NoError(t, err)
		require.Equal(t, second.id, again.id)
		require.Equal(t, second.content, again.content)
		require.Len(t, e.Model.Requests(), calls, "no model call for a repeat")

		// The session's Conversation is the agent's: another agent is refused.
		_, err = e.demo.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "careful", Messages: userMessages("Hi.")}, session)
		requireAPIError(t, err, http.StatusConflict, "Conflict")
	})

	t.Run("earlier messages without a session", func(t *testing.T) {
		msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hi."),
			openai.AssistantMessage("Hello."), openai.UserMessage("And now?")}
		c, err := e.demo.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "assistant", Messages: msgs})
		require.NoError(t, err)
		require.Equal(t, "Hello from the agent.", c.Choices[0].Message.Content)
		prompt := lastRequest(t, e, "And now?")
		require.Equal(t, "user: The conversation so far, as the client sent it (oldest first):\n\nsystem: Be brief.\n\nuser: Hi.\n\n"+
			"assistant: Hello.\n\nThe message to answer:\n\nAnd now?", prompt[len(prompt)-1])
	})

	t.Run("an idempotency key attaches", func(t *testing.T) {
		job := "calc-" + testserver.RandomID()
		params := openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("What is 2 + 3?")}
		first, err := e.demo.Chat.Completions.New(ctx, params, option.WithHeader("Idempotency-Key", job))
		require.NoError(t, err)
		require.Equal(t, job, first.ID)
		calls := e.Model.Served("calc")
		again, err := e.stream(ctx, e.demo, params, option.WithHeader("Idempotency-Key", job))
		require.NoError(t, err)
		require.Equal(t, job, again.id)
		require.Equal(t, first.Choices[0].Message.Content, again.content)
		require.Equal(t, calls, e.Model.Served("calc"), "the turn ran once")

		// The key names one request: another message under it is refused.
		_, err = e.demo.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("What is 9 + 9?")},
			option.WithHeader("Idempotency-Key", job))
		requireAPIError(t, err, http.StatusConflict, "Conflict")
	})

	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			client openai.Client
			params openai.ChatCompletionNewParams
			status int
			code   string
		}{
			{"an unknown model", e.demo, openai.ChatCompletionNewParams{Model: "nope", Messages: userMessages("Hi.")}, http.StatusNotFound, "model_not_found"},
			{"another tenant's agent", e.demo, openai.ChatCompletionNewParams{Model: "desk", Messages: userMessages("Hi.")}, http.StatusNotFound, "model_not_found"},
			{"an agent of the other tenant", e.rival, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("Hi.")}, http.StatusNotFound, "model_not_found"},
			{"n=2", e.demo, openai.ChatCompletionNewParams{Model: "assistant", N: openai.Int(2), Messages: userMessages("Hi.")}, http.StatusBadRequest, "unsupported_value"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				job := "refused-" + testserver.RandomID()
				_, err := tc.client.Chat.Completions.New(ctx, tc.params, option.WithHeader("Idempotency-Key", job))
				requireAPIError(t, err, tc.status, tc.code)
				s := tc.client.Chat.Completions.NewStreaming(ctx, tc.params, option.WithHeader("Idempotency-Key", job))
				require.False(t, s.Next())
				requireAPIError(t, s.Err(), tc.status, tc.code)
				e.requireNoTurn("demo", job)
				e.requireNoTurn("rival", job)
			})
		}
	})
}

// lastRequest is the messages of the model request whose last message is
// last, each "role: content".
func lastRequest(t *testing.T, e *openAIEnv, last string) []string {
	t.Helper()
	reqs := e.Model.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		msgs := reqs[i].Messages
		if n := len(msgs); n > 0 && strings.HasSuffix(msgs[n-1].Content, last) {
			var out []string
			for _, m := range msgs {
				if m.Role != "system" {
					out = append(out, m.Role+": "+m.Content)
				}
			}
			return out
		}
	}
	require.FailNow(t, "no model request ends with "+last)
	return nil
}

// TestOpenAIStreamRetried: a streamed completion whose model call is cut
// part-way and retried gives the client the final text and reasoning
// exactly once, though the log holds the voided attempt too.
func TestOpenAIStreamRetried(t *testing.T) {
	e := newOpenAIEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var resp *http.Response
	got, err := e.stream(ctx, e.demo, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("cut a story"),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}, option.WithResponseInto(&resp))
	require.NoError(t, err)
	require.Equal(t, storyText, got.content)
	require.Equal(t, 2, e.Model.Served("cut"), "cut once, then answered")

	events := e.turnEvents(resp.Header.Get("X-Agentflow-Stream-Id"))
	require.Equal(t, agent.ReplayReasoning(events), got.reasoning, "the reasoning, once")
	voided := 0
	for _, ev := range events {
		if ev.Kind == agent.EventStatus && ev.Status == agent.StreamRetrying && ev.VoidFrom > 0 {
			for _, v := range events {
				if (v.Kind == agent.EventToken || v.Kind == agent.EventReasoning) && v.Index >= ev.VoidFrom && v.Index < ev.Index {
					voided++
				}
			}
		}
	}
	require.Positive(t, voided, "the cut attempt streamed text or reasoning that the retry voided")
	require.Equal(t, storyText, agent.ReplayText(events))
	require.Equal(t, int64(logUsage(events).TotalTokens), got.usage.TotalTokens)
}

// TestOpenAIStreamShowsTools: the agent's own tool calls run on the
// server; a stream names them in SSE comments, which OpenAI's clients
// skip, and its text is the answer alone.
func TestOpenAIStreamShowsTools(t *testing.T) {
	e := newOpenAIEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body := `{"model": "assistant", "stream": true, "messages": [{"role": "user", "content": "What is 3 + 4?"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.api+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	var comments []string
	var text strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ": "):
			comments = append(comments, strings.TrimPrefix(line, ": "))
		case line == "data: [DONE]":
			done = true
		case strings.HasPrefix(line, "data: "):
			var ch struct {
				Object  string `json:"object"`
				Choices []struct {
					Delta struct {
						Content   string `json:"content"`
						ToolCalls any    `json:"tool_calls"`
					} `json:"delta"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ch), line)
			require.Equal(t, "chat.completion.chunk", ch.Object)
			for _, c := range ch.Choices {
				require.Nil(t, c.Delta.ToolCalls, "the agent's tool calls are not the client's")
				text.WriteString(c.Delta.Content)
			}
		default:
			require.Empty(t, line, "SSE: data lines, comments and blank lines")
		}
	}
	require.NoError(t, sc.Err())
	require.True(t, done, "the stream ends with [DONE]")
	require.Equal(t, "The result is 7.", text.String())
	require.Len(t, comments, 2, "%q", comments)
	require.Regexp(t, `^tool calculator \(call \S+\) started$`, comments[0])
	require.Regexp(t, `^tool calculator \(call \S+\) ended ok$`, comments[1])
}
