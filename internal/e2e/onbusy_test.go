package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// busyConversation is a conversation whose first message, a story, is
// streaming.
type busyConversation struct {
	e     *env
	t     *testing.T
	ctx   context.Context
	in    agent.ConversationInput
	story agent.SendMessageResult
}

// startBusy starts a conversation and returns once its first turn, the
// story, has streamed a few words.
func startBusy(t *testing.T, e *env, ctx context.Context, in agent.ConversationInput) *busyConversation {
	t.Helper()
	if in.TenantID == "" {
		in.TenantID = "demo"
	}
	in.SessionID = "busy-" + testserver.RandomID()
	story, err := turnclient.SendMessage(ctx, e.Client(), e.TaskQueue, in, agent.SendMessage{Prompt: "tell a story"})
	require.NoError(t, err)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var live []agent.Event
	errEnough := errors.New("enough")
	err = e.Follower().Follow(fctx, story.TurnWorkflowID, 0, func(ev agent.Event) error {
		if live = append(live, ev); countTokens(live) >= 3 {
			return errEnough
		}
		return nil
	})
	require.ErrorIs(t, err, errEnough, "the story streams")
	return &busyConversation{e: e, t: t, ctx: ctx, in: in, story: story}
}

func (b *busyConversation) send(m agent.SendMessage) (agent.SendMessageResult, error) {
	return turnclient.SendMessage(b.ctx, b.e.Client(), b.e.TaskQueue, b.in, m)
}

func (b *busyConversation) result(turnID string) agent.TurnResult {
	b.t.Helper()
	res, err := turnclient.Result(b.ctx, b.e.Client().GetWorkflow(b.ctx, turnID, ""))
	require.NoError(b.t, err)
	return res
}

// transcript is the session's stored messages, as "role: text".
func (b *busyConversation) transcript() []string {
	b.t.Helper()
	msgs, err := b.e.Store().SessionMessages(b.ctx, b.in.TenantID, b.in.SessionID, 0)
	require.NoError(b.t, err)
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+": "+m.Content)
	}
	return out
}

// sentToModel is what the model was sent for the last call whose last
// message was prompt, as "role: text".
func (b *busyConversation) sentToModel(prompt string) []string {
	var sent []string
	for _, r := range b.e.Model.Requests() {
		if len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Content == prompt {
			sent = sent[:0]
			for _, m := range r.Messages {
				sent = append(sent, m.Role+": "+m.Content)
			}
		}
	}
	return sent
}

// messageEvents are the message_start and message_end events of the
// conversation's stream until the message_end of lastJob.
func (b *busyConversation) messageEvents(lastJob string) []agent.MessageEvent {
	b.t.Helper()
	got, err := wsFollow(b.ctx, b.e.Client(), contract.ConversationWorkflowID(b.in.TenantID, b.in.SessionID), nil, 0, untilMessageEnd(lastJob))
	require.NoError(b.t, err)
	var out []agent.MessageEvent
	for _, it := range got.items {
		var e agent.Event
		if it.Topic == "events" && json.Unmarshal(it.Payload.GetData(), &e) == nil && e.Message != nil && e.Child == nil {
			out = append(out, *e.Message)
		}
	}
	return out
}

// TestConversationOnBusy: what a message that arrives while a turn runs
// does, by its on_busy policy (or the conversation's): reject refuses it
// and loses nothing, a full queue refuses the next one, interrupt stops
// the running turn keeping its partial answer in the transcript and
// answers the message next, rollback stops it and leaves it out of the
// transcript. The conversation's stream says what each message did.
func TestConversationOnBusy(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const question = "what is 2+2?"

	t.Run("reject", func(t *testing.T) {
		b := startBusy(t, e, ctx, agent.ConversationInput{})
		_, err := b.send(agent.SendMessage{Prompt: question, OnBusy: agent.OnBusyReject})
		require.Equal(t, agent.CodeConflict, agent.ErrorCode(err), "error: %v", err)
		require.ErrorContains(t, err, `asks to be refused while a turn runs (on_busy "reject")`)
		require.Equal(t, storyText, b.result(b.story.TurnWorkflowID).Output, "the story goes on")

		// Once the conversation has seen the turn end, the message is
		// taken.
		var sent agent.SendMessageResult
		require.Eventually(t, func() bool {
			sent, err = b.send(agent.SendMessage{Prompt: question, OnBusy: agent.OnBusyReject})
			return err == nil
		}, 30*time.Second, 20*time.Millisecond, "the message is taken once the turn has ended: %v", err)
		require.Equal(t, "The result is 4.", b.result(sent.TurnWorkflowID).Output)
		require.Equal(t, []string{"user: tell a story", "assistant: " + storyText, "user: " + question, "assistant: The result is 4."},
			b.transcript())
	})

	t.Run("a full queue", func(t *testing.T) {
		b := startBusy(t, e, ctx, agent.ConversationInput{MaxPending: 1})
		queued := make(chan error, 1)
		go func() {
			_, err := b.send(agent.SendMessage{Prompt: "what is 1+1?"})
			queued <- err
		}()
		convID := contract.ConversationWorkflowID(b.in.TenantID, b.in.SessionID)
		require.Eventually(t, func() bool {
			tr, err := turnclient.Transcript(ctx, e.Client(), convID)
			return err == nil && len(tr.Pending) == 1
		}, 30*time.Second, 20*time.Millisecond, "one message waits")
		_, err := b.send(agent.SendMessage{Prompt: question})
		require.Equal(t, agent.CodeRateLimited, agent.ErrorCode(err), "error: %v", err)
		require.ErrorContains(t, err, "its limit (max_pending)")
		require.NoError(t, <-queued, "the queued message is answered")
	})

	t.Run("interrupt", func(t *testing.T) {
		b := startBusy(t, e, ctx, agent.ConversationInput{OnBusy: agent.OnBusyInterrupt})
		sent, err := b.send(agent.SendMessage{Prompt: question})
		require.NoError(t, err)
		story := b.result(b.story.TurnWorkflowID)
		require.Equal(t, agent.StatusCanceled, story.Status)
		require.True(t, story.Partial)
		require.True(t, strings.HasPrefix(storyText, story.Output) && len(story.Output) < len(storyText), "partial: %q", story.Output)
		require.Equal(t, "The result is 4.", b.result(sent.TurnWorkflowID).Output)

		require.Equal(t, []string{"user: tell a story", "assistant: " + story.Output, "user: " + question, "assistant: The result is 4."},
			b.transcript())
		require.Equal(t, []string{
			"system: Use the calculator for arithmetic.",
			"user: tell a story", "assistant: " + story.Output + agent.InterruptedNote,
			"user: " + question,
		}, b.sentToModel(question), "the model reads the partial answer as cut short")
		require.Equal(t, []agent.MessageEvent{
			{ID: b.story.JobID, StreamID: b.story.TurnWorkflowID},
			{ID: b.story.JobID, StreamID: b.story.TurnWorkflowID, Status: agent.StatusCanceled, OnBusy: agent.OnBusyInterrupt},
			{ID: sent.JobID, StreamID: sent.TurnWorkflowID, OnBusy: agent.OnBusyInterrupt},
			{ID: sent.JobID, StreamID: sent.TurnWorkflowID, Status: agent.StatusCompleted},
		}, b.messageEvents(sent.JobID))
		e.replay(contract.ConversationWorkflowID(b.in.TenantID, b.in.SessionID), "conversation_interrupted")
	})

	t.Run("interrupt at the boundary", func(t *testing.T) {
		b := startBusy(t, e, ctx, agent.ConversationInput{})
		sent, err := b.send(agent.SendMessage{Prompt: question, OnBusy: agent.OnBusyInterrupt, StopAt: agent.StopAtBoundary})
		require.NoError(t, err)
		// The model call in flight finishes, and with it the turn: its
		// answer was complete before the next boundary.
		story := b.result(b.story.TurnWorkflowID)
		require.Equal(t, agent.StatusCompleted, story.Status)
		require.Equal(t, storyText, story.Output)
		require.Equal(t, "The result is 4.", b.result(sent.TurnWorkflowID).Output)
		require.Equal(t, []string{"user: tell a story", "assistant: " + storyText, "user: " + question, "assistant: The result is 4."},
			b.transcript())
	})

	t.Run("rollback", func(t *testing.T) {
		b := startBusy(t, e, ctx, agent.ConversationInput{})
		sent, err := b.send(agent.SendMessage{Prompt: question, OnBusy: agent.OnBusyRollback})
		require.NoError(t, err)
		story := b.result(b.story.TurnWorkflowID)
		require.Equal(t, agent.StatusCanceled, story.Status)
		require.False(t, story.Partial)
		require.Empty(t, story.Output)
		require.Equal(t, "The result is 4.", b.result(sent.TurnWorkflowID).Output)

		require.Equal(t, []string{"user: " + question, "assistant: The result is 4."}, b.transcript(), "no trace of the story")
		require.Equal(t, []string{"system: Use the calculator for arithmetic.", "user: " + question}, b.sentToModel(question))
		// The conversation takes the turn's end in after the turn has ended.
		var tr agent.Transcript
		require.Eventually(t, func() bool {
			tr, err = turnclient.Transcript(ctx, e.Client(), contract.ConversationWorkflowID(b.in.TenantID, b.in.SessionID))
			return err == nil && len(tr.Window) > 0
		}, 30*time.Second, 20*time.Millisecond)
		require.Len(t, tr.Window, 1)
		require.Equal(t, sent.JobID, tr.Window[0].JobID)
		events := b.messageEvents(sent.JobID)
		require.Equal(t, agent.MessageEvent{ID: b.story.JobID, StreamID: b.story.TurnWorkflowID, Status: agent.StatusCanceled, OnBusy: agent.OnBusyRollback},
			events[1])
	})
}

// TestConversationSteer: a message with on_busy steer joins the running
// turn, which goes on: the message interrupts the model call streaming
// the story (within the second: the turn stops the call on the live
// path), the story as far as it got stays in the log and is the model's
// answer cut short, and the model answers again at once having read it
// and the message. The turn's log and the conversation's stream show the
// message taken in, its result names it, and the session's transcript
// has the story cut short, the message and the new answer, in order.
// With no turn running a message is answered as any message.
func TestConversationSteer(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const steer = "now make it about a cat"

	b := startBusy(t, e, ctx, agent.ConversationInput{})
	sentAt := time.Now()
	sent, err := b.send(agent.SendMessage{Prompt: steer, OnBusy: agent.OnBusySteer})
	require.NoError(t, err)
	require.True(t, sent.Steered)
	require.Equal(t, b.story.TurnWorkflowID, sent.TurnWorkflowID, "the message joins the running turn")

	res := b.result(b.story.TurnWorkflowID)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, "A story about a cat.", res.Output)
	require.Equal(t, []string{sent.JobID}, res.Steered)
	require.Equal(t, 1, e.Model.Served("story"), "the story is not told again")

	// The log: the story cut short, the message, the new answer.
	events, err := collect(ctx, e.Follower(), b.story.TurnWorkflowID, 0)
	require.NoError(t, err)
	var before, after strings.Builder
	var steered []agent.Event
	for _, ev := range events {
		switch {
		case ev.Kind == agent.EventSteered:
			steered = append(steered, ev)
		case ev.Kind == agent.EventToken && len(steered) == 0:
			before.WriteString(ev.Text)
		case ev.Kind == agent.EventToken:
			after.WriteString(ev.Text)
		}
	}
	require.Len(t, steered, 1)
	require.Equal(t, &agent.MessageEvent{ID: sent.JobID}, steered[0].Message)
	require.Equal(t, steer, steered[0].Text)
	cut := before.String()
	require.True(t, strings.HasPrefix(storyText, cut), "the story as streamed: %q", cut)
	require.Less(t, len(strings.Fields(cut)), len(strings.Fields(storyText)), "the story was cut short")
	require.GreaterOrEqual(t, len(strings.Fields(cut)), 3, "what followers saw stays")
	require.Equal(t, "A story about a cat.", after.String())
	// The story streams a word every 15 ms for about 1.5 s: a message
	// taken only at its end would come after all of it.
	t.Logf("the message was taken in %d words into the story, %s after it was sent", len(strings.Fields(cut)), time.Since(sentAt))

	require.Equal(t, []string{
		"system: Use the calculator for arithmetic.",
		"user: tell a story", "assistant: " + cut + agent.InterruptedNote, "user: " + steer,
	}, b.sentToModel(steer), "the model reads its answer as cut short, then the message")
	require.Equal(t, []string{"user: tell a story", "assistant: " + cut, "user: " + steer, "assistant: A story about a cat."}, b.transcript())

	got, err := wsFollow(ctx, e.Client(), contract.ConversationWorkflowID(b.in.TenantID, b.in.SessionID), nil, 0, untilMessageEnd(b.story.JobID))
	require.NoError(t, err)
	var onStream int
	for _, it := range got.items {
		var ev agent.Event
		if it.Topic == "events" && json.Unmarshal(it.Payload.GetData(), &ev) == nil && ev.Kind == agent.EventSteered {
			require.NotNil(t, ev.Child, "the turn's event, on the conversation's stream")
			require.Equal(t, b.story.JobID, ev.Child.CallID)
			onStream++
		}
	}
	require.Equal(t, 1, onStream)
	e.replay(b.story.TurnWorkflowID, "turn_steered")
	e.replay(contract.ConversationWorkflowID(b.in.TenantID, b.in.SessionID), "conversation_steered")

	// No turn runs: the message is answered on its own.
	idle, err := b.send(agent.SendMessage{Prompt: "what is 3+3?", OnBusy: agent.OnBusySteer})
	require.NoError(t, err)
	require.False(t, idle.Steered)
	require.Equal(t, "The result is 6.", b.result(idle.TurnWorkflowID).Output)
}

// TestSteerBadSignals: steer signals that do not decode, or name no
// message, are dropped and logged; the turn goes on as it was.
func TestSteerBadSignals(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := e.startTurn("tell a story")
	for _, bad := range []any{"not a message", agent.SteerMessage{Prompt: "no id"}, agent.SteerMessage{ID: "m-1", Prompt: "  "}} {
		require.NoError(t, e.Client().SignalWorkflow(ctx, id, "", contract.SignalSteer, bad))
	}
	res, err := turnclient.Result(ctx, e.Client().GetWorkflow(ctx, id, ""))
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, storyText, res.Output)
	require.Empty(t, res.Steered)
}

// TestInterruptAtBoundary: a turn interrupted at the boundary lets its
// model call finish, then stops before it runs the tool calls the model
// asked for: none runs, each is answered as not run, and the message is
// answered next.
func TestInterruptAtBoundary(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in := agent.ConversationInput{TenantID: "demo", SessionID: "boundary-" + testserver.RandomID()}
	first, err := turnclient.SendMessage(ctx, e.Client(), e.TaskQueue, in, agent.SendMessage{Prompt: "slowly, what is 5*5?"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.Model.InFlight() > 0 }, 30*time.Second, 5*time.Millisecond, "the model call is in flight")
	sent, err := turnclient.SendMessage(ctx, e.Client(), e.TaskQueue, in,
		agent.SendMessage{Prompt: "what is 2+2?", OnBusy: agent.OnBusyInterrupt, StopAt: agent.StopAtBoundary})
	require.NoError(t, err)

	res, err := turnclient.Result(ctx, e.Client().GetWorkflow(ctx, first.TurnWorkflowID, ""))
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.Equal(t, 1, e.Model.Served("slow-calc"), "the model call was not stopped")
	events, err := collect(ctx, e.Follower(), first.TurnWorkflowID, 0)
	require.NoError(t, err)
	for _, ev := range events {
		require.NotEqual(t, agent.EventToolStart, ev.Kind, "no tool call ran: %s", ev)
	}
	steps := e.steps(first.JobID)
	require.Len(t, steps, 3, "the prompt, the reply, the call's answer")
	require.Equal(t, agent.RoleTool, steps[2].Role)
	require.Equal(t, "error: the turn was stopped before the call ran", steps[2].Content)
	e.replay(first.TurnWorkflowID, "turn_stopped_at_boundary")

	next, err := turnclient.Result(ctx, e.Client().GetWorkflow(ctx, sent.TurnWorkflowID, ""))
	require.NoError(t, err)
	require.Equal(t, "The result is 4.", next.Output)
}

// strictCatalog's agent refuses a message while it answers another,
// unless the message says otherwise.
const strictCatalog = `
tenant: strict
default_agent: strict
tools:
  - name: calculator
    kind: calculator
agents:
  - id: strict
    model: openai:gpt-4o-mini
    system_prompt: Use the calculator for arithmetic.
    tools: [calculator]
    on_busy: reject
    limits: {max_iterations: 4, turn_timeout_sec: 60}
`

// TestConversationAgentOnBusy: an agent's on_busy applies to the messages
// of its conversations that name none; a message's own wins.
func TestConversationAgentOnBusy(t *testing.T) {
	e := newEnv(t)
	e.ApplyCatalog(t, strictCatalog)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := startBusy(t, e, ctx, agent.ConversationInput{TenantID: "strict"})
	_, err := b.send(agent.SendMessage{Prompt: "what is 2+2?"})
	require.Equal(t, agent.CodeConflict, agent.ErrorCode(err), "error: %v", err)
	require.ErrorContains(t, err, `(on_busy "reject")`)
	sent, err := b.send(agent.SendMessage{Prompt: "what is 3+3?", OnBusy: agent.OnBusyEnqueue})
	require.NoError(t, err, "the message's own policy wins")
	require.Equal(t, storyText, b.result(b.story.TurnWorkflowID).Output, "the story went on")
	require.Equal(t, "The result is 6.", b.result(sent.TurnWorkflowID).Output)
	e.replay(contract.ConversationWorkflowID(b.in.TenantID, b.in.SessionID), "conversation_agent_on_busy")
}
