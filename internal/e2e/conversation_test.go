package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// echoScript answers every message at once, quoting it.
const echoScript = `
rules:
  - name: echo
    when: {user: '^(.+)$'}
    reply: {text: 'echo: $1'}
`

// converse sends a message and waits for its turn's result. It reports
// failures instead of failing the test: senders call it on goroutines of
// their own, where require must not run.
func (e *env) converse(ctx context.Context, in agent.ConversationInput, prompt string) (agent.TurnResult, error) {
	return e.converseMessage(ctx, in, agent.SendMessage{Prompt: prompt})
}

// converseMessage is converse for a message with more than a prompt.
func (e *env) converseMessage(ctx context.Context, in agent.ConversationInput, m agent.SendMessage) (agent.TurnResult, error) {
	prompt := m.Prompt
	sent, err := turnclient.SendMessage(ctx, e.Client(), e.TaskQueue, in, m)
	if err != nil {
		return agent.TurnResult{}, fmt.Errorf("send %q: %w", prompt, err)
	}
	// The turn may not have started yet: a message sent while the
	// conversation rolls over is started by its next run.
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var res agent.TurnResult
		err := e.Client().GetWorkflow(wait, sent.TurnWorkflowID, "").Get(wait, &res)
		if err == nil {
			return res, nil
		}
		select {
		case <-wait.Done():
			return agent.TurnResult{}, fmt.Errorf("result of %q: %w", prompt, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// turnSpan is the size of the history events a conversation run added
// for one message: from its update's acceptance to its turn's completion.
func turnSpan(events []*historypb.HistoryEvent, prompt string) int {
	size, in := 0, false
	for _, ev := range events {
		if !in && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED {
			args := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetArgs().GetPayloads()
			in = len(args) > 0 && strings.Contains(string(args[0].GetData()), prompt)
		}
		if in {
			size += proto.Size(ev)
			if ev.GetEventType() == enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED {
				return size
			}
		}
	}
	return 0
}

// TestLongConversation sends messages one after the other to one
// conversation that continues as new every 400 events: 250 in `go tool
// task test`, 1,000 (AGENTFLOW_CONVERSATION_TURNS) in `go tool task
// chaos`. Every message is answered once and in order, and what a turn
// adds to the history does not grow with the conversation.
func TestLongConversation(t *testing.T) {
	e := newEnvWith(t, echoScript)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	turns, maxEvents := 250, 400
	if n := os.Getenv("AGENTFLOW_CONVERSATION_TURNS"); n != "" {
		var err error
		turns, err = strconv.Atoi(n)
		require.NoError(t, err, "AGENTFLOW_CONVERSATION_TURNS")
		require.GreaterOrEqual(t, turns, 50, "AGENTFLOW_CONVERSATION_TURNS: the test compares the first and the last 20 turns")
	}
	in := agent.ConversationInput{TenantID: "demo", SessionID: "long-" + testserver.RandomID(), MaxHistoryEvents: maxEvents, History: agent.HistoryFresh}
	convID := contract.ConversationWorkflowID(in.TenantID, in.SessionID)
	prompt := func(i int) string { return fmt.Sprintf("message %04d", i) }

	// Each send returns once its turn has started, so sending one after the
	// other keeps the next message queued while a turn runs.
	start := time.Now()
	var last agent.SendMessageResult
	for i := 1; i <= turns; i++ {
		var err error
		last, err = turnclient.SendMessage(ctx, e.Client(), e.TaskQueue, in, agent.SendMessage{Prompt: prompt(i)})
		require.NoError(t, err, "message %d", i)
	}
	// The last message may have been carried into a new run: its turn
	// starts there.
	var res agent.TurnResult
	require.Eventually(t, func() bool {
		return e.Client().GetWorkflow(ctx, last.TurnWorkflowID, "").Get(ctx, &res) == nil
	}, time.Minute, 20*time.Millisecond)
	require.Equal(t, "echo: "+prompt(turns), res.Output)
	elapsed := time.Since(start)

	// The transcript holds every message once, in order.
	msgs, err := e.Store().SessionMessages(ctx, in.TenantID, in.SessionID, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 2*turns)
	for i := 0; i < turns; i++ {
		require.Equal(t, prompt(i+1), msgs[2*i].Content)
		require.Equal(t, "echo: "+prompt(i+1), msgs[2*i+1].Content)
	}

	// The conversation may still continue as new after its last turn: read
	// its runs and its transcript until they agree.
	var tr agent.Transcript
	var runs [][]*historypb.HistoryEvent
	require.Eventually(t, func() bool {
		v, err := e.Client().QueryWorkflow(ctx, convID, "", contract.QueryTranscript)
		if err != nil || v.Get(&tr) != nil || tr.Turns != turns {
			return false
		}
		runs = testserver.Runs(ctx, t, e.Client(), convID)
		return len(runs)-1 == tr.Runs
	}, 30*time.Second, 50*time.Millisecond)
	require.Len(t, tr.Window, 10)
	require.Greater(t, len(runs), 1, "the conversation continued as new")
	// What a turn adds to the conversation's history does not grow with
	// the conversation: the early turns and the last ones add as much, on
	// average (a turn's token batches reach the conversation as one or two
	// signals, as the timing falls, so single turns vary).
	const sample = 20
	spans := func(from int) (mean float64) {
		n := 0
		for i := from; i < from+sample; i++ {
			for _, evs := range runs {
				if size := turnSpan(evs, prompt(i)); size > 0 {
					mean += float64(size)
					n++
					break
				}
			}
		}
		require.Positive(t, n, "turns from %d found in the runs", from)
		return mean / float64(n)
	}
	for _, evs := range runs {
		require.LessOrEqual(t, len(evs), maxEvents, "no run passed the configured size")
	}
	first, final := spans(10), spans(turns-sample+1)
	require.InDelta(t, 1.0, final/first, 0.15, "turns 10–%d added %.0f history bytes each, the last %d %.0f", 10+sample-1, first, sample, final)
	t.Logf("%d turns in %s, %d runs of at most %d events; history bytes added per turn: %.0f early, %.0f at the end",
		turns, elapsed.Round(time.Second), len(runs), maxEvents, first, final)
}

func TestMessagesDuringRollOver(t *testing.T) {
	e := newEnvWith(t, echoScript)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := agent.ConversationInput{TenantID: "demo", SessionID: "busy-" + testserver.RandomID(), MaxHistoryEvents: 200, History: agent.HistoryFresh}
	const senders, each = 6, 10
	var wg sync.WaitGroup
	results := make(chan string, senders*each)
	errs := make(chan error, senders)
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				prompt := fmt.Sprintf("sender %d message %d", s, i)
				res, err := e.converse(ctx, in, prompt)
				if err != nil {
					errs <- err
					return
				}
				results <- res.Output
			}
		})
	}
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, results, senders*each)

	msgs, err := e.Store().SessionMessages(ctx, in.TenantID, in.SessionID, 0)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, m := range msgs {
		if m.Role == agent.RoleUser {
			seen[m.Content]++
		}
	}
	require.Len(t, seen, senders*each, "every message answered")
	for p, n := range seen {
		require.Equal(t, 1, n, "answered once: %s", p)
	}
	runs := testserver.Runs(ctx, t, e.Client(), contract.ConversationWorkflowID(in.TenantID, in.SessionID))
	require.Greater(t, len(runs), 1, "messages arrived while the conversation rolled over")
	last := runs[0][len(runs[0])-1]
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, last.GetEventType())
	e.replayEvents(runs[0], "conversation_continued_as_new")
}

// TestConversationWithTemporalCLI sends messages with the real temporal
// CLI exactly as docs/concepts/conversations.md shows.
func TestConversationWithTemporalCLI(t *testing.T) {
	e := newEnv(t)
	session := "cli-" + testserver.RandomID()
	send := func(prompt string) string {
		out, err := e.Temporal("workflow", "execute-update-with-start", "--type", "Conversation", "--task-queue", e.TaskQueue,
			"--workflow-id", "conv/demo/"+session, "--id-conflict-policy", "UseExisting",
			"--input", fmt.Sprintf(`{"tenant_id":"demo","session_id":%q}`, session),
			"--update-name", "send_message", "--update-input", fmt.Sprintf(`{"prompt":%q}`, prompt))
		require.NoError(t, err, out)
		return out
	}
	out := send("What is 12.5 * 4?")
	require.Contains(t, out, fmt.Sprintf(`turn_workflow_id:turn/demo/%s-1`, session))
	res, err := e.result(fmt.Sprintf("turn/demo/%s-1", session))
	require.NoError(t, err)
	require.Equal(t, "The result is 50.", res.Output)

	send("What is 1 + 1?")
	res, err = e.result(fmt.Sprintf("turn/demo/%s-2", session))
	require.NoError(t, err)
	require.Equal(t, "The result is 2.", res.Output)

	var tr agent.Transcript
	require.Eventually(t, func() bool {
		v, err := e.Client().QueryWorkflow(context.Background(), "conv/demo/"+session, "", contract.QueryTranscript)
		return err == nil && v.Get(&tr) == nil && tr.Turns == 2
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "What is 12.5 * 4?", tr.Window[0].Prompt)
	require.Equal(t, "The result is 2.", tr.Window[1].Output)

	// Bad input is refused by the update's validator and changes nothing.
	_, err = e.Temporal("workflow", "execute-update-with-start", "--type", "Conversation", "--task-queue", e.TaskQueue,
		"--workflow-id", "conv/demo/"+session, "--id-conflict-policy", "UseExisting",
		"--input", fmt.Sprintf(`{"tenant_id":"demo","session_id":%q}`, session),
		"--update-name", "send_message", "--update-input", `{"prompt":"  "}`)
	require.Error(t, err)
	e.replay("conv/demo/"+session, "conversation_two_turns")

	// A message with an on_busy policy, as docs/concepts/conversations.md
	// sends one: with no turn running it is answered as any other; a policy
	// the conversation does not know is refused.
	sendInput := func(update string) (string, error) {
		return e.Temporal("workflow", "execute-update-with-start", "--type", "Conversation", "--task-queue", e.TaskQueue,
			"--workflow-id", "conv/demo/"+session, "--id-conflict-policy", "UseExisting",
			"--input", fmt.Sprintf(`{"tenant_id":"demo","session_id":%q}`, session),
			"--update-name", "send_message", "--update-input", update)
	}
	out, err = sendInput(`{"prompt":"What is 2 + 2?","on_busy":"interrupt"}`)
	require.NoError(t, err, out)
	res, err = e.result(fmt.Sprintf("turn/demo/%s-3", session))
	require.NoError(t, err)
	require.Equal(t, "The result is 4.", res.Output)
	out, err = sendInput(`{"prompt":"What is 3 + 3?","on_busy":"later"}`)
	require.Error(t, err)
	require.Contains(t, out, `on_busy \"later\": want`)
}
