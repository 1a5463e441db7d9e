package gatewaytest

import (
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
)

// Log builds a turn's log of events (turn/demo/j1): indices in order
// from 1. The other functions make its events: a status, a token of a
// step's attempt, reasoning, a step's usage, a text content block, a
// calculator call's event (call_1) and its argument deltas.
func Log(events ...agent.Event) []agent.Event {
	for i := range events {
		events[i].StreamID, events[i].Index = "turn/demo/j1", int64(i+1)
	}
	return events
}

func Status(s string) agent.Event { return agent.Event{Kind: agent.EventStatus, Status: s} }
func Token(step, attempt int, text string) agent.Event {
	return agent.Event{Kind: agent.EventToken, Step: step, Attempt: attempt, Text: text}
}
func Reasoning(step int, text string) agent.Event {
	return agent.Event{Kind: agent.EventReasoning, Step: step, Attempt: 1, Text: text}
}
func Usage(step, prompt, completion int) agent.Event {
	return agent.Event{Kind: agent.EventUsage, Step: step, Usage: &agent.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}}
}
func Content(text string) agent.Event {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	return agent.Event{Kind: agent.EventContent, Content: b}
}
func Tool(kind agent.EventKind, status string) agent.Event {
	return agent.Event{Kind: kind, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", Status: status}}
}

func Args(step int, delta string) agent.Event {
	return agent.Event{Kind: agent.EventToolArgsDelta, Step: step, Attempt: 1, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", ArgsDelta: delta}}
}

func Call(kind agent.EventKind, status, output string) agent.Event {
	e := Tool(kind, status)
	e.Tool.Output = output
	if kind == agent.EventToolStart || kind == agent.EventApprovalRequired {
		e.Tool.Args = json.RawMessage(`{"expression":"2+2"}`)
	}
	return e
}
