package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/sse"
)

// chatCall answers one chat completion: it follows the turn, folds its
// events (chatReply), and writes either one chat.completion when the turn
// has ended, or chat.completion.chunk events as Server-Sent Events while
// it runs.
type chatCall struct {
	answer
	req     chatRequest
	turn    gateway.Turn
	created int64

	reply chatReply
}

// answer is what a chat completion's and a response's answers share: the
// request and its writer, whether a stream has begun, and how a stream
// begins, keeps alive and fails.
type answer struct {
	o       openAI
	w       http.ResponseWriter
	r       *http.Request
	started bool // a stream's answer has begun: its status and headers are sent
}

// begin writes a stream's head, which names the turn's stream.
func (a *answer) begin(streamID string) {
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on as it comes
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(gateway.HeaderStreamID, streamID)
	a.w.WriteHeader(http.StatusOK)
	a.started = true
}

// keepAlive writes a keep-alive comment, once the stream has begun.
func (a *answer) keepAlive() error {
	if !a.started {
		return nil
	}
	if err := a.comment("keep-alive"); err != nil {
		return err
	}
	return a.flush()
}

// comment writes an SSE comment, which clients skip: a note of what the
// turn does (its tool calls, approvals, retries) or a keep-alive.
func (a *answer) comment(text string) error {
	return sse.WriteComment(a.w, strings.Join(strings.Fields(text), " ")) // one line
}

func (a *answer) flush() error { return http.NewResponseController(a.w).Flush() }

// failed answers err, the failure of the follower or of a write, and
// reports whether the answer is over: with nothing more when the client
// has gone (the turn goes on), with OpenAI's error object before a stream
// began, and after, with what streamError makes its last event.
func (a *answer) failed(err error, streamError func(gateway.Problem, error)) bool {
	ctx := a.r.Context()
	switch {
	case ctx.Err() != nil:
	case err == nil:
		return false
	case !a.started:
		a.o.fail(a.w, a.r, err)
	default:
		streamError(a.o.problem(ctx, err), err)
	}
	return true
}

// run follows the turn to its end, or until the client leaves or a write
// fails, and answers.
func (c *chatCall) run() {
	c.finish(pump(c.r.Context(), c.turn.Follow, c, c.req.Stream))
}

// ended: the reply has its final status.
func (c *chatCall) ended() bool { return c.reply.done }

// endless is what the follower's end without a final status is.
func (c *chatCall) endless() error {
	return agent.Errorf(agent.CodeUnavailable, "stream %q ended without a final status", c.turn.StreamID)
}

// sink is an answer pump feeds: a chat completion or a response.
type sink interface {
	// take folds one event and writes what it gives; flush at the end
	// of what has arrived.
	take(e agent.Event, flush bool) error
	// ended reports whether the answer has its final status.
	ended() bool
	// keepAlive writes a keep-alive on a quiet stream.
	keepAlive() error
	// endless is the error of a follower that ended before the answer.
	endless() error
}

// pump follows a turn into s until the follower returns, the answer has
// ended, the client leaves or a write fails, with a keep-alive every
// chatKeepAlive on a stream; it returns what the follower returned, or
// a failed write's error. A slow client holds up its own follower only:
// events wait in a buffer between them.
func pump(ctx context.Context, follow func(ctx context.Context, send func(agent.Event) error) error, s sink, stream bool) error {
	ctx, cancel := context.WithCancel(ctx)
	events, followed := gateway.FollowInto(ctx, follow)
	done := false
	defer func() { // the follower ends with ctx, if it has not
		cancel()
		if !done {
			<-followed
		}
	}()
	var keepAlive <-chan time.Time
	if stream {
		t := time.NewTicker(chatKeepAlive)
		defer t.Stop()
		keepAlive = t.C
	}
	for {
		select {
		case e := <-events:
			if err := s.take(e, len(events) == 0); err != nil || s.ended() {
				return err
			}
		case err := <-followed:
			done = true
			// What the follower sent before it returned is in the buffer.
			for n := len(events); n > 0; n-- {
				if werr := s.take(<-events, n == 1); werr != nil || s.ended() {
					return werr
				}
			}
			if err == nil && !s.ended() {
				err = s.endless()
			}
			return err
		case <-keepAlive:
			if err := s.keepAlive(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take folds one event and, in a stream, writes what it releases;
// flush at the end of what has arrived.
func (c *chatCall) take(e agent.Event, flush bool) error {
	deltas := c.reply.add(e)
	if !c.req.Stream {
		return nil
	}
	if !c.started {
		c.begin(c.turn.StreamID)
		if err := c.chunk(chunkDelta{Role: "assistant", Content: new("")}, nil, nil); err != nil { // the first chunk says who speaks
			return err
		}
	}
	for _, d := range deltas {
		var err error
		switch {
		case d.Note != "":
			err = c.comment(d.Note)
		case d.Reasoning != "":
			err = c.chunk(chunkDelta{ReasoningContent: d.Reasoning}, nil, nil)
		default:
			err = c.chunk(chunkDelta{Content: &d.Content}, nil, nil)
		}
		if err != nil {
			return err
		}
	}
	if flush {
		return c.flush()
	}
	return nil
}

// finish answers once the turn has ended (err nil), or the follower or a
// write failed.
func (c *chatCall) finish(err error) {
	if c.failed(err, c.streamError) {
		return
	}
	switch {
	case c.reply.failure != nil && !c.started:
		writeOpenAIError(c.w, turnProblem(c.reply.failure), nil)
	case c.reply.failure != nil:
		c.streamError(turnProblem(c.reply.failure), nil)
	case c.req.Stream:
		c.end()
	default:
		c.complete()
	}
}

// Wire types of a chat completion and its chunks.
type (
	chatCompletion struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []chatChoice `json:"choices"`
		Usage   chatUsage    `json:"usage"`
	}
	chatChoice struct {
		Index        int             `json:"index"`
		Message      chatAnswer      `json:"message"`
		FinishReason string          `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	}
	chatAnswer struct {
		Role             string  `json:"role"`
		Content          string  `json:"content"`
		ReasoningContent string  `json:"reasoning_content,omitempty"`
		Refusal          *string `json:"refusal"`
		// Annotations are the chunks the answer cites (urlCitations).
		Annotations []urlCitation `json:"annotations,omitempty"`
	}
	chatChunk struct {
		ID      string        `json:"id"`
		Object  string        `json:"object"`
		Created int64         `json:"created"`
		Model   string        `json:"model"`
		Choices []chunkChoice `json:"choices"`
		// Usage is set on the last chunk, when the client asked for it.
		Usage *chatUsage `json:"usage,omitempty"`
	}
	chunkChoice struct {
		Index        int             `json:"index"`
		Delta        chunkDelta      `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	}
	chunkDelta struct {
		Role             string  `json:"role,omitempty"`
		Content          *string `json:"content,omitempty"`
		ReasoningContent string  `json:"reasoning_content,omitempty"`
	}
	chatUsage struct {
		PromptTokens            int                `json:"prompt_tokens"`
		CompletionTokens        int                `json:"completion_tokens"`
		TotalTokens             int                `json:"total_tokens"`
		PromptTokensDetails     *promptTokensUsage `json:"prompt_tokens_details,omitempty"`
		CompletionTokensDetails *outputTokensUsage `json:"completion_tokens_details,omitempty"`
	}
	promptTokensUsage struct {
		CachedTokens int `json:"cached_tokens"`
	}
	outputTokensUsage struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	}
)

var jsonNull = json.RawMessage("null")

// usage is the turn's usage, summed over its model calls.
func (c *chatCall) usage() chatUsage {
	u := c.reply.usage
	out := chatUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.CachedTokens > 0 {
		out.PromptTokensDetails = &promptTokensUsage{CachedTokens: u.CachedTokens}
	}
	if u.ReasoningTokens > 0 {
		out.CompletionTokensDetails = &outputTokensUsage{ReasoningTokens: u.ReasoningTokens}
	}
	return out
}

// complete answers the whole chat.completion.
func (c *chatCall) complete() {
	c.w.Header().Set(gateway.HeaderStreamID, c.turn.StreamID)
	gateway.WriteJSON(c.w, http.StatusOK, chatCompletion{
		ID: c.turn.JobID, Object: "chat.completion", Created: c.created, Model: c.req.Model,
		Choices: []chatChoice{{
			Message: chatAnswer{Role: "assistant", Content: c.reply.content.String(), ReasoningContent: c.reply.reasoning.String(),
				Annotations: urlCitations(c.reply.content.String(), c.reply.citations)},
			FinishReason: c.reply.finishReason(), Logprobs: jsonNull,
		}},
		Usage: c.usage(),
	})
}

// end sends the chunk with the finish reason, the usage when asked for,
// and [DONE].
func (c *chatCall) end() {
	if err := c.chunk(chunkDelta{}, new(c.reply.finishReason()), nil); err != nil {
		return
	}
	if c.req.IncludeUsage {
		if err := c.chunk(chunkDelta{}, nil, new(c.usage())); err != nil {
			return
		}
	}
	_, _ = c.w.Write([]byte("data: [DONE]\n\n"))
	_ = c.flush()
}

// chunk writes one chat.completion.chunk; the usage chunk has no choice.
func (c *chatCall) chunk(d chunkDelta, finish *string, usage *chatUsage) error {
	ch := chatChunk{ID: c.turn.JobID, Object: "chat.completion.chunk", Created: c.created, Model: c.req.Model, Usage: usage,
		Choices: []chunkChoice{{Delta: d, FinishReason: finish, Logprobs: jsonNull}}}
	if usage != nil {
		ch.Choices = []chunkChoice{}
	}
	return c.data(ch)
}

// streamError ends a stream with OpenAI's error object as its last event
// (clients read a data event with an error member as the stream's
// failure), and no [DONE].
func (c *chatCall) streamError(p gateway.Problem, err error) {
	if c.data(struct {
		Error openAIError `json:"error"`
	}{toOpenAIError(p, err)}) == nil {
		_ = c.flush()
	}
}

// data writes one SSE data event: a JSON value has no newline, so it is
// one data line.
func (c *chatCall) data(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.w.Write(append(append([]byte("data: "), b...), "\n\n"...))
	return err
}
