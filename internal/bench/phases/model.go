package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// calls are the times the model saw a turn's two requests.
type calls struct {
	req1, end1, req2, chunk2, end2 time.Time
}

// model is the peers' fake model's turn, paced: a user message gets a
// calculator tool call, a tool result an answer of 17 words. It notes when
// each request of a turn (by the tag in its prompt) arrived and ended.
type model struct {
	ttft, pace time.Duration
	mu         sync.Mutex
	seen       map[string]*calls
	n          int
}

var tagRE = regexp.MustCompile(`#[0-9]+-[0-9]+`)

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	tag, first, ok := readRequest(r)
	if !ok {
		http.Error(w, "want a chat completion request", http.StatusBadRequest)
		return
	}
	id, c := m.track(tag)
	if first {
		m.note(func() { c.req1 = arrived })
	} else {
		m.note(func() { c.req2 = arrived })
	}

	time.Sleep(m.ttft)
	w.Header().Set("Content-Type", "text/event-stream")
	st := &stream{w: w, id: id}
	st.fl, _ = w.(http.Flusher)
	words := strings.Fields("The answer is 50 . That is 12.5 times 4 computed exactly with the calculator tool .")
	usage := map[string]any{"prompt_tokens": 40, "completion_tokens": len(words), "total_tokens": 40 + len(words)}
	if first {
		st.send(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_" + id, "type": "function",
			"function": map[string]any{"name": "calculator", "arguments": ""}}}}, nil, nil)
		st.send(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `{"expression":"12.5*4"}`}}}}, nil, nil)
		st.send(map[string]any{}, "tool_calls", usage)
	} else {
		m.answer(st, c, words)
		st.send(map[string]any{}, "stop", usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if st.fl != nil {
		st.fl.Flush()
	}
	ended := time.Now()
	if first {
		m.note(func() { c.end1 = ended })
	} else {
		m.note(func() { c.end2 = ended })
	}
}

// readRequest reads a chat completion request: the tag of its turn (in a
// user message) and whether it is the turn's first request (its last
// message the user's); ok is false for a body that is not one.
func readRequest(r *http.Request) (tag string, first, ok bool) {
	var q struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || len(q.Messages) == 0 {
		return "", false, false
	}
	for _, msg := range q.Messages {
		if s, ok := msg.Content.(string); ok && msg.Role == "user" {
			tag = tagRE.FindString(s)
		}
	}
	return tag, q.Messages[len(q.Messages)-1].Role == "user", true
}

// track numbers a request and returns its completion id and the calls of
// its turn, new for a tag not seen before.
func (m *model) track(tag string) (string, *calls) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	id := "chatcmpl-" + strconv.Itoa(m.n)
	c := m.seen[tag]
	if c == nil {
		c = &calls{}
		m.seen[tag] = c
	}
	return id, c
}

// note sets a time of a turn's calls under the model's lock.
func (m *model) note(f func()) { m.mu.Lock(); f(); m.mu.Unlock() }

// answer streams the answer's words, paced, and notes when its first
// went.
func (m *model) answer(st *stream, c *calls, words []string) {
	for i, wd := range words {
		if i > 0 {
			time.Sleep(m.pace)
			wd = " " + wd
		} else {
			m.note(func() { c.chunk2 = time.Now() })
		}
		d := map[string]any{"content": wd}
		if i == 0 {
			d["role"] = "assistant"
		}
		st.send(d, nil, nil)
	}
}

// stream writes the chunks of one streamed completion.
type stream struct {
	w  http.ResponseWriter
	fl http.Flusher // nil when w cannot flush
	id string
}

// send writes one chunk and flushes it.
func (st *stream) send(delta map[string]any, finish any, usage any) {
	chunk := map[string]any{"id": st.id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": "fake",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	if usage != nil {
		chunk["usage"] = usage
	}
	b, _ := json.Marshal(chunk)
	fmt.Fprintf(st.w, "data: %s\n\n", b)
	if st.fl != nil {
		st.fl.Flush()
	}
}

// report prints one group of turns' phases.
func (m *model) report(name string, ss []sample) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var total, before, between, after, lag []float64
	for _, s := range ss {
		c := m.seen[s.tag]
		if c == nil || c.req1.IsZero() || c.end1.IsZero() || c.req2.IsZero() || c.end2.IsZero() {
			return fmt.Errorf("turn %s: the model did not see both of its calls", s.tag)
		}
		total = append(total, ms(s.end.Sub(s.start)))
		before = append(before, ms(c.req1.Sub(s.start)))
		between = append(between, ms(c.req2.Sub(c.end1)))
		after = append(after, ms(s.end.Sub(c.end2)))
		lag = append(lag, ms(s.first.Sub(c.chunk2)))
	}
	cell := func(v []float64) string { return fmt.Sprintf("%.1f (%.1f)", mean(v), slices.Max(v)) }
	fmt.Printf("%-18s %8d %14s %14s %14s %14s %14s\n", name, len(ss), cell(total), cell(before), cell(between), cell(after), cell(lag))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
