package scripted

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// reply is a rendered answer.
type reply struct {
	id        string
	model     string
	created   int64
	reasoning string
	text      string
	toolCalls []wireToolCall
	finish    string // as the script gives it; "" for the default
	usage     wireUsage
	// cacheWrite is the prompt tokens written to the cache (Anthropic's
	// cache_creation_input_tokens).
	cacheWrite int
}

func (s *Server) render(rule *compiledRule, v vars, rec Request, cached cacheUse) reply {
	rep := reply{
		id:        fmt.Sprintf("chatcmpl-scripted-%d", s.completionIDs.Add(1)),
		model:     rec.Model,
		created:   time.Now().Unix(),
		reasoning: v.expand(rule.reply.Reasoning),
		text:      v.expand(rule.reply.Text),
		finish:    rule.reply.FinishReason,
	}
	rep.model = cmp.Or(rep.model, "scripted")
	for _, tc := range rule.reply.ToolCalls {
		id := fmt.Sprintf("call_%d", s.callIDs.Add(1))
		if tc.ID != "" {
			id = tc.ID
		}
		rep.toolCalls = append(rep.toolCalls, wireToolCall{
			ID:       id,
			Type:     "function",
			Function: wireFunction{Name: tc.Name, Arguments: s.arguments(rec, tc.Name, v.expand(tc.Arguments))},
		})
	}
	if u := rule.reply.Usage; u != nil {
		rep.usage = wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
		if u.CachedTokens > 0 {
			rep.usage.PromptTokensDetails = &promptDetails{CachedTokens: u.CachedTokens}
		}
		if u.ReasoningTokens > 0 {
			rep.usage.CompletionTokensDetails = &completionDetails{ReasoningTokens: u.ReasoningTokens}
		}
		rep.cacheWrite = u.CacheWriteTokens
	} else {
		rep.usage = estimateUsage(rec, rep)
		if s.cache != nil {
			rep.usage.PromptTokens, rep.cacheWrite = cached.prompt, cached.written
			if cached.cached > 0 {
				rep.usage.PromptTokensDetails = &promptDetails{CachedTokens: cached.cached}
			}
		}
	}
	rep.usage.TotalTokens = rep.usage.PromptTokens + rep.usage.CompletionTokens
	return rep
}

// arguments are a reply's call of tool with args as the script writes
// them, as the API sends them: a strict OpenAI tool's as a strict model
// writes them (strictArguments).
func (s *Server) arguments(rec Request, tool, args string) string {
	if schema, ok := rec.strictSchemas[tool]; ok && rec.API == APIOpenAI {
		return strictArguments(schema, args)
	}
	return args
}

// estimateUsage counts words, plus a few tokens of overhead per message as
// real tokenizers have, and a token per part that is not text.
func estimateUsage(rec Request, rep reply) wireUsage {
	var u wireUsage
	if rec.API == APIAnthropic && rec.System != "" {
		u.PromptTokens += 3 + len(strings.Fields(rec.System))
	}
	for _, m := range rec.Messages {
		u.PromptTokens += 3 + len(strings.Fields(m.Content)) + len(strings.Fields(m.Reasoning))
		for _, tc := range m.ToolCalls {
			u.PromptTokens += 1 + len(strings.Fields(tc.Arguments))
		}
		for _, p := range m.Parts {
			if p.Type != "text" {
				u.PromptTokens++
			}
		}
	}
	reasoning := len(strings.Fields(rep.reasoning))
	u.CompletionTokens = reasoning + len(strings.Fields(rep.text))
	for _, tc := range rep.toolCalls {
		u.CompletionTokens += 1 + len(strings.Fields(tc.Function.Arguments))
	}
	u.CompletionTokens = max(u.CompletionTokens, 1)
	if reasoning > 0 {
		u.CompletionTokensDetails = &completionDetails{ReasoningTokens: reasoning}
	}
	return u
}

// withReasoning sets text as the reasoning of a delta or message, under
// the member the script names.
func (s *Server) withReasoning(text string) (reasoningContent, reasoning *string) {
	if s.reasoningAs == ReasoningPlain {
		return nil, &text
	}
	return &text, nil
}

// openAIFinish is the finish_reason of a reply: the script's, else stop
// or tool_calls.
func openAIFinish(rep reply) string {
	switch {
	case rep.finish != "":
		return rep.finish
	case len(rep.toolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func (s *Server) respond(w http.ResponseWriter, rep reply, cut int) {
	msg := completionMessage{Role: "assistant", ToolCalls: rep.toolCalls}
	if rep.text != "" || len(rep.toolCalls) == 0 {
		msg.Content = &rep.text
	}
	if rep.reasoning != "" {
		msg.ReasoningContent, msg.Reasoning = s.withReasoning(rep.reasoning)
	}
	s.writeBody(w, completion{
		ID:                rep.id,
		Object:            "chat.completion",
		Created:           rep.created,
		Model:             rep.model,
		Choices:           []completionChoice{{Message: msg, FinishReason: openAIFinish(rep)}},
		Usage:             rep.usage,
		SystemFingerprint: "fp_scripted",
	}, cut, APIOpenAI)
}

// writeBody writes a plain reply, or half of it and cuts the connection.
func (s *Server) writeBody(w http.ResponseWriter, v any, cut int, api string) {
	body, err := json.Marshal(v)
	if err != nil {
		apiError(w, api, http.StatusInternalServerError, "encode response: "+err.Error(), "", 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if cut > 0 {
		_, _ = w.Write(body[:len(body)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	_, _ = w.Write(body)
}

// event is one SSE event; paced events wait Pacing.DelayMS before they go.
type event struct {
	name  string // the event: line; "" for none (OpenAI)
	data  any    // marshalled as the data: line
	text  string // the reply text it carries, for Options.OnChunk
	paced bool
}

// send streams events, then trailer, pacing them and cutting the stream
// after cut events when cut > 0.
func (s *Server) send(w http.ResponseWriter, r *http.Request, events []event, cut int, trailer string) {
	ctx := r.Context()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	delay := time.Duration(s.pacing.DelayMS) * time.Millisecond
	var timer *time.Timer
	if delay > 0 {
		timer = time.NewTimer(delay)
		timer.Stop() // armed by Reset before each paced event
		defer timer.Stop()
	}
	for i, ev := range events {
		if cut > 0 && i == cut {
			panic(http.ErrAbortHandler)
		}
		if ctx.Err() != nil {
			return // the client went away
		}
		if delay > 0 && ev.paced && i > 0 {
			timer.Reset(delay)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		data, err := json.Marshal(ev.data)
		if err != nil {
			return
		}
		if ev.name != "" {
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, data)
		} else {
			_, err = fmt.Fprintf(w, "data: %s\n\n", data)
		}
		if err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		if s.onChunk != nil && ev.text != "" {
			s.onChunk(ev.text, time.Now())
		}
	}
	if cut > 0 {
		// The stream had fewer events than the cut point: cut before its
		// end, so it never completes.
		panic(http.ErrAbortHandler)
	}
	if trailer == "" {
		return
	}
	if _, err := io.WriteString(w, trailer); err == nil && flusher != nil {
		flusher.Flush()
	}
}

// argFragmentBytes is the size of the tool-call argument fragments of a
// stream; small, so clients must reassemble arguments as with OpenAI.
const argFragmentBytes = 8

func (s *Server) chunks(rep reply, includeUsage bool) []event {
	base := chunk{ID: rep.id, Object: "chat.completion.chunk", Created: rep.created, Model: rep.model,
		SystemFingerprint: "fp_scripted"}
	one := func(d chunkDelta, finish *string) chunk {
		c := base
		c.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
		return c
	}
	empty := ""
	events := []event{{data: one(chunkDelta{Role: "assistant", Content: &empty}, nil)}}
	for _, piece := range splitWords(rep.reasoning, s.pacing.ChunkWords) {
		d := chunkDelta{}
		d.ReasoningContent, d.Reasoning = s.withReasoning(piece)
		events = append(events, event{data: one(d, nil), paced: true})
	}
	for _, piece := range splitWords(rep.text, s.pacing.ChunkWords) {
		events = append(events, event{data: one(chunkDelta{Content: &piece}, nil), text: piece, paced: true})
	}
	for i, tc := range rep.toolCalls {
		head := tc
		head.Index = &i
		head.Function.Arguments = ""
		events = append(events, event{data: one(chunkDelta{ToolCalls: []wireToolCall{head}}, nil), paced: true})
		for _, frag := range splitBytes(tc.Function.Arguments, argFragmentBytes) {
			d := wireToolCall{Index: &i, Function: wireFunction{Arguments: frag}}
			events = append(events, event{data: one(chunkDelta{ToolCalls: []wireToolCall{d}}, nil), paced: true})
		}
	}
	finish := openAIFinish(rep)
	events = append(events, event{data: one(chunkDelta{}, &finish)})
	if includeUsage {
		u := rep.usage
		c := base
		c.Choices = []chunkChoice{}
		c.Usage = &u
		events = append(events, event{data: c})
	}
	return events
}

// splitWords cuts text into pieces of n words; each piece carries the
// whitespace before its words, so the pieces join to exactly text.
func splitWords(text string, n int) []string {
	var pieces []string
	start, words, inWord := 0, 0, false
	for i, c := range text {
		space := c == ' ' || c == '\n' || c == '\t' || c == '\r'
		if space && inWord {
			words++
			if words == n {
				pieces = append(pieces, text[start:i])
				start, words = i, 0
			}
		}
		inWord = !space
	}
	if start < len(text) {
		pieces = append(pieces, text[start:])
	}
	return pieces
}

// splitBytes cuts s into pieces of at most n bytes without splitting a
// UTF-8 sequence.
func splitBytes(s string, n int) []string {
	var pieces []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		if end == 0 {
			_, end = utf8.DecodeRuneInString(s)
		}
		pieces = append(pieces, s[:end])
		s = s[end:]
	}
	return pieces
}
