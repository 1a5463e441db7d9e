package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentflow/agentflow/internal/scripted"
)

// script counts with the calculator: the first step asks for 0 + 1, each
// result n below calls for n + 1, and the result calls is the answer. The
// count lives in the last tool result, so the loop holds whatever part of
// the turn the model is sent. Its prompt cache is OpenAI's: prompts of
// 1,024 tokens or more, cached in blocks of 128.
func script(calls int) string {
	return fmt.Sprintf(`
prompt_cache: {min_tokens: 1024, block_tokens: 128}
rules:
  - name: step
    when: {tool: '(?:"result"\s*:\s*"?|^\s*)(?P<n>[0-9]+)', below: {n: %d}}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "${n} + 1"}'}]}
  - name: done
    when: {tool: '(?:"result"\s*:\s*"?|^\s*)(?P<n>[0-9]+)'}
    reply: {text: 'Counted to ${n}.'}
  - name: first
    when: {user: '^Count to'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "0 + 1"}'}]}
`, calls)
}

// model is the scripted model server, with what it saw of every request.
type model struct {
	srv *scripted.Server

	mu                  sync.Mutex
	requests            int
	firstBytes, maxSize int
	lastBytes           int
	prompt, cached      int64
	// arrivals are when each request came in, in order: a step's time,
	// seen from the model's side, is from one request to the next.
	arrivals []time.Time
}

func startModel(addr string, calls int) (*model, error) {
	s, err := scripted.Parse([]byte(script(calls)))
	if err != nil {
		return nil, err
	}
	m := &model{}
	// Requests grow with the turn: keep none, count them all.
	m.srv, err = scripted.Start(addr, s, scripted.Options{MaxRecorded: 1, OnRequest: m.saw})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *model) saw(r scripted.Request) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.arrivals = append(m.arrivals, now)
	m.requests++
	if m.requests == 1 {
		m.firstBytes = r.Bytes
	}
	m.lastBytes = r.Bytes
	m.maxSize = max(m.maxSize, r.Bytes)
	m.prompt += int64(r.PromptTokens)
	m.cached += int64(r.CachedTokens)
}

func (m *model) url() string { return m.srv.URL() }

func (m *model) close() { _ = m.srv.Close() }

// agentYAML is the benchmark's agent: the calculator, enough model calls
// for the turn and its answer, a day to run, and a system prompt of about
// a thousand tokens, as agents in production have.
func agentYAML(calls int) string {
	var prompt strings.Builder
	prompt.WriteString("You count with the calculator tool, one step at a time, until you reach the number the user asks for.\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&prompt, "Guideline %d: make exactly one calculator call per step, add one to the last result, and never skip, repeat or guess a number.\n", i)
	}
	return fmt.Sprintf(`tenant: demo
tools:
  - name: calculator
    kind: calculator
agents:
  - id: longturn
    description: Counts with the calculator, one call a step (the long-turn benchmark).
    model: openai:scripted-longturn
    system_prompt: %q
    tools: [calculator]
    temperature: 0
    limits: {max_iterations: %d, turn_timeout_sec: 86400}
`, prompt.String(), calls+1)
}

// stepTimes are the turn's step times in ms as the model saw them: from
// each request's arrival to the next one's, the model's reply, the tool
// call and the turn's own work between two calls. Unlike the follower's
// times they do not depend on when events reach a client, which now come
// in bursts.
func (m *model) stepTimes() []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]float64, 0, max(0, len(m.arrivals)-1))
	for i := 1; i < len(m.arrivals); i++ {
		out = append(out, float64(m.arrivals[i].Sub(m.arrivals[i-1]).Microseconds())/1000)
	}
	return out
}
