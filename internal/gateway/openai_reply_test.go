package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// replyLog builds a turn's log: indices in order from 1.
func replyLog(events ...agent.Event) []agent.Event {
	for i := range events {
		events[i].StreamID, events[i].Index = "turn/demo/j1", int64(i+1)
	}
	return events
}

func evStatus(s string) agent.Event { return agent.Event{Kind: agent.EventStatus, Status: s} }
func evToken(step, attempt int, text string) agent.Event {
	return agent.Event{Kind: agent.EventToken, Step: step, Attempt: attempt, Text: text}
}
func evReasoning(step int, text string) agent.Event {
	return agent.Event{Kind: agent.EventReasoning, Step: step, Attempt: 1, Text: text}
}
func evUsage(step, prompt, completion int) agent.Event {
	return agent.Event{Kind: agent.EventUsage, Step: step, Usage: &agent.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}}
}
func evContent(text string) agent.Event {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	return agent.Event{Kind: agent.EventContent, Content: b}
}
func evTool(kind agent.EventKind, status string) agent.Event {
	return agent.Event{Kind: kind, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", Status: status}}
}

// TestChatReply: what a client of the OpenAI-compatible endpoint reads of
// a turn's log.
func TestChatReply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []agent.Event
		want   []chatDelta
		finish string
		usage  agent.Usage
		failed string // the failure's type
	}{{
		name: "an answer, its reasoning first",
		events: replyLog(evStatus(agent.StreamRunning), agent.Event{Kind: agent.EventStepStart, Step: 1}, evReasoning(1, "Think"), evReasoning(1, "ing."),
			evToken(1, 1, "Hello"), evToken(1, 1, " there."), evUsage(1, 10, 5), evContent("Hello there."), evStatus(agent.StreamCompleted)),
		want:   []chatDelta{{Reasoning: "Thinking."}, {Content: "Hello there."}},
		finish: "stop", usage: agent.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
	}, {
		name: "a retried call: the voided text never, the retry's once",
		events: replyLog(evStatus(agent.StreamRunning), evReasoning(1, "Hm."), evToken(1, 1, "Once"), evToken(1, 1, " upon"),
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2, Attempt: 2},
			agent.Event{Kind: agent.EventReasoning, Step: 1, Attempt: 2, Text: "Hm."}, evToken(1, 2, "Once"), evToken(1, 2, " upon a time."),
			evUsage(1, 10, 5), evContent("Once upon a time."), evStatus(agent.StreamCompleted)),
		want:   []chatDelta{{Note: "retrying the model call (attempt 2)"}, {Reasoning: "Hm."}, {Content: "Once upon a time."}},
		finish: "stop", usage: agent.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
	}, {
		name: "a tool call: the text before it is not the answer",
		events: replyLog(evStatus(agent.StreamRunning), evToken(1, 1, "Let me add."), evUsage(1, 10, 5), evTool(agent.EventToolStart, ""),
			evTool(agent.EventToolEnd, "ok"), agent.Event{Kind: agent.EventStepFinish, Step: 1, FinishReason: agent.FinishToolCalls},
			evToken(3, 1, "2+2 = 4"), evUsage(3, 20, 5), agent.Event{Kind: agent.EventStepFinish, Step: 3, FinishReason: agent.FinishLength},
			evContent("2+2 = 4"), evStatus(agent.StreamCompleted)),
		want: []chatDelta{{Note: "tool calculator (call call_1) started"}, {Note: "tool calculator (call call_1) ended ok"},
			{Content: "2+2 = 4"}},
		finish: "length", usage: agent.Usage{PromptTokens: 30, CompletionTokens: 10, TotalTokens: 40},
	}, {
		name: "a repaired answer: the one that did not match the output schema is not the answer",
		events: replyLog(evStatus(agent.StreamRunning), agent.Event{Kind: agent.EventStepStart, Step: 1}, evToken(1, 1, `{"n": 0}`), evUsage(1, 10, 5),
			agent.Event{Kind: agent.EventStepFinish, Step: 1, FinishReason: agent.FinishStop},
			agent.Event{Kind: agent.EventStepStart, Step: 3}, evToken(3, 1, `{"n": 1}`), evUsage(3, 20, 5),
			agent.Event{Kind: agent.EventStepFinish, Step: 3, FinishReason: agent.FinishStop},
			evContent(`{"n": 1}`), evStatus(agent.StreamCompleted)),
		want:   []chatDelta{{Content: `{"n": 1}`}},
		finish: "stop", usage: agent.Usage{PromptTokens: 30, CompletionTokens: 10, TotalTokens: 40},
	}, {
		name:   "a turn that streams no tokens answers with its content",
		events: replyLog(evStatus(agent.StreamRunning), evUsage(1, 3, 2), evContent("Plain."), evStatus(agent.StreamCompleted)),
		want:   []chatDelta{{Content: "Plain."}},
		finish: "stop", usage: agent.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5},
	}, {
		name: "a child turn's events are not this turn's",
		events: replyLog(evStatus(agent.StreamRunning), evUsage(1, 1, 1), evTool(agent.EventToolStart, ""),
			agent.Event{Kind: agent.EventToken, Text: "child text", Child: &agent.ChildEvent{CallID: "call_1", StreamID: "turn/demo/c", Index: 3}},
			agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{TotalTokens: 99}, Child: &agent.ChildEvent{CallID: "call_1", StreamID: "turn/demo/c", Index: 4}},
			evTool(agent.EventToolEnd, "ok"), evToken(3, 1, "Done."), evUsage(3, 1, 1), evContent("Done."), evStatus(agent.StreamCompleted)),
		want:   []chatDelta{{Note: "tool calculator (call call_1) started"}, {Note: "tool calculator (call call_1) ended ok"}, {Content: "Done."}},
		finish: "stop", usage: agent.Usage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4},
	}, {
		name: "a failed turn",
		events: replyLog(evStatus(agent.StreamRunning), evToken(1, 1, "Par"),
			agent.Event{Kind: agent.EventError, Error: &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: "the model failed"}},
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: "the model failed"}}),
		failed: agent.ErrTypeModelFailed, finish: "stop",
	}, {
		name:   "a canceled turn without an error",
		events: replyLog(evStatus(agent.StreamRunning), evStatus(agent.StreamCanceled)),
		failed: agent.ErrTypeInternal, finish: "stop",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var c chatReply
			var got []chatDelta
			for _, e := range tc.events {
				got = append(got, c.add(e)...)
			}
			require.True(t, c.done)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.finish, c.finishReason())
			require.Equal(t, tc.usage, c.usage)
			if tc.failed != "" {
				require.NotNil(t, c.failure)
				require.Equal(t, tc.failed, c.failure.Type)
				return
			}
			require.Nil(t, c.failure)
			var answer string
			for _, d := range got {
				answer += d.Content
			}
			require.Equal(t, answer, c.content.String(), "a reply in one piece is what a stream releases")
		})
	}
}

// TestChatReplyMatchesReplayText: whatever a RETRYING voids, the answer
// of a one-call turn is what agent.ReplayText makes of its log.
func TestChatReplyMatchesReplayText(t *testing.T) {
	log := replyLog(evStatus(agent.StreamRunning), evToken(1, 1, "a"), evToken(1, 1, "b"),
		agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 3, Attempt: 2}, evToken(1, 2, "c"),
		agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2, Attempt: 3}, evToken(1, 3, "x"), evToken(1, 3, "y"),
		evUsage(1, 1, 1), evContent("xy"), evStatus(agent.StreamCompleted))
	var c chatReply
	for _, e := range log {
		c.add(e)
	}
	require.Equal(t, agent.ReplayText(log), c.content.String())
	require.Equal(t, "xy", c.content.String())
}
