package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// convStreamsScript streams long stories word by word, so that a few of
// them fill more than a run of the conversation hands on, and answers
// arithmetic with the calculator.
var convStreamsScript = `
pacing: {chunk_words: 1, delay_ms: 1}
rules:
  - name: story
    when: {user: '^tell a long story'}
    reply: {text: '` + strings.Repeat(storyText+" ", 10) + `'}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
`

// conveyed reports whether a conversation's stream carries an event of a
// message's turn: what the turn's model calls stream (and the RETRYING
// statuses among it) and the events a turn forwards to the workflow that
// follows it.
func conveyed(e agent.Event) bool {
	return e.Child == nil && (e.Kind.Streamed() || e.Kind == agent.EventStatus && e.Status == agent.StreamRetrying || eventlog.Forwarded(e.Kind))
}

// untilMessageEnd is a wsFollow stop: once the items hold the
// message_end of the job id lastJob.
func untilMessageEnd(lastJob string) func([]wsItem) bool {
	seen, done := 0, false
	return func(items []wsItem) bool {
		for ; seen < len(items); seen++ {
			var e agent.Event
			if it := items[seen]; it.Topic == "events" && json.Unmarshal(it.Payload.GetData(), &e) == nil &&
				e.Kind == agent.EventMessageEnd && e.Message != nil && e.Message.ID == lastJob {
				done = true
			}
		}
		return done
	}
}

// TestConversationWorkflowStreams: subscribers written from the Workflow
// Streams protocol follow a Conversation through messages and at least
// one continue-as-new — one from offset 0, one from an offset in the
// middle — and get every item once, in order, at offsets without gaps:
// each message framed by its message_start and message_end, with its
// turn's streamed and forwarded events (exactly those of the turn's own
// log), and its answer on the text topic. A subscriber whose offset is
// older than what the conversation kept gets TruncatedOffset and goes on
// from what was kept. The temporal CLI reads the stream as
// docs/concepts/conversations.md shows.
func TestConversationWorkflowStreams(t *testing.T) {
	e := newEnvWith(t, convStreamsScript)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	session := "ws-" + testserver.RandomID()
	in := agent.ConversationInput{TenantID: "demo", SessionID: session, MaxHistoryEvents: 200, History: agent.HistoryFresh}
	convID := contract.ConversationWorkflowID(in.TenantID, in.SessionID)
	prompts := []string{"What is 12.5 * 4?", "tell a long story", "tell a long story", "What is 1 + 1?"}

	// The last message has a job id of its own, so that subscribers know
	// where to stop.
	lastJob := "last-" + session
	type subscriber struct {
		from int64
		got  wsFollowed
		err  error
	}
	var wg sync.WaitGroup
	follow := func(from int64) *subscriber {
		s := &subscriber{from: from}
		wg.Go(func() { s.got, s.err = wsFollow(ctx, e.Client(), convID, nil, from, untilMessageEnd(lastJob)) })
		return s
	}

	// The first message starts the conversation; a subscriber from 0
	// starts at once.
	sent, err := turnclient.SendMessage(ctx, e.Client(), e.TaskQueue, in, agent.SendMessage{Prompt: prompts[0]})
	require.NoError(t, err)
	fromZero := follow(0)
	jobs := []string{sent.JobID}
	results := []agent.TurnResult{}
	res, err := e.result(sent.TurnWorkflowID)
	require.NoError(t, err)
	results = append(results, res)

	// docs/concepts/conversations.md's recipe: the temporal CLI polls the
	// conversation's stream, and reads its offset.
	out, err := e.Temporal("workflow", "update", "execute", "--workflow-id", convID, "--name", wsPollUpdate,
		"--input", `{"topics":["events"],"from_offset":0}`)
	require.NoError(t, err, out)
	require.Contains(t, out, "next_offset")
	out, err = e.Temporal("workflow", "update", "execute", "--workflow-id", convID, "--name", wsPollUpdate,
		"--input", `{"topics":["events"],"from_offset":0}`, "--output", "json")
	require.NoError(t, err, out)
	cli := cliPollEvents(t, out)
	require.Equal(t, &agent.MessageEvent{ID: sent.JobID, StreamID: sent.TurnWorkflowID}, cli[0].Message)
	require.Equal(t, agent.EventMessageStart, cli[0].Kind)
	out, err = e.Temporal("workflow", "query", "--workflow-id", convID, "--name", wsOffsetQuery)
	require.NoError(t, err, out)

	// More messages, one after the other, until the conversation has
	// continued as new keeping less than its whole stream, and answered
	// two more; a second subscriber starts in the middle of the second
	// message.
	var mid *subscriber
	rolledAt := 0
	for i := 1; rolledAt == 0 || len(jobs) < rolledAt+2; i++ {
		require.Less(t, i, 30, "the conversation never continued as new keeping less than its stream")
		res, err := e.converseMessage(ctx, in, agent.SendMessage{Prompt: prompts[i%len(prompts)]})
		require.NoError(t, err)
		results = append(results, res)
		jobs = append(jobs, res.JobID)
		if i == 1 {
			v, err := e.Client().QueryWorkflow(ctx, convID, "", wsOffsetQuery)
			require.NoError(t, err)
			var end int64
			require.NoError(t, v.Get(&end))
			mid = follow(end - 5)
		}
		if rolledAt == 0 && carriedBase(t, e, convID, "") > 1 {
			rolledAt = len(jobs)
		}
	}
	res, err = e.converseMessage(ctx, in, agent.SendMessage{Prompt: prompts[0], JobID: lastJob})
	require.NoError(t, err)
	results = append(results, res)
	jobs = append(jobs, lastJob)

	// A subscriber with an offset older than what the run kept.
	h, err := e.Client().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: convID, UpdateName: wsPollUpdate,
		Args: []any{wsPollInput{Topics: []string{}, FromOffset: 1}}, WaitForStage: client.WorkflowUpdateStageAccepted})
	require.NoError(t, err)
	var app *temporal.ApplicationError
	err = h.Get(ctx, nil)
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, "TruncatedOffset", app.Type())
	stale, err := wsFollow(ctx, e.Client(), convID, nil, 1, func(items []wsItem) bool { return len(items) > 0 })
	require.NoError(t, err)
	require.Equal(t, 1, stale.truncated, "TruncatedOffset, then from 0")
	// What the polled run was handed: its base is where 0 starts.
	base := carriedBase(t, e, convID, stale.runs[0])
	require.Greater(t, base, int64(1))
	require.Equal(t, base, stale.items[0].Offset, "0 is the start of what was kept")

	wg.Wait()
	require.NoError(t, fromZero.err)
	require.NoError(t, mid.err)
	all := fromZero.got.items
	t.Logf("%d messages, %d items; subscriber from 0: %d polls over %d runs, %d refused as draining; from %d: %d polls over %d runs",
		len(jobs), len(all), len(fromZero.got.answers), len(fromZero.got.runs), fromZero.got.draining, mid.from, len(mid.got.answers), len(mid.got.runs))
	require.Greater(t, len(fromZero.got.runs), 1, "the subscriber from 0 followed the conversation into its next run")

	// Every item once, in order, at offsets 0, 1, 2, …; the events at
	// indices 1, 2, 3, ….
	var events []agent.Event
	var texts []string
	for i, it := range all {
		require.Equal(t, int64(i), it.Offset, "no gap, no duplicate")
		switch it.Topic {
		case "events":
			var ev agent.Event
			wsJSON(t, it, &ev)
			require.Equal(t, int64(len(events)+1), ev.Index)
			require.Equal(t, convID, ev.StreamID)
			require.NoError(t, ev.Validate())
			events = append(events, ev)
		case "text":
			var s string
			wsJSON(t, it, &s)
			texts = append(texts, s)
		default:
			t.Fatalf("item %d: topic %q", it.Offset, it.Topic)
		}
	}
	require.True(t, proto.Equal(all[base].Payload, stale.items[0].Payload), "the item kept at the base is the one first sent there")

	// Each message framed, in the order sent, holding its turn's events
	// — exactly those of the turn's log it conveys — and its answer.
	var answers []string
	pos := 0
	for k, job := range jobs {
		turnID := contract.TurnWorkflowID("demo", job)
		require.Equal(t, agent.EventMessageStart, events[pos].Kind, "message %d", k)
		// A message sent while the one before ran says it was queued.
		start := *events[pos].Message
		require.Contains(t, []string{"", agent.OnBusyEnqueue}, start.OnBusy, "message %d", k)
		start.OnBusy = ""
		require.Equal(t, agent.MessageEvent{ID: job, StreamID: turnID}, start)
		pos++
		var child []agent.Event
		for ; events[pos].Kind != agent.EventMessageEnd; pos++ {
			c := events[pos].Child
			require.NotNil(t, c, "between a message's frames, its turn's events only: %s", events[pos])
			require.Equal(t, job, c.CallID)
			require.Equal(t, turnID, c.StreamID)
			child = append(child, events[pos])
		}
		require.Equal(t, &agent.MessageEvent{ID: job, StreamID: turnID, Status: agent.StatusCompleted}, events[pos].Message)
		pos++
		page, err := turnclient.Events(ctx, e.Client(), turnID, agent.EventsQuery{})
		require.NoError(t, err)
		var want []agent.Event
		for _, ev := range page.Events {
			if conveyed(ev) {
				want = append(want, ev)
			}
		}
		require.Equal(t, want, agent.ChildEvents(child, job), "message %d: the turn's events, once each, in order", k)
		require.Equal(t, results[k].Output, agent.ReplayText(agent.ChildEvents(child, job)))
		answers = append(answers, results[k].Output)
	}
	require.Len(t, events, pos, "nothing after the last message")
	require.Equal(t, answers, texts, "the text topic holds each answer, in order")
	kinds := map[agent.EventKind]bool{}
	for _, ev := range events {
		kinds[ev.Kind] = true
	}
	require.True(t, kinds[agent.EventToolStart] && kinds[agent.EventToolEnd] && kinds[agent.EventToken], "tool calls and tokens came through: %v", kinds)

	// The subscriber from the middle got exactly the items from there.
	require.Equal(t, len(all)-int(mid.from), len(mid.got.items))
	for i, it := range mid.got.items {
		want := all[int(mid.from)+i]
		require.Equal(t, want.Offset, it.Offset)
		require.True(t, proto.Equal(want.Payload, it.Payload), "item %d", it.Offset)
	}

	runs := testserver.Runs(ctx, t, e.Client(), convID)
	require.Greater(t, len(runs), 1)
	first := runs[0]
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, first[len(first)-1].GetEventType())
	polls := 0
	for _, ev := range first {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED &&
			ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == wsPollUpdate {
			polls++
		}
	}
	require.Positive(t, polls, "the first run answered polls")
	for i, evs := range runs {
		t.Logf("run %d: %d history events", i, len(evs))
	}
	e.replayEvents(first, "conversation_workflow_streams")
	e.replay(contract.TurnWorkflowID("demo", jobs[0]), "conversation_turn_events")
}

// carriedBase is the first offset a conversation's run (runID; "": the
// latest) was handed of its stream: 0 for a first run.
func carriedBase(t *testing.T, e *env, convID, runID string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := testserver.History(ctx, t, e.Client(), convID, runID)[0].GetWorkflowExecutionStartedEventAttributes()
	var in agent.ConversationInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(started.GetInput(), &in))
	if in.Carry == nil || in.Carry.Stream == nil {
		return 0
	}
	return in.Carry.Stream.BaseOffset
}
