package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/tmc/langchaingo/llms"
)

// streamOptions are the langchaingo options that stream a call of an
// OpenAI-compatible provider into c. langchaingo v0.1.14's openai client
// calls StreamingReasoningFunc(reasoning, chunk) for every SSE chunk:
// reasoning is the delta's reasoning_content, chunk its content or, when
// it has tool-call deltas, those deltas as a JSON array (a call's first
// delta with id, type and name, then argument fragments without them; no
// index). StreamingFunc gets the same chunks without the reasoning, so
// only the first is set and no chunk is seen twice. (The anthropic
// provider streams through its own SDK: anthropic.go.)
func streamOptions(c *chunker) []llms.CallOption {
	return []llms.CallOption{llms.WithStreamingReasoningFunc(c.openAI)}
}

// chunker turns what langchaingo streams into Chunks for one call. The
// clients call it from one goroutine at a time.
type chunker struct {
	req Request
	st  *callState
	// calls counts the tool calls announced so far; id and name are the
	// last one's, which argument fragments continue (as langchaingo
	// assembles them).
	calls    int
	id, name string
}

func (c *chunker) openAI(ctx context.Context, reasoning, chunk []byte) error {
	if err := c.reasoning(ctx, reasoning, nil); err != nil {
		return err
	}
	return c.text(ctx, chunk)
}

func (c *chunker) reasoning(ctx context.Context, reasoning, _ []byte) error {
	if len(reasoning) == 0 {
		return nil
	}
	return c.emit(ctx, Chunk{Kind: ChunkReasoning, Text: string(reasoning)})
}

// text takes a content chunk: reply text, or tool-call deltas as JSON.
func (c *chunker) text(ctx context.Context, chunk []byte) error {
	if len(chunk) == 0 {
		return nil
	}
	deltas, ok := parseToolCallJSON(chunk)
	if !ok {
		return c.emit(ctx, Chunk{Kind: ChunkText, Text: string(chunk)})
	}
	for _, d := range deltas {
		tc, ok := c.toolCall(d)
		if !ok {
			continue
		}
		if err := c.emit(ctx, Chunk{Kind: ChunkToolCall, ToolCall: tc}); err != nil {
			return err
		}
	}
	return nil
}

// toolCall names a delta's call the way langchaingo assembles the reply:
// a delta without a type that has arguments continues the last call (and
// is dropped when there is none); any other starts a new call. A call
// without an id gets the one toResponse gives it.
func (c *chunker) toolCall(d toolDelta) (ToolCallDelta, bool) {
	if d.Type == "" && d.Function.Arguments != "" {
		if c.calls == 0 {
			return ToolCallDelta{}, false
		}
		return ToolCallDelta{Index: c.calls - 1, ID: c.id, Name: c.name, Args: d.Function.Arguments}, true
	}
	index := c.calls
	c.calls++
	c.id, c.name = d.ID, d.Function.Name
	if c.id == "" {
		c.id = fmt.Sprintf("call_%d", index)
	}
	return ToolCallDelta{Index: index, ID: c.id, Name: c.name, Args: d.Function.Arguments}, true
}

// emit hands a chunk to the request's callbacks; an error from one stops
// the call, and Generate returns it.
func (c *chunker) emit(ctx context.Context, ch Chunk) error {
	if c.req.OnChunk != nil {
		if err := c.req.OnChunk(ctx, ch); err != nil {
			c.st.setTextErr(err)
			return err
		}
	}
	if ch.Kind == ChunkText && c.req.OnText != nil {
		if err := c.req.OnText(ctx, ch.Text); err != nil {
			c.st.setTextErr(err)
			return err
		}
	}
	return nil
}

// toolDelta is one tool-call delta as langchaingo's openai client encodes
// it for the streaming callback (openaiclient.ToolCall: same members, same
// order).
type toolDelta struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// parseToolCallJSON reads a streamed chunk that is not reply text:
// langchaingo's JSON encoding of tool-call deltas, a JSON array of objects
// that carry a "function" member. The deltas are returned only when the
// chunk is exactly what langchaingo writes, so that reply text that looks
// like tool calls never becomes one; such text is dropped all the same,
// as it always was.
func parseToolCallJSON(chunk []byte) ([]toolDelta, bool) {
	b := bytes.TrimSpace(chunk)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	var members []map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil || len(members) == 0 {
		return nil, false
	}
	for _, m := range members {
		if _, ok := m["function"]; !ok {
			return nil, false
		}
	}
	var deltas []toolDelta
	if json.Unmarshal(b, &deltas) != nil {
		return nil, true
	}
	if again, err := json.Marshal(deltas); err != nil || !bytes.Equal(again, chunk) {
		return nil, true
	}
	return deltas, true
}
