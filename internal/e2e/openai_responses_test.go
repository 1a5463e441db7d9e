package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// responsesScript: arithmetic through the calculator (asked carefully,
// through the calculator that needs approval), a reasoned answer, an
// introduction, and a greeting for anything else.
const responsesScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: careful
    when: {user: '(?i)^carefully, what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: careful_calculator, arguments: '{"expression": "$1"}'}]}
  - name: think
    when: {user: '^why\?$'}
    reply: {reasoning: 'The user asks why.', text: 'Because it is durable.', usage: {prompt_tokens: 12, completion_tokens: 9, reasoning_tokens: 5}}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?$'}
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

func newResponsesEnv(t *testing.T) *openAIEnv {
	t.Helper()
	e := &openAIEnv{t: t, token: "secret-" + testserver.RandomID(), rivTk: "secret-" + testserver.RandomID(), userTk: "secret-" + testserver.RandomID()}
	e.Server = testserver.Start(t, testserver.Options{Script: responsesScript, Catalogs: httpCatalogs, HTTPAPI: true,
		Tokens: map[string]string{e.token: "demo:user+approver:uma", e.rivTk: "rival:user+approver:riv", e.userTk: "demo:user:ulla"}})
	e.api = "http://" + e.HTTPAPIAddr()
	e.demo = openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.token), option.WithMaxRetries(0))
	e.rival = openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.rivTk), option.WithMaxRetries(0))
	return e
}

func textInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// readEvents reads a response's stream to its end: its events, in order.
func readEvents(t *testing.T, s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
	Close() error
}, stop func(responses.ResponseStreamEventUnion) bool) []responses.ResponseStreamEventUnion {
	t.Helper()
	defer s.Close()
	var out []responses.ResponseStreamEventUnion
	for s.Next() {
		ev := s.Current()
		out = append(out, ev)
		if stop != nil && stop(ev) {
			return out
		}
	}
	require.NoError(t, s.Err())
	return out
}

// requireWellNumbered: sequence numbers rise, none twice.
func requireWellNumbered(t *testing.T, events []responses.ResponseStreamEventUnion) {
	t.Helper()
	for i := 1; i < len(events); i++ {
		require.Greater(t, events[i].SequenceNumber, events[i-1].SequenceNumber, "%s after %s", events[i].Type, events[i-1].Type)
	}
}

// deltas is the text of a stream's output_text deltas.
func responseDeltas(events []responses.ResponseStreamEventUnion) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Type == "response.output_text.delta" {
			b.WriteString(ev.Delta)
		}
	}
	return b.String()
}

func seqs(events []responses.ResponseStreamEventUnion) []int64 {
	out := make([]int64, 0, len(events))
	for _, ev := range events {
		out = append(out, ev.SequenceNumber)
	}
	return out
}

// TestOpenAIResponses: OpenAI's Go client creates responses whole (the
// agent's tool call an mcp_call item before the answer, and the turn's
// usage), streamed (the Responses vocabulary, numbered without a gap in
// order), and in the background; it retrieves a background response,
// reads its stream, leaves it and resumes after the last event it read,
// with no event twice and none missing; cancels one that waits for an
// approval; continues a session by previous_response_id; and reads
// another tenant's response, or none, as not found.
func TestOpenAIResponses(t *testing.T) {
	e := newResponsesEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("whole", func(t *testing.T) {
		var hr *http.Response
		r, err := e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: textInput("What is 3 + 4?")}, option.WithResponseInto(&hr))
		require.NoError(t, err)
		require.Equal(t, responses.ResponseStatusCompleted, r.Status)
		require.Equal(t, hr.Header.Get("X-Agentflow-Stream-Id"), r.ID)
		require.True(t, strings.HasPrefix(r.ID, "turn/demo/"), r.ID)
		require.Equal(t, "The result is 7.", r.OutputText())
		require.Len(t, r.Output, 2)
		call := r.Output[0].AsMcpCall()
		require.Equal(t, "calculator", call.Name)
		require.JSONEq(t, `{"expression": "3 + 4"}`, call.Arguments)
		require.Equal(t, "7", call.Output)
		require.Equal(t, "completed", call.Status)
		require.Equal(t, "message", r.Output[1].Type)
		u := logUsage(e.turnEvents(r.ID))
		require.Positive(t, u.TotalTokens)
		require.Equal(t, int64(u.TotalTokens), r.Usage.TotalTokens)
		require.Equal(t, int64(u.PromptTokens), r.Usage.InputTokens)

		got, err := e.demo.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		require.NoError(t, err)
		require.Equal(t, r.OutputText(), got.OutputText())
		require.Equal(t, "assistant", got.Model)
	})

	t.Run("streamed", func(t *testing.T) {
		events := readEvents(t, e.demo.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "assistant", Input: textInput("why?")}), nil)
		requireWellNumbered(t, events)
		require.Equal(t, "response.created", events[0].Type)
		require.Equal(t, int64(0), events[0].SequenceNumber)
		require.Equal(t, "response.in_progress", events[1].Type)
		last := events[len(events)-1]
		require.Equal(t, "response.completed", last.Type)
		require.Equal(t, "Because it is durable.", responseDeltas(events))
		require.Equal(t, "Because it is durable.", last.Response.OutputText())
		require.Equal(t, int64(5), last.Response.Usage.OutputTokensDetails.ReasoningTokens)
		var types []string
		for _, ev := range events {
			types = append(types, ev.Type)
		}
		require.Contains(t, types, "response.reasoning_text.delta")
		require.Contains(t, types, "response.content_part.added")
		require.Contains(t, types, "response.output_text.done")

		// The same stream, read again from the start, is the same.
		again := readEvents(t, e.demo.Responses.GetStreaming(ctx, last.Response.ID, responses.ResponseGetParams{}), nil)
		require.Equal(t, seqs(events), seqs(again))
		require.Equal(t, responseDeltas(events), responseDeltas(again))
	})

	t.Run("background, retrieved and resumed", func(t *testing.T) {
		r, err := e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: textInput("What is 6 * 7?"), Background: openai.Bool(true)})
		require.NoError(t, err)
		require.Contains(t, []responses.ResponseStatus{responses.ResponseStatusQueued, responses.ResponseStatusInProgress}, r.Status)
		require.True(t, r.Background)

		// Read up to the tool call's item, and leave.
		first := readEvents(t, e.demo.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{}), func(ev responses.ResponseStreamEventUnion) bool {
			return ev.Type == "response.output_item.added"
		})
		require.Equal(t, "mcp_call", first[len(first)-1].Item.Type)
		n := first[len(first)-1].SequenceNumber
		rest := readEvents(t, e.demo.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{StartingAfter: openai.Int(n)}), nil)
		require.Greater(t, rest[0].SequenceNumber, n)
		resumed := append(first, rest...)
		requireWellNumbered(t, resumed)
		require.Equal(t, "response.completed", resumed[len(resumed)-1].Type)

		whole := readEvents(t, e.demo.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{}), nil)
		require.Equal(t, seqs(whole), seqs(resumed), "no event twice, none missing")
		got, err := e.demo.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		require.NoError(t, err)
		require.Equal(t, responses.ResponseStatusCompleted, got.Status)
		require.Equal(t, "The result is 42.", got.OutputText())
		require.Equal(t, got.OutputText(), responseDeltas(resumed))
		require.Equal(t, got.OutputText(), agent.ReplayText(e.turnEvents(r.ID)))

		// Another tenant's response is not found, nor is a made-up one.
		_, err = e.rival.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		requireAPIError(t, err, http.StatusNotFound, "NotFound")
		_, err = e.rival.Responses.Cancel(ctx, r.ID)
		requireAPIError(t, err, http.StatusNotFound, "NotFound")
		_, err = e.demo.Responses.Get(ctx, "turn/demo/no-such-job", responses.ResponseGetParams{})
		requireAPIError(t, err, http.StatusNotFound, "NotFound")
		// A completed response is not cancelled.
		_, err = e.demo.Responses.Cancel(ctx, r.ID)
		requireAPIError(t, err, http.StatusConflict, "Conflict")
	})

	t.Run("cancelled while it waits", func(t *testing.T) {
		r, err := e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "careful", Input: textInput("Carefully, what is 2 + 2?"), Background: openai.Bool(true)})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got, err := e.demo.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			return err == nil && got.Status == responses.ResponseStatusInProgress && len(got.Output) == 1 &&
				got.Output[0].Type == "mcp_approval_request" && got.Output[0].Name == "careful_calculator"
		}, time.Minute, 50*time.Millisecond, "the call waits for approval")
		got, err := e.demo.Responses.Cancel(ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, responses.ResponseStatusCancelled, got.Status)
		again, err := e.demo.Responses.Cancel(ctx, r.ID)
		require.NoError(t, err, "cancelling a cancelled response answers it")
		require.Equal(t, responses.ResponseStatusCancelled, again.Status)
		events := readEvents(t, e.demo.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{}), nil)
		require.Equal(t, "response.failed", events[len(events)-1].Type)
		require.Equal(t, responses.ResponseStatusCancelled, events[len(events)-1].Response.Status)
	})

	t.Run("a session, continued", func(t *testing.T) {
		session := "resp-" + testserver.RandomID()
		r, err := e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: textInput("My name is Ada.")},
			option.WithHeader("X-Agentflow-Session", session))
		require.NoError(t, err)
		require.Equal(t, "Nice to meet you, Ada.", r.OutputText())
		next, err := e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: textInput("Hi again."),
			PreviousResponseID: openai.String(r.ID)})
		require.NoError(t, err)
		require.Equal(t, "Hello from the agent.", next.OutputText())
		require.Eventually(t, func() bool {
			tr, err := turnclient.Transcript(ctx, e.Client(), contract.ConversationWorkflowID("demo", session))
			return err == nil && tr.Turns == 2
		}, time.Minute, 50*time.Millisecond, "both messages are the session's")

		// A response in no session has no history to continue.
		alone, err := e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: textInput("Hi.")})
		require.NoError(t, err)
		_, err = e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: textInput("Hi."), PreviousResponseID: openai.String(alone.ID)})
		apiErr := requireAPIError(t, err, http.StatusBadRequest, "unsupported_value")
		require.Equal(t, "previous_response_id", apiErr.Param)
	})

	t.Run("refused", func(t *testing.T) {
		_, err := e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: textInput("Hi."), Store: openai.Bool(false)})
		apiErr := requireAPIError(t, err, http.StatusBadRequest, "unsupported_value")
		require.Equal(t, "store", apiErr.Param)
		_, err = e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "nobody", Input: textInput("Hi.")})
		requireAPIError(t, err, http.StatusNotFound, "model_not_found")
	})
}

// TestOpenAIResponsesNode: OpenAI's Node.js client (the openai package,
// pinned by testdata/openai's lockfile) streams a response, and creates
// one in the background, reads its stream, leaves it, and resumes after
// the last event it read: the text it read is the stored answer, with no
// delta twice and none missing.
func TestOpenAIResponsesNode(t *testing.T) {
	dir := nodeClient(t, "openai", "openai")
	e := newResponsesEnv(t)
	out := runNode(t, dir, "responses.mjs", nodeInput(t, map[string]string{"baseURL": e.api + "/v1", "token": e.token}))
	type run struct {
		ID, Text, Final, Status string
		Seqs                    []int64
		Left                    int64
	}
	var got struct{ Streamed, Background run }
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)

	for _, r := range []run{got.Streamed, got.Background} {
		require.Equal(t, "completed", r.Status)
		require.Equal(t, r.Final, r.Text, "the deltas are the stored answer")
		require.Equal(t, agent.ReplayText(e.turnEvents(r.ID)), r.Final)
		for i := 1; i < len(r.Seqs); i++ {
			require.Greater(t, r.Seqs[i], r.Seqs[i-1], "%v", r.Seqs)
		}
	}
	require.Equal(t, "Because it is durable.", got.Streamed.Final)
	require.Equal(t, "The result is 42.", got.Background.Final)
	require.Positive(t, got.Background.Left, "the stream was left part-way")

	whole := readEvents(t, e.demo.Responses.GetStreaming(context.Background(), got.Background.ID, responses.ResponseGetParams{}), nil)
	require.Equal(t, seqs(whole), got.Background.Seqs, "no event twice, none missing")
}
