package openai

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/gatewaytest"
)

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
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), agent.Event{Kind: agent.EventStepStart, Step: 1}, gatewaytest.Reasoning(1, "Think"), gatewaytest.Reasoning(1, "ing."),
			gatewaytest.Token(1, 1, "Hello"), gatewaytest.Token(1, 1, " there."), gatewaytest.Usage(1, 10, 5), gatewaytest.Content("Hello there."), gatewaytest.Status(agent.StreamCompleted)),
		want:   []chatDelta{{Reasoning: "Thinking."}, {Content: "Hello there."}},
		finish: "stop", usage: agent.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
	}, {
		name: "a retried call: the voided text never, the retry's once",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Reasoning(1, "Hm."), gatewaytest.Token(1, 1, "Once"), gatewaytest.Token(1, 1, " upon"),
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2, Attempt: 2},
			agent.Event{Kind: agent.EventReasoning, Step: 1, Attempt: 2, Text: "Hm."}, gatewaytest.Token(1, 2, "Once"), gatewaytest.Token(1, 2, " upon a time."),
			gatewaytest.Usage(1, 10, 5), gatewaytest.Content("Once upon a time."), gatewaytest.Status(agent.StreamCompleted)),
		want:   []chatDelta{{Note: "retrying the model call (attempt 2)"}, {Reasoning: "Hm."}, {Content: "Once upon a time."}},
		finish: "stop", usage: agent.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
	}, {
		name: "a tool call: the text before it is not the answer",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Token(1, 1, "Let me add."), gatewaytest.Usage(1, 10, 5), gatewaytest.Tool(agent.EventToolStart, ""),
			gatewaytest.Tool(agent.EventToolEnd, "ok"), agent.Event{Kind: agent.EventStepFinish, Step: 1, FinishReason: agent.FinishToolCalls},
			gatewaytest.Token(3, 1, "2+2 = 4"), gatewaytest.Usage(3, 20, 5), agent.Event{Kind: agent.EventStepFinish, Step: 3, FinishReason: agent.FinishLength},
			gatewaytest.Content("2+2 = 4"), gatewaytest.Status(agent.StreamCompleted)),
		want: []chatDelta{{Note: "tool calculator (call call_1) started"}, {Note: "tool calculator (call call_1) ended ok"},
			{Content: "2+2 = 4"}},
		finish: "length", usage: agent.Usage{PromptTokens: 30, CompletionTokens: 10, TotalTokens: 40},
	}, {
		name: "a repaired answer: the one that did not match the output schema is not the answer",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), agent.Event{Kind: agent.EventStepStart, Step: 1}, gatewaytest.Token(1, 1, `{"n": 0}`), gatewaytest.Usage(1, 10, 5),
			agent.Event{Kind: agent.EventStepFinish, Step: 1, FinishReason: agent.FinishStop},
			agent.Event{Kind: agent.EventStepStart, Step: 3}, gatewaytest.Token(3, 1, `{"n": 1}`), gatewaytest.Usage(3, 20, 5),
			agent.Event{Kind: agent.EventStepFinish, Step: 3, FinishReason: agent.FinishStop},
			gatewaytest.Content(`{"n": 1}`), gatewaytest.Status(agent.StreamCompleted)),
		want:   []chatDelta{{Content: `{"n": 1}`}},
		finish: "stop", usage: agent.Usage{PromptTokens: 30, CompletionTokens: 10, TotalTokens: 40},
	}, {
		name:   "a turn that streams no tokens answers with its content",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Usage(1, 3, 2), gatewaytest.Content("Plain."), gatewaytest.Status(agent.StreamCompleted)),
		want:   []chatDelta{{Content: "Plain."}},
		finish: "stop", usage: agent.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5},
	}, {
		name: "a child turn's events are not this turn's",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Usage(1, 1, 1), gatewaytest.Tool(agent.EventToolStart, ""),
			agent.Event{Kind: agent.EventToken, Text: "child text", Child: &agent.ChildEvent{CallID: "call_1", StreamID: "turn/demo/c", Index: 3}},
			agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{TotalTokens: 99}, Child: &agent.ChildEvent{CallID: "call_1", StreamID: "turn/demo/c", Index: 4}},
			gatewaytest.Tool(agent.EventToolEnd, "ok"), gatewaytest.Token(3, 1, "Done."), gatewaytest.Usage(3, 1, 1), gatewaytest.Content("Done."), gatewaytest.Status(agent.StreamCompleted)),
		want:   []chatDelta{{Note: "tool calculator (call call_1) started"}, {Note: "tool calculator (call call_1) ended ok"}, {Content: "Done."}},
		finish: "stop", usage: agent.Usage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4},
	}, {
		name: "a failed turn",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Token(1, 1, "Par"),
			agent.Event{Kind: agent.EventError, Error: &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: "the model failed"}},
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: "the model failed"}}),
		failed: agent.ErrTypeModelFailed, finish: "stop",
	}, {
		name:   "a canceled turn without an error",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Status(agent.StreamCanceled)),
		failed: agent.ErrTypeInternal, finish: "stop",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var c chatReply
			var got []chatDelta
			for _, e := range tc.events {
				for _, d := range c.add(e) {
					if d.Tool != nil {
						require.Equal(t, d.Tool.Event.Index, e.Index, "a tool's note carries the item of its event")
						d.Tool = nil
					}
					got = append(got, d)
				}
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
	log := gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Token(1, 1, "a"), gatewaytest.Token(1, 1, "b"),
		agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 3, Attempt: 2}, gatewaytest.Token(1, 2, "c"),
		agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2, Attempt: 3}, gatewaytest.Token(1, 3, "x"), gatewaytest.Token(1, 3, "y"),
		gatewaytest.Usage(1, 1, 1), gatewaytest.Content("xy"), gatewaytest.Status(agent.StreamCompleted))
	var c chatReply
	for _, e := range log {
		c.add(e)
	}
	require.Equal(t, agent.ReplayText(log), c.content.String())
	require.Equal(t, "xy", c.content.String())
}
