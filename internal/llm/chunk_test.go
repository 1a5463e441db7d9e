package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/scripted"
)

const chunkScript = `
pacing: {chunk_words: 2}
rules:
  - name: think
    when: {user: 'add (\d+) and (\d+)'}
    reply:
      reasoning: 'The user wants $1 + $2. The calculator is exact.'
      text: 'Let me add them.'
      tool_calls: [{name: calculator, arguments: '{"expression": "$1 + $2"}'}]
  - name: two
    when: {user: 'two calls'}
    reply:
      tool_calls:
        - {name: weather, arguments: '{"city": "Zürich", "unit": "celsius"}'}
        - {name: clock, arguments: '{"tz": "Europe/Zurich"}'}
  - name: plain
    when: {user: 'plain'}
    reply: {text: 'Just text, no thoughts.'}
`

func startScript(t *testing.T, yaml string) *llm.Router {
	t.Helper()
	script, err := scripted.Parse([]byte(yaml))
	require.NoError(t, err)
	srv, err := scripted.Start("127.0.0.1:0", script, scripted.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	r, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL()})
	require.NoError(t, err)
	return r
}

// collected is a stream's chunks: each kind's parts joined, and the order
// in which the kinds came (runs collapsed).
type collected struct {
	chunks    []llm.Chunk
	order     []llm.ChunkKind
	reasoning strings.Builder
	text      strings.Builder
	calls     map[int]*llm.ToolCallDelta // by index: id, name and the joined arguments
	deltas    map[int]int
}

func (c *collected) add(_ context.Context, ch llm.Chunk) error {
	c.chunks = append(c.chunks, ch)
	if len(c.order) == 0 || c.order[len(c.order)-1] != ch.Kind {
		c.order = append(c.order, ch.Kind)
	}
	switch ch.Kind {
	case llm.ChunkReasoning:
		c.reasoning.WriteString(ch.Text)
	case llm.ChunkText:
		c.text.WriteString(ch.Text)
	case llm.ChunkToolCall:
		if c.calls == nil {
			c.calls, c.deltas = map[int]*llm.ToolCallDelta{}, map[int]int{}
		}
		d := ch.ToolCall
		call := c.calls[d.Index]
		if call == nil {
			call = &llm.ToolCallDelta{Index: d.Index, ID: d.ID, Name: d.Name}
			c.calls[d.Index] = call
		}
		if call.ID != d.ID || call.Name != d.Name {
			return fmt.Errorf("delta %d of call %d names %s/%s, not %s/%s", c.deltas[d.Index], d.Index, d.ID, d.Name, call.ID, call.Name)
		}
		call.Args += d.Args
		c.deltas[d.Index]++
	}
	return nil
}

// TestGenerateChunks: through the real openai provider, a streamed reply
// arrives as typed chunks — reasoning, then text, then the tool call's
// argument fragments — that add up to the Response, whichever member the
// server names the reasoning with; OnText still gets the text alone.
func TestGenerateChunks(t *testing.T) {
	for _, field := range []string{scripted.ReasoningContent, scripted.ReasoningPlain} {
		t.Run(field, func(t *testing.T) {
			r := startScript(t, "reasoning_field: "+field+"\n"+chunkScript)
			var got collected
			var onText strings.Builder
			resp, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("add 2 and 3"),
				Tools: []agent.Tool{calculator}, OnChunk: got.add,
				OnText: func(_ context.Context, s string) error { onText.WriteString(s); return nil }})
			require.NoError(t, err)

			require.Equal(t, []llm.ChunkKind{llm.ChunkReasoning, llm.ChunkText, llm.ChunkToolCall}, got.order)
			require.Equal(t, "The user wants 2 + 3. The calculator is exact.", got.reasoning.String())
			require.Equal(t, "The user wants 2 + 3. The calculator is exact.", resp.Reasoning)
			require.Equal(t, "Let me add them.", got.text.String())
			require.Equal(t, "Let me add them.", onText.String(), "OnText gets the text only")
			require.Equal(t, "Let me add them.", resp.Message.Content, "reasoning is not the answer")
			require.Greater(t, len(got.chunks), 6, "reasoning and text come word by word")

			require.Len(t, got.calls, 1)
			require.Len(t, resp.Message.ToolCalls, 1)
			want := resp.Message.ToolCalls[0]
			call := got.calls[0]
			require.Equal(t, want.ID, call.ID)
			require.Equal(t, "calculator", call.Name)
			require.Equal(t, want.Arguments, call.Args)
			require.Equal(t, `{"expression": "2 + 3"}`, call.Args)
			require.Greater(t, got.deltas[0], 3, "the arguments come in fragments")
			first := got.chunks[len(got.chunks)-got.deltas[0]].ToolCall
			require.Empty(t, first.Args, "the call's first delta announces it")
			require.Equal(t, 10, resp.Usage.ReasoningTokens, "estimated: the reasoning's words")
		})
	}
}

func TestGenerateChunksOfTwoToolCalls(t *testing.T) {
	r := startScript(t, chunkScript)
	var got collected
	resp, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("two calls"), OnChunk: got.add})
	require.NoError(t, err)
	require.Equal(t, []llm.ChunkKind{llm.ChunkToolCall}, got.order)
	require.Len(t, resp.Message.ToolCalls, 2)
	require.Len(t, got.calls, 2)
	for i, want := range resp.Message.ToolCalls {
		require.Equal(t, want.ID, got.calls[i].ID)
		require.Equal(t, want.Name, got.calls[i].Name)
		require.Equal(t, want.Arguments, got.calls[i].Args)
	}
	require.Equal(t, "weather", got.calls[0].Name)
	require.Equal(t, "clock", got.calls[1].Name)
	require.Empty(t, resp.Reasoning)
}

// TestGeneratePlainReasoning: an unstreamed reply's reasoning is in the
// Response, under either name.
func TestGeneratePlainReasoning(t *testing.T) {
	for _, field := range []string{scripted.ReasoningContent, scripted.ReasoningPlain} {
		t.Run(field, func(t *testing.T) {
			r := startScript(t, "reasoning_field: "+field+"\n"+chunkScript)
			resp, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("add 4 and 5"), Tools: []agent.Tool{calculator}})
			require.NoError(t, err)
			require.Equal(t, "The user wants 4 + 5. The calculator is exact.", resp.Reasoning)
			require.Equal(t, "Let me add them.", resp.Message.Content)
			require.JSONEq(t, `{"expression": "4 + 5"}`, resp.Message.ToolCalls[0].Arguments)
		})
	}
}

func TestGenerateStopsWhenOnChunkFails(t *testing.T) {
	r := startScript(t, chunkScript)
	stop := errors.New("client gone")
	n := 0
	_, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("add 2 and 3"),
		OnChunk: func(_ context.Context, c llm.Chunk) error {
			n++
			if c.Kind == llm.ChunkReasoning {
				return stop
			}
			return nil
		}})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, n, "the first chunk's error ends the call")
	var le *llm.Error
	require.False(t, errors.As(err, &le))
}

func TestGenerateChunksWithoutReasoning(t *testing.T) {
	r := startScript(t, chunkScript)
	var got collected
	resp, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("plain"), OnChunk: got.add})
	require.NoError(t, err)
	require.Equal(t, []llm.ChunkKind{llm.ChunkText}, got.order)
	require.Equal(t, "Just text, no thoughts.", got.text.String())
	require.Empty(t, resp.Reasoning)
}

// anthropicStream is an Anthropic Messages API stream with a thinking
// block, a text block and a tool_use block.
const anthropicStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":20,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Two plus "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"three."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"add."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"calculator","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"expression\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"2 + 3\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}

event: message_stop
data: {"type":"message_stop"}

`

// TestGenerateAnthropicChunks: a Messages API stream's thinking, text and
// tool input deltas become chunks in order, and the thinking block is
// kept with its signature, to be sent back.
func TestGenerateAnthropicChunks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(anthropicStream))
	}))
	t.Cleanup(srv.Close)
	r, err := llm.New(llm.Config{AnthropicAPIKey: "sk-ant-test", AnthropicBaseURL: srv.URL + "/v1"})
	require.NoError(t, err)

	var got collected
	var onText strings.Builder
	resp, err := r.Generate(context.Background(), llm.Request{Model: "anthropic:claude-test", Messages: user("add 2 and 3"),
		Tools: []agent.Tool{calculator}, OnChunk: got.add,
		OnText: func(_ context.Context, s string) error { onText.WriteString(s); return nil }})
	require.NoError(t, err)
	require.Equal(t, []llm.ChunkKind{llm.ChunkReasoning, llm.ChunkText, llm.ChunkToolCall}, got.order)
	require.Equal(t, []agent.Reasoning{{Text: "Two plus three.", Signature: "c2ln"}}, resp.Message.Reasoning)
	require.Equal(t, "toolu_1", got.calls[0].ID)
	require.Equal(t, "calculator", got.calls[0].Name)
	require.JSONEq(t, `{"expression": "2 + 3"}`, got.calls[0].Args, "the arguments streamed as they came")
	require.Equal(t, "Two plus three.", got.reasoning.String())
	require.Equal(t, "Two plus three.", resp.Reasoning)
	require.Equal(t, "Let me add.", got.text.String())
	require.Equal(t, "Let me add.", onText.String())
	require.Equal(t, "Let me add.", resp.Message.Content)
	require.Len(t, resp.Message.ToolCalls, 1)
	require.Equal(t, "toolu_1", resp.Message.ToolCalls[0].ID)
	require.JSONEq(t, `{"expression": "2 + 3"}`, resp.Message.ToolCalls[0].Arguments)
	require.Equal(t, agent.FinishToolCalls, resp.FinishReason)
}
