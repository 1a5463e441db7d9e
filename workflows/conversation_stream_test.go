package workflows

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/words"
)

const convID = "conv/t1/s1"

// newConversationEnv runs Conversations whose turns are real AgentTurns
// with the team's activities; each model call streams its reply's text
// to the turn and to the turn's notify workflow, as CallModel does.
func newConversationEnv(t *testing.T, tm *team) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newTeamEnv(t, tm)
	env.RegisterWorkflowWithOptions(Conversation, workflow.RegisterOptions{Name: contract.Conversation})
	env.SetStartWorkflowOptions(clientStartOptions(convID))
	tm.onModel = func(in contract.CallModelInput) {
		tm.mu.Lock()
		text := tm.replies[in.AgentID][0].Content
		tm.mu.Unlock()
		if text == "" {
			return
		}
		// The reply's first two words, in a batch each.
		words := strings.SplitAfter(text, " ")
		for k, w := range words[:min(2, len(words))] {
			i := in.FirstIndex + int64(k)
			b := agent.TokenBatch{StreamID: in.StreamID, Step: in.Seq, Attempt: 1, First: i,
				Events: []agent.Event{{StreamID: in.StreamID, Index: i, Kind: agent.EventToken, Text: w, Step: in.Seq, Attempt: 1}}}
			require.NoError(t, env.SignalWorkflowByID(in.StreamID, contract.SignalTokens, b))
			if in.Notify != "" {
				require.NoError(t, env.SignalWorkflowByID(in.Notify, contract.SignalNotifyTokens, b))
			}
		}
	}
	return env
}

// pollResult is what a poll came to.
type pollResult struct {
	completed bool
	rejected  error
	res       eventlog.PollResult
	err       error
}

func pollStream(env *testsuite.TestWorkflowEnvironment, in eventlog.PollInput) *pollResult {
	p := &pollResult{}
	env.UpdateWorkflow(contract.UpdateStreamPoll, "", &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { p.rejected = err },
		OnComplete: func(v any, err error) {
			p.completed, p.err = true, err
			if err == nil {
				p.res = v.(eventlog.PollResult)
			}
		},
	}, in)
	return p
}

// streamItem is an item as a subscriber reads it.
type streamItem struct {
	offset int64
	event  *agent.Event
	text   string
}

func readItems(t *testing.T, items []eventlog.WireItem) []streamItem {
	t.Helper()
	var out []streamItem
	for _, it := range items {
		b, err := base64.StdEncoding.DecodeString(it.Data)
		require.NoError(t, err)
		var p commonpb.Payload
		require.NoError(t, proto.Unmarshal(b, &p))
		s := streamItem{offset: it.Offset}
		switch it.Topic {
		case contract.StreamTopicEvents:
			s.event = &agent.Event{}
			require.NoError(t, converter.GetDefaultDataConverter().FromPayload(&p, s.event))
		case contract.StreamTopicText:
			require.NoError(t, converter.GetDefaultDataConverter().FromPayload(&p, &s.text))
		default:
			t.Fatalf("topic %q", it.Topic)
		}
		out = append(out, s)
	}
	return out
}

// describe is a compact form of a conversation's items: message frames,
// the answers' text, and the turns' tool calls and tokens.
func describe(items []streamItem) []string {
	var out []string
	for _, it := range items {
		switch e := it.event; {
		case e == nil:
			out = append(out, "text "+words.Clip(it.text, 12))
		case e.Message != nil:
			out = append(out, string(e.Kind)+" "+e.Message.ID+" "+e.Message.StreamID+" "+e.Message.Status)
		case e.Child != nil && (e.Kind == agent.EventToken || e.Kind == agent.EventToolStart || e.Kind == agent.EventToolEnd):
			out = append(out, e.Child.CallID+" "+string(e.Kind)+" "+e.Text)
		}
	}
	return out
}

// TestConversationStream: a Conversation's stream frames each message's
// turn with message_start and message_end, carries the turn's tool calls
// and tokens as child events and its answer on the text topic; before
// the conversation continues as new it answers the poll waiting, and its
// next run goes on at the same offsets and indices from the items it was
// handed, failing a poll from before them with TruncatedOffset.
func TestConversationStream(t *testing.T) {
	long := strings.Repeat("word ", 10_000) // past the carried budget
	tm := &team{
		agents: map[string]agent.Agent{"assistant": teamAgent("assistant", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60}, agent.Tool{Name: "calculator", Kind: "calculator"})},
		replies: map[string][]contract.CallModelResult{
			"assistant": {toolReply(calc("k1", "12.5 * 4")), textReply("It is 50."), textReply(long), textReply("Done again.")},
		},
	}
	in := agent.ConversationInput{TenantID: "t1", SessionID: "s1", AgentID: "assistant"}
	env := newConversationEnv(t, tm)
	var first, all, atEnd *pollResult
	env.RegisterDelayedCallback(func() {
		first = pollStream(env, eventlog.PollInput{Topics: []string{}})
		send(env, agent.SendMessage{Prompt: "What is 12.5 * 4?"})
	}, time.Second)
	env.RegisterDelayedCallback(func() { send(env, agent.SendMessage{Prompt: "Tell me a long story"}) }, 2*time.Second)
	env.RegisterDelayedCallback(func() { send(env, agent.SendMessage{Prompt: "Again"}) }, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		all = pollStream(env, eventlog.PollInput{Topics: []string{}})
		v, err := env.QueryWorkflow(contract.QueryStreamOffset)
		require.NoError(t, err)
		var end int64
		require.NoError(t, v.Get(&end))
		atEnd = pollStream(env, eventlog.PollInput{Topics: []string{}, FromOffset: end})
	}, 4*time.Second)
	env.RegisterDelayedCallback(func() {
		require.False(t, atEnd.completed, "nothing past the end yet")
		env.SetContinueAsNewSuggested(true)
	}, 5*time.Second)
	env.ExecuteWorkflow(contract.Conversation, in)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "%v", env.GetWorkflowError())
	var next agent.ConversationInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))

	for _, l := range tm.loads {
		require.Equal(t, convID, l.Request.Notify, "the conversation is its turns' notify workflow")
		require.True(t, l.Request.ForwardEvents, "and they forward it their events")
	}
	require.True(t, first.completed)
	require.NoError(t, first.err)
	require.Equal(t, []string{"message_start s1-1 turn/t1/s1-1 "}, describe(readItems(t, first.res.Items))[:1], "a poll from 0 waits for the first item")

	require.NoError(t, all.err)
	items := readItems(t, all.res.Items)
	index := int64(0)
	for i, it := range items {
		require.Equal(t, int64(i), it.offset, "offsets from 0, without gaps")
		if it.event != nil {
			index++
			require.Equal(t, index, it.event.Index, "indices from 1, without gaps")
			require.Equal(t, convID, it.event.StreamID)
			require.NoError(t, it.event.Validate())
			if c := it.event.Child; c != nil {
				require.Equal(t, contract.TurnWorkflowID("t1", c.CallID), c.StreamID, "a child event names its message and its turn")
			}
		}
	}
	require.Equal(t, []string{
		"message_start s1-1 turn/t1/s1-1 ",
		"s1-1 tool_start ", "s1-1 tool_end ", "s1-1 token It ", "s1-1 token is ",
		"text It is 50.",
		"message_end s1-1 turn/t1/s1-1 completed",
		"message_start s1-2 turn/t1/s1-2 ", "s1-2 token word ", "s1-2 token word ",
		"text " + words.Clip(long, 12),
		"message_end s1-2 turn/t1/s1-2 completed",
		"message_start s1-3 turn/t1/s1-3 ", "s1-3 token Done ", "s1-3 token again.",
		"text Done again.",
		"message_end s1-3 turn/t1/s1-3 completed",
	}, describe(items))

	end := int64(len(items))
	require.True(t, atEnd.completed, "the poll waiting is answered before the run continues as new")
	require.NoError(t, atEnd.err)
	require.Empty(t, atEnd.res.Items)
	require.Equal(t, end, atEnd.res.NextOffset)

	// The next run: the stream from the items handed on, and a message.
	carried := next.Carry.Stream
	require.NotNil(t, carried)
	require.Equal(t, 1, next.Carry.Runs)
	require.Equal(t, index+1, carried.NextIndex)
	require.Equal(t, end, carried.BaseOffset+int64(len(carried.Log)))
	require.Positive(t, carried.BaseOffset, "the long answer pushed the first messages out of what is carried")

	tm.replies["assistant"] = []contract.CallModelResult{textReply("Carried.")}
	env = newConversationEnv(t, tm)
	var fromEnd, rest, fromZero, truncated *pollResult
	env.RegisterDelayedCallback(func() {
		fromEnd = pollStream(env, eventlog.PollInput{Topics: []string{}, FromOffset: end})
		fromZero = pollStream(env, eventlog.PollInput{Topics: []string{}})
		truncated = pollStream(env, eventlog.PollInput{Topics: []string{}, FromOffset: carried.BaseOffset - 1})
		send(env, agent.SendMessage{Prompt: "After the roll-over"})
	}, time.Second)
	env.RegisterDelayedCallback(func() { rest = pollStream(env, eventlog.PollInput{Topics: []string{}, FromOffset: end + 1}) }, 2*time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, 3*time.Second)
	env.ExecuteWorkflow(contract.Conversation, next)

	require.NoError(t, fromEnd.err)
	got := readItems(t, fromEnd.res.Items)
	require.Equal(t, end, got[0].offset)
	require.Equal(t, index+1, got[0].event.Index)
	require.Equal(t, []string{"message_start s1-4 turn/t1/s1-4 "}, describe(got), "a poll from the previous run's end waits for the next item")
	require.NoError(t, rest.err)
	require.Equal(t, []string{"s1-4 token Carried.", "text Carried.", "message_end s1-4 turn/t1/s1-4 completed"}, describe(readItems(t, rest.res.Items)))

	require.NoError(t, fromZero.err)
	kept := readItems(t, fromZero.res.Items)
	require.Equal(t, carried.BaseOffset, kept[0].offset, "0 is the start of what was kept")
	require.Equal(t, items[carried.BaseOffset:], kept[:end-carried.BaseOffset], "the same items at the same offsets")

	var app *temporal.ApplicationError
	require.True(t, errors.As(truncated.err, &app), "%v", truncated.err)
	require.Equal(t, eventlog.ErrTypeTruncatedOffset, app.Type())
}

// TestForwardEventsOnlyToTheParent: a turn that asks to forward its
// events to a notify workflow that did not start it (a client's request,
// not a Conversation's turn) forwards nothing.
func TestForwardEventsOnlyToTheParent(t *testing.T) {
	tm := &team{
		agents:  map[string]agent.Agent{"assistant": teamAgent("assistant", agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60}, agent.Tool{Name: "calculator", Kind: "calculator"})},
		replies: map[string][]contract.CallModelResult{"assistant": {toolReply(calc("k1", "12.5 * 4")), textReply("It is 50.")}},
	}
	env := newTeamEnv(t, tm)
	var signalled []string
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_, workflowID, _, signal string, _ any) error {
			signalled = append(signalled, workflowID+" "+signal)
			return nil
		})
	req := request()
	req.AgentID = "assistant"
	req.Notify, req.ForwardEvents = "conv/t1/s1", true
	res, failure := runTurn(t, env, req)
	require.Nil(t, failure)
	require.Equal(t, "It is 50.", res.Output)
	require.Empty(t, signalled)
}
