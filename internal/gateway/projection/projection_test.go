package projection

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/gatewaytest"
)

// describe is items as one short line each, to compare.
func describe(items []Item) []string {
	out := []string{}
	for _, it := range items {
		switch it.Kind {
		case StepStart:
			out = append(out, "step-start")
		case StepEnd:
			out = append(out, "step-end "+it.FinishReason)
		case PartStart:
			out = append(out, "start "+it.PartID)
		case Delta:
			out = append(out, fmt.Sprintf("delta %s %q", it.PartID, it.Text))
		case PartEnd:
			out = append(out, "end "+it.PartID)
		case ToolOpen:
			out = append(out, "tool-open "+it.Tool.CallID)
		case ToolArgs:
			out = append(out, fmt.Sprintf("tool-args %s %q", it.Tool.CallID, it.Text))
		case ToolInput:
			out = append(out, fmt.Sprintf("tool-input %s streamed=%v", it.Tool.CallID, it.ArgsStreamed))
		case ToolStart:
			out = append(out, "tool-start "+it.Tool.CallID)
		case ToolResult:
			out = append(out, "tool-result "+it.Tool.CallID)
		case Reset:
			out = append(out, fmt.Sprintf("reset %d", it.VoidFrom))
		case Answer:
			out = append(out, "answer")
		case Steered:
			out = append(out, fmt.Sprintf("steered %s %q", it.Event.Message.ID, it.Text))
		case Usage:
			out = append(out, fmt.Sprintf("usage %d", it.Total.TotalTokens))
		case End:
			out = append(out, fmt.Sprintf("end-turn %s open=%v", it.Status, it.OpenCalls))
		case Status:
			// A status a door may note; these tests are of what a client shows.
		default:
			out = append(out, fmt.Sprintf("kind %d", it.Kind))
		}
	}
	return out
}

func projectAll(mode Mode, events []agent.Event) []Item {
	p := New(mode)
	var out []Item
	for _, e := range events {
		out = append(out, p.Add(e)...)
	}
	return out
}

// shown is what a client that renders items as the AI SDK 7's
// readUIMessageStream does shows at the end: the text of its streamed text
// parts (not the answer's content block),
// where a Reset drops every part since the step's start (reset-step) and
// a delta of a part never started, or dropped, is an error.
func shown(t *testing.T, items []Item) string {
	t.Helper()
	type part struct{ id, text string }
	var parts []part // "" ids are step starts
	open := map[string]int{}
	for _, it := range items {
		switch it.Kind {
		case StepStart:
			parts = append(parts, part{})
		case PartStart:
			require.NotContains(t, open, it.PartID, "a part started twice")
			open[it.PartID] = len(parts)
			parts = append(parts, part{id: it.PartID})
		case Delta:
			i, ok := open[it.PartID]
			require.True(t, ok, "a delta of %s, which is not open", it.PartID)
			if it.Part == Text && strings.HasPrefix(it.PartID, "text-") {
				parts[i].text += it.Text
			}
		case PartEnd:
			require.Contains(t, open, it.PartID, "an end of %s, which is not open", it.PartID)
			delete(open, it.PartID)
		case Reset:
			start := len(parts) - 1
			for start >= 0 && parts[start].id != "" {
				start--
			}
			parts = parts[:start+1]
			open = map[string]int{}
		}
	}
	var s strings.Builder
	for _, p := range parts {
		s.WriteString(p.text)
	}
	return s.String()
}

func retrying(voidFrom int64, attempt int) agent.Event {
	return agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: voidFrom, Attempt: attempt, Step: 1}
}

func stepStart(n int) agent.Event { return agent.Event{Kind: agent.EventStepStart, Step: n} }
func stepFinish(n int, reason string) agent.Event {
	return agent.Event{Kind: agent.EventStepFinish, Step: n, FinishReason: reason}
}

// TestLive: Live gives each delta as it is logged, and a retried model
// call as a Reset that takes back what the step showed, after which the
// retry streams again; what a client shows at the end is the log's text
// (agent.ReplayText).
func TestLive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []agent.Event
		want   []string
	}{{
		name: "every delta as it is logged, a part per kind in turn",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), stepStart(1), gatewaytest.Reasoning(1, "Think"), gatewaytest.Reasoning(1, "ing."),
			gatewaytest.Token(1, 1, "Once"), gatewaytest.Token(1, 1, " upon"), gatewaytest.Token(1, 1, " a time."), gatewaytest.Usage(1, 1, 1),
			stepFinish(1, agent.FinishStop), gatewaytest.Content("Once upon a time."), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{"step-start", "start reasoning-3", `delta reasoning-3 "Think"`, `delta reasoning-3 "ing."`, "end reasoning-3",
			"start text-5", `delta text-5 "Once"`, `delta text-5 " upon"`, `delta text-5 " a time."`, "usage 2",
			"end text-5", "step-end stop", "answer", "end-turn COMPLETED open=[]"},
	}, {
		name: "a retry takes back the open part with no end of it, and no step start follows",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Reasoning(1, "Hmm."), gatewaytest.Token(1, 1, "Once"), gatewaytest.Token(1, 1, " up"),
			retrying(2, 2), gatewaytest.Token(1, 2, "Once"), gatewaytest.Token(1, 2, " upon a time."), gatewaytest.Usage(1, 1, 1),
			stepFinish(1, agent.FinishStop), gatewaytest.Content("Once upon a time."), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{"step-start", "start reasoning-2", `delta reasoning-2 "Hmm."`, "end reasoning-2", "start text-3", `delta text-3 "Once"`, `delta text-3 " up"`,
			"reset 2", "start text-6", `delta text-6 "Once"`, `delta text-6 " upon a time."`, "usage 2", "end text-6", "step-end stop",
			"answer", "end-turn COMPLETED open=[]"},
	}, {
		name: "a retry takes back a call's streamed arguments: the retry announces it again",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Token(1, 1, "Let me add."), gatewaytest.Args(1, ""), gatewaytest.Args(1, `{"expr`),
			retrying(2, 2), gatewaytest.Args(1, ""), gatewaytest.Args(1, `{"expression":"2+2"}`), gatewaytest.Usage(1, 1, 1),
			gatewaytest.Call(agent.EventToolStart, "", ""), gatewaytest.Call(agent.EventToolEnd, agent.ToolOK, "4"), stepFinish(1, agent.FinishToolCalls)),
		want: []string{"step-start", "start text-2", `delta text-2 "Let me add."`, "end text-2", "tool-open call_1", `tool-args call_1 "{\"expr"`,
			"reset 2", "tool-open call_1", `tool-args call_1 "{\"expression\":\"2+2\"}"`, "usage 2",
			"tool-input call_1 streamed=true", "tool-start call_1", "tool-result call_1", "step-end tool_calls"},
	}, {
		name: "a call the retry does not make again is open at the end no more",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Args(1, ""), retrying(2, 2), gatewaytest.Token(1, 2, "No tools."), gatewaytest.Usage(1, 1, 1),
			stepFinish(1, agent.FinishStop), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{"step-start", "tool-open call_1", "reset 2", "start text-4", `delta text-4 "No tools."`, "usage 2", "end text-4", "step-end stop",
			"end-turn COMPLETED open=[]"},
	}, {
		name: "what the step holds before the voided attempts is given again after the reset",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Reasoning(1, "Kept."), gatewaytest.Token(1, 1, "Void"), retrying(3, 2),
			gatewaytest.Token(1, 2, "Again."), gatewaytest.Usage(1, 1, 1), stepFinish(1, agent.FinishStop)),
		want: []string{"step-start", "start reasoning-2", `delta reasoning-2 "Kept."`, "end reasoning-2", "start text-3", `delta text-3 "Void"`,
			"reset 3", "start reasoning-2", `delta reasoning-2 "Kept."`, "end reasoning-2", "start text-5", `delta text-5 "Again."`, "usage 2",
			"end text-5", "step-end stop"},
	}, {
		name: "two retries of one call",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Token(1, 1, "A"), retrying(2, 2), gatewaytest.Token(1, 2, "B"), retrying(2, 3),
			gatewaytest.Token(1, 3, "C"), gatewaytest.Usage(1, 1, 1), stepFinish(1, agent.FinishStop)),
		want: []string{"step-start", "start text-2", `delta text-2 "A"`, "reset 2", "start text-4", `delta text-4 "B"`, "reset 2",
			"start text-6", `delta text-6 "C"`, "usage 2", "end text-6", "step-end stop"},
	}, {
		name: "a retry that streamed nothing more: the answer comes with its content",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Token(1, 1, "Half"), retrying(2, 2), gatewaytest.Usage(1, 1, 1),
			stepFinish(1, agent.FinishStop), gatewaytest.Content("Whole."), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{"step-start", "start text-2", `delta text-2 "Half"`, "reset 2", "usage 2", "step-end stop",
			"start content-6", `delta content-6 "Whole."`, "answer", "end content-6", "end-turn COMPLETED open=[]"},
	}, {
		name: "a RETRYING status that voids nothing is no reset",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Token(1, 1, "Kept"), agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, Attempt: 2},
			gatewaytest.Token(1, 2, " too."), gatewaytest.Usage(1, 1, 1), stepFinish(1, agent.FinishStop)),
		want: []string{"step-start", "start text-2", `delta text-2 "Kept"`, `delta text-2 " too."`, "usage 2", "end text-2", "step-end stop"},
	}, {
		name: "a retry in the second step takes back that step's parts only",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Token(1, 1, "First."), gatewaytest.Usage(1, 1, 1), stepFinish(1, agent.FinishStop),
			stepStart(2), gatewaytest.Token(2, 1, "Sec"), agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 6, Attempt: 2, Step: 2},
			gatewaytest.Token(2, 2, "Second."), gatewaytest.Usage(2, 1, 1), stepFinish(2, agent.FinishStop)),
		want: []string{"step-start", "start text-2", `delta text-2 "First."`, "usage 2", "end text-2", "step-end stop",
			"step-start", "start text-6", `delta text-6 "Sec"`, "reset 6", "start text-8", `delta text-8 "Second."`, "usage 4", "end text-8", "step-end stop"},
	}, {
		name: "deltas of a log without step events are given in a step, which the call's answer ends",
		events: gatewaytest.Log(gatewaytest.Token(1, 1, "Let me add."), gatewaytest.Usage(1, 1, 1), gatewaytest.Call(agent.EventToolStart, "", ""),
			gatewaytest.Call(agent.EventToolEnd, agent.ToolOK, "4"), gatewaytest.Token(2, 1, "It is"), retrying(5, 2), gatewaytest.Token(2, 2, "It is 4."),
			gatewaytest.Usage(2, 1, 1)),
		want: []string{"step-start", "start text-1", `delta text-1 "Let me add."`, "usage 2", "end text-1", "tool-open call_1",
			"tool-input call_1 streamed=false", "tool-start call_1", "tool-result call_1", "step-start", "start text-5", `delta text-5 "It is"`, "reset 5",
			"start text-7", `delta text-7 "It is 4."`, "usage 4"},
	}, {
		name: "a call of an earlier step that never got its input stays open through a retry",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Args(1, `{"x`), gatewaytest.Usage(1, 1, 1), stepFinish(1, agent.FinishToolCalls),
			stepStart(2), gatewaytest.Token(2, 1, "Hm"), agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 6, Attempt: 2, Step: 2},
			gatewaytest.Token(2, 2, "Done."), gatewaytest.Usage(2, 1, 1), stepFinish(2, agent.FinishStop), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{"step-start", "tool-open call_1", `tool-args call_1 "{\"x"`, "usage 2", "step-end tool_calls",
			"step-start", "start text-6", `delta text-6 "Hm"`, "reset 6", "start text-8", `delta text-8 "Done."`, "usage 4", "end text-8", "step-end stop",
			"end-turn COMPLETED open=[call_1]"},
	}, {
		name: "a message steered in between steps",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Token(1, 1, "Once."), gatewaytest.Usage(1, 1, 1), stepFinish(1, agent.FinishStop),
			agent.Event{Kind: agent.EventSteered, Message: &agent.MessageEvent{ID: "c1-2"}, Text: "make it about a cat"},
			stepStart(3), gatewaytest.Token(3, 1, "A cat."), gatewaytest.Usage(3, 1, 1), stepFinish(3, agent.FinishStop)),
		want: []string{"step-start", "start text-2", `delta text-2 "Once."`, "usage 2", "end text-2", "step-end stop",
			`steered c1-2 "make it about a cat"`, "step-start", "start text-7", `delta text-7 "A cat."`, "usage 4", "end text-7", "step-end stop"},
	}, {
		name: "a child's events, its retries too, are not the turn's",
		events: gatewaytest.Log(stepStart(1), gatewaytest.Token(1, 1, "Mine."),
			agent.Event{Kind: agent.EventToken, Text: "theirs", Child: &agent.ChildEvent{CallID: "call_2", StreamID: "turn/demo/c", Index: 1}},
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 1, Child: &agent.ChildEvent{CallID: "call_2", StreamID: "turn/demo/c", Index: 2}},
			gatewaytest.Usage(1, 1, 1)),
		want: []string{"step-start", "start text-2", `delta text-2 "Mine."`, "usage 2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			items := projectAll(Live, tc.events)
			require.Equal(t, tc.want, describe(items))
			require.Equal(t, agent.ReplayText(tc.events), shown(t, items), "what the client shows is the log's text")
		})
	}
}

// TestLiveAndHeld: over the same logs, a client of either mode shows the
// log's text; Held never takes anything back and gives a model call's
// text once it has answered, Live as it is logged.
func TestLiveAndHeld(t *testing.T) {
	log := gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), stepStart(1), gatewaytest.Token(1, 1, "Once"), gatewaytest.Token(1, 1, " up"),
		retrying(3, 2), gatewaytest.Token(1, 2, "Once"), gatewaytest.Token(1, 2, " upon a time."), gatewaytest.Usage(1, 1, 1), stepFinish(1, agent.FinishStop))
	held := projectAll(Held, log)
	require.Equal(t, []string{"step-start", "start text-6", `delta text-6 "Once"`, `delta text-6 " upon a time."`, "usage 2", "end text-6", "step-end stop"},
		describe(held))
	live := projectAll(Live, log)
	require.Contains(t, describe(live), "reset 3")
	require.Equal(t, agent.ReplayText(log), shown(t, held))
	require.Equal(t, agent.ReplayText(log), shown(t, live))

	// Held gives nothing of a call before it answers; Live gives each delta.
	p := New(Held)
	require.Empty(t, p.Add(log[2]))
	p = New(Live)
	p.Add(log[1])
	require.Equal(t, []string{"start text-3", `delta text-3 "Once"`}, describe(p.Add(log[2])))
}

// TestLiveFlush: a Live projection paused (Flush) closes the open part.
func TestLiveFlush(t *testing.T) {
	p := New(Live)
	for _, e := range gatewaytest.Log(stepStart(1), gatewaytest.Token(1, 1, "Checking.")) {
		p.Add(e)
	}
	require.Equal(t, []string{"end text-2"}, describe(p.Flush()))
	require.Empty(t, p.Flush())
}

// FuzzProjection: whatever the log (steps whose model call streams text,
// reasoning and arguments, is retried from any index of its step, and
// answers), a client of either mode that renders the items as the AI
// SDK 7's client does (shown) never gets a delta of a part that is not
// open, nor starts a part twice, and shows, once the last call has
// answered, the log's text, agent.ReplayText.
func FuzzProjection(f *testing.F) {
	f.Add([]byte{1, 1, 4, 0, 1, 5})
	f.Add([]byte{2, 1, 3, 4, 2, 1, 3, 5, 0, 1, 4, 9, 1, 5, 6})
	f.Add([]byte{1, 4, 0, 4, 0, 1, 5, 7, 0, 2, 1, 5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		events := fuzzLog(ops)
		for _, mode := range []Mode{Held, Live} {
			require.Equal(t, agent.ReplayText(events), shown(t, projectAll(mode, events)), "mode %d, log %v", mode, events)
		}
	})
}

// fuzzLog is a well-formed log that ops describe: each op adds an event
// where the log can have one.
func fuzzLog(ops []byte) []agent.Event {
	var events []agent.Event
	step, attempt := 0, 1
	var first int64 // the index of the step's model call's first event; 0: no call runs
	add := func(e agent.Event) {
		e.StreamID, e.Index = "turn/demo/j1", int64(len(events)+1)
		events = append(events, e)
	}
	for i := 0; i < len(ops); i++ {
		op := ops[i] % 8
		if step == 0 && op != 0 && op != 7 {
			op = 0 // a model call streams in a step
		}
		switch op {
		case 0: // a step begins (the last one ended)
			if step > 0 {
				add(agent.Event{Kind: agent.EventStepFinish, Step: step, FinishReason: agent.FinishStop})
			}
			step++
			attempt, first = 1, 0
			add(stepStart(step))
			first = int64(len(events) + 1)
		case 1, 2, 3: // the call streams
			if first == 0 {
				continue // the call has answered
			}
			e := agent.Event{Step: step, Attempt: attempt, Text: fmt.Sprintf("%c%d ", "trq"[op-1], i)}
			switch op {
			case 1:
				e.Kind = agent.EventToken
			case 2:
				e.Kind = agent.EventReasoning
			case 3:
				e.Kind, e.Text = agent.EventToolArgsDelta, ""
				e.Tool = &agent.ToolEvent{CallID: fmt.Sprintf("call_%d", i%3), Name: "calculator", ArgsDelta: `{"x":1}`}
			}
			add(e)
		case 4: // the call is retried, void from its first index or a later one
			if first == 0 || int64(len(events)+1) == first {
				continue // nothing streamed to void
			}
			from := first
			if i+1 < len(ops) {
				i++
				from += int64(ops[i]) % (int64(len(events)+1) - first)
			}
			attempt++
			add(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: from, Attempt: attempt, Step: step})
		case 5: // the call answers
			if first == 0 {
				continue
			}
			add(gatewaytest.Usage(step, 1, 1))
			first = 0
		case 6: // a tool call of the step's runs
			if first != 0 {
				continue
			}
			add(gatewaytest.Call(agent.EventToolStart, "", ""))
			add(gatewaytest.Call(agent.EventToolEnd, agent.ToolOK, "4"))
		case 7: // a message steered in, between steps
			if first != 0 {
				continue
			}
			add(agent.Event{Kind: agent.EventSteered, Message: &agent.MessageEvent{ID: "c1-2"}, Text: "and a cat"})
		}
	}
	if first != 0 {
		add(gatewaytest.Usage(step, 1, 1)) // Held gives a call's text once it has answered
	}
	return events
}
