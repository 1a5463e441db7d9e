package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// countingScript has the model count with the calculator: after "count",
// and after each result n below calls, it says so at some length
// (stepText) and asks for n+1; at calls it answers.
func countingScript(calls int) string {
	var b strings.Builder
	b.WriteString("rules:\n  - name: start\n    when: {user: 'count'}\n    reply: {tool_calls: [{name: calculator, arguments: '{\"expression\": \"0+1\"}'}]}\n")
	for n := 1; n < calls; n++ {
		fmt.Fprintf(&b, "  - name: c%d\n    when: {tool: '^%d$'}\n    reply: {text: '%s', tool_calls: [{name: calculator, arguments: '{\"expression\": \"%d+1\"}'}]}\n", n, n, stepText(n), n)
	}
	fmt.Fprintf(&b, "  - name: done\n    when: {tool: '^%d$'}\n    reply: {text: 'Counted to %d.'}\n", calls, calls)
	return b.String()
}

// stepText is what the counting model says at step n: a hundred words,
// so that a turn's log outgrows what a run hands on of it
// (eventlog.CarryBytes) and the earlier runs hold its start.
func stepText(n int) string {
	return fmt.Sprintf("Step %d.", n) + strings.Repeat(" counting", 100)
}

// longTurnCatalog's agent makes up to 500 model calls a turn, and its
// turns continue as new every 100 events (the least a run may hold).
const longTurnCatalog = `
tenant: demo
default_agent: counter
tools:
  - name: calculator
    kind: calculator
agents:
  - id: counter
    model: openai:gpt-4o-mini
    system_prompt: Count with the calculator.
    tools: [calculator]
    limits: {max_iterations: 500, turn_timeout_sec: 600, history_events: 100}
`

// startCounting starts a turn of longTurnCatalog's agent counting to calls
// with the calculator, its model calls run as execution says (its
// model_execution; "" for the default), with req's job id prefix and
// stream window. It returns the test's env, a context bounding the test,
// and the turn's run.
func startCounting(t *testing.T, execution string, calls int, req agent.TurnRequest) (*env, context.Context, client.WorkflowRun) {
	t.Helper()
	catalog := longTurnCatalog
	if execution != "" {
		line := "    model_execution: " + execution + "\n"
		catalog = strings.Replace(catalog, "    tools: [calculator]\n", "    tools: [calculator]\n"+line, 1)
		require.Contains(t, catalog, line)
	}
	srv := testserver.Start(t, testserver.Options{Script: countingScript(calls), Catalogs: []string{catalog}})
	e := &env{Server: srv, t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	req.Version, req.TenantID, req.Prompt = agent.ProtocolVersion, "demo", "count"
	req.JobID += testserver.RandomID()
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
	require.NoError(t, err)
	return e, ctx, run
}

// runsOf returns the runs of a workflow, first to last, with each one's
// history length, walking back from the current run by the run each
// continued from.
func (e *env) runsOf(ctx context.Context, workflowID string) (runs []string, events []int) {
	e.t.Helper()
	runID := ""
	for {
		iter := e.Client().GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		n, prev, id := 0, "", ""
		for iter.HasNext() {
			ev, err := iter.Next()
			require.NoError(e.t, err)
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				prev, id = a.GetContinuedExecutionRunId(), a.GetOriginalExecutionRunId()
			}
			n++
		}
		if runID == "" {
			runID = id
		}
		runs, events = append([]string{runID}, runs...), append([]int{n}, events...)
		if prev == "" {
			return runs, events
		}
		runID = prev
	}
}

// TestLongTurnContinuesAsNew: a turn of 40 tool calls whose agent's runs
// hold 100 events continues as new run after run, and stays one turn: one
// id, each call made once, one result listing them all, one event log
// with no gap and no repeat — for a follower that follows it as it runs,
// for a Workflow Streams subscriber that polls it from its start, and for
// one that reads it from the start after it has ended, through every
// earlier run.
//
// Its model calls are regular activities (model_execution: activity), so
// that the subscriber's first poll reaches the first run: a run of local
// calls and a local tool runs its steps in one workflow task, the one the
// start hands the worker, and hands on before a poll can reach it; a poll
// from offset 0 that reaches a later run reads only the tail that run was
// handed, unless the turn asked for a window (TestLongTurnHeldForSubscribers).
// TestLongTurnOfLocalCallsContinuesAsNew continues local calls as new.
func TestLongTurnContinuesAsNew(t *testing.T) {
	const calls = 40
	e, ctx, run := startCounting(t, agent.ModelActivity, calls, agent.TurnRequest{JobID: "long-"})
	srv := e.Server
	// The readers report their errors to the test's goroutine: one that
	// failed on its own goroutine would leave the test waiting for it.
	type read[T any] struct {
		got T
		err error
	}
	live := make(chan read[[]agent.Event], 1)
	go func() {
		events, err := collect(ctx, e.Follower(), run.GetID(), 0)
		live <- read[[]agent.Event]{events, err}
	}()
	// A Workflow Streams subscriber, as Temporal's own clients poll.
	polled := make(chan read[wsFollowed], 1)
	go func() {
		f, err := wsSubscribe(ctx, e.Client(), run.GetID(), []string{"events"}, 0)
		polled <- read[wsFollowed]{f, err}
	}()
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, fmt.Sprintf("Counted to %d.", calls), res.Output)
	require.Len(t, res.Metadata.ToolCalls, calls, "one result lists the calls of every run")
	require.Len(t, srv.Model.Requests(), calls+1, "each model call made once")

	runs, sizes := e.runsOf(ctx, run.GetID())
	t.Logf("%d runs, of %v events", len(runs), sizes)
	// The first run, which ends continuing as new, and the last, which
	// starts from what the one before handed on, replay.
	e.replayEvents(testserver.History(ctx, t, e.Client(), run.GetID(), runs[0]), "turn_continued_as_new")
	e.replayEvents(testserver.History(ctx, t, e.Client(), run.GetID(), runs[len(runs)-1]), "turn_continued_last_run")
	require.Greater(t, len(runs), 2, "a turn of %d steps whose runs hold 100 events continues as new: %v", calls, sizes)
	for i, n := range sizes {
		// A run hands on before the step that would take it past its
		// bound: one step's events over it at most.
		require.Less(t, n, 100+40, "run %d holds %d events", i, n)
	}

	followed := <-live
	require.NoError(t, followed.err, "the follower")
	whole := followed.got
	var text strings.Builder
	for n := 1; n < calls; n++ {
		text.WriteString(stepText(n))
	}
	text.WriteString(fmt.Sprintf("Counted to %d.", calls))
	requireLog(t, whole, run.GetID(), text.String())
	steps := 0
	for _, ev := range whole {
		if ev.Kind == agent.EventToolEnd {
			steps++
		}
	}
	require.Equal(t, calls, steps, "every tool call's end is in the log once")

	// The subscriber polled run after run, from the same offsets, and
	// read the same log: nothing truncated, nothing twice.
	subscribed := <-polled
	require.NoError(t, subscribed.err, "the Workflow Streams subscriber")
	sub := subscribed.got
	t.Logf("the subscriber: %d answers from %d runs, %d poll attempts made again (wsPollAttempt)", len(sub.answers), len(sub.runs), sub.stalled)
	require.Zero(t, sub.truncated, "no poll fell behind what a run hands on")
	require.Greater(t, len(sub.runs), 1, "the subscriber's polls reached the turn's later runs")
	require.Equal(t, whole, wsEvents(t, sub.items))

	// Read again after the end, from the start and from the middle: the
	// earlier runs answer for their events.
	again, err := collect(ctx, e.Follower(), run.GetID(), 0)
	require.NoError(t, err)
	require.Equal(t, whole, again)
	// The events query (what the gRPC and HTTP doors' event pages read)
	// answers from the start too: the last run points at the earlier.
	for after := int64(0); after < int64(len(whole)); {
		page, err := turnclient.Events(ctx, e.Client(), run.GetID(), agent.EventsQuery{AfterIndex: after})
		require.NoError(t, err)
		require.NotEmpty(t, page.Events, "a page after %d", after)
		require.Equal(t, whole[after:after+int64(len(page.Events))], page.Events)
		after += int64(len(page.Events))
	}
	mid := int64(len(whole) / 3)
	rest, err := collect(ctx, e.Follower(), run.GetID(), mid)
	require.NoError(t, err)
	require.Equal(t, whole[mid:], rest)
}

// TestLongTurnSignalsReachTheCurrentRun: a cancellation sent to a turn
// that has continued as new reaches the run that is current, by the
// turn's id alone, and the turn ends canceled.
func TestLongTurnSignalsReachTheCurrentRun(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Script: countingScript(400), Catalogs: []string{longTurnCatalog}})
	e := &env{Server: srv, t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "long-" + testserver.RandomID(), Prompt: "count"}
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		runs, _ := e.runsOf(ctx, run.GetID())
		return len(runs) >= 3
	}, 2*time.Minute, 200*time.Millisecond, "the turn continues as new")
	require.NoError(t, turnclient.Cancel(ctx, e.Client(), run.GetID(), agent.CancelRequest{Reason: "enough", RequestedBy: "tester"}))
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.Less(t, len(srv.Model.Requests()), 400, "the cancellation stopped the turn")
}

// contextCatalog's agent is longTurnCatalog's, reading the last 3 to 5
// of its turn's steps whole and the 6 before them as a digest.
const contextCatalog = longTurnCatalog + "    context: {keep_recent_steps: 3}\n"

// TestLongTurnContext: the model calls of a long turn read its prompt, a
// digest of older steps and the recent steps whole, so that what a
// request carries stops growing with the step count; between the blocks
// in which steps move to the digest, each request continues the one
// before it message for message (what a provider's prompt cache serves).
func TestLongTurnContext(t *testing.T) {
	const calls = 40
	// At 20 the model reads step 2 (the first result) again whole, then
	// counts on.
	script := strings.Replace(countingScript(calls), "  - name: c20\n", `  - name: recall
    when: {tool: '^20$'}
    reply: {tool_calls: [{name: recall_step, arguments: '{"step": 2}'}]}
  - name: recalled
    when: {tool: '^\[step 2, tool, bytes 0 to 1 of 1\]\n1$'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "20+1"}'}]}
  - name: c20
`, 1)
	srv := testserver.Start(t, testserver.Options{Script: script, Catalogs: []string{contextCatalog}})
	e := &env{Server: srv, t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "ctx-" + testserver.RandomID(), Prompt: "count"}
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, fmt.Sprintf("Counted to %d.", calls), res.Output, "the model still counts right: it reads the last result whole")
	e.replay(run.GetID(), "turn_long_context")

	reqs := srv.Model.Requests()
	require.Len(t, reqs, calls+2, "a model call a step, and one after reading step 2 again")
	require.Contains(t, reqs[calls+1].Tools, agent.RecallStepTool, "a call that reads a digest is offered the tool that reads a step whole")
	require.NotContains(t, reqs[0].Tools, agent.RecallStepTool)
	size := func(r int) (n int) {
		for _, m := range reqs[r].Messages {
			n += len(m.Content)
			for _, c := range m.ToolCalls {
				n += len(c.Arguments)
			}
		}
		return n
	}
	continued := 0
	for i, r := range reqs {
		// system, prompt, digest, and fewer than 2×3 steps of a reply and
		// a tool result each.
		require.LessOrEqual(t, len(r.Messages), 3+2*(2*3-1), "request %d", i)
		if i >= 2*3 {
			require.Contains(t, r.Messages[2].Content, "[Earlier steps of this turn, in short", "request %d reads a digest", i)
			require.Equal(t, "count", r.Messages[1].Content, "request %d reads the prompt", i)
		}
		if i > 0 && isPrefix(reqs[i-1].Messages, r.Messages) {
			continued++
		}
	}
	require.GreaterOrEqual(t, continued, calls*2/3, "most requests continue the one before")
	require.Len(t, res.Metadata.ToolCalls, calls+1)
	require.Equal(t, agent.RecallStepTool, res.Metadata.ToolCalls[20].Tool)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[20].Status)
	require.Less(t, size(calls+1), 2*size(2*3+2), "the last request is no larger than one early in the turn, give or take a block")
	require.Contains(t, reqs[calls+1].Messages[2].Content, "Steps 1 to", "the oldest steps are only counted")
}

// isPrefix reports whether a's messages begin b's.
func isPrefix(a, b []scripted.Message) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i].Role != b[i].Role || a[i].Content != b[i].Content || a[i].ToolCallID != b[i].ToolCallID || len(a[i].ToolCalls) != len(b[i].ToolCalls) {
			return false
		}
	}
	return true
}

// TestMillionTokenConversation: a conversation whose transcript holds a
// million tokens (estimated) answers a new message with a request inside
// the agent's memory window and its context bound: the model reads a
// window of the latest messages, not the transcript.
func TestMillionTokenConversation(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	session := "million-" + testserver.RandomID()
	line := strings.Repeat("All work and no play. ", 745) // about 16 KB, 4,000 tokens
	tokens := 0
	for i := 0; tokens < 1_000_000; i++ {
		msgs := []agent.Message{{Role: agent.RoleUser, Content: fmt.Sprintf("Message %d. %s", i, line)},
			{Role: agent.RoleAssistant, Content: fmt.Sprintf("Answer %d. %s", i, line)}}
		require.NoError(t, e.Store().AppendSession(ctx, "demo", session, fmt.Sprintf("seed-%d", i), msgs))
		tokens += agent.EstimateTokens(msgs[0].Content) + agent.EstimateTokens(msgs[1].Content)
	}
	in := agent.ConversationInput{TenantID: "demo", SessionID: session, History: agent.HistoryLoad}
	res, err := e.converse(ctx, in, "What is 6*7?")
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	reqs := e.Model.Requests()
	require.NotEmpty(t, reqs)
	for i, r := range reqs {
		n := 0
		for _, m := range r.Messages {
			n += agent.EstimateTokens(m.Content)
		}
		require.Less(t, n, agent.DefaultWindowTokens+2_000, "request %d reads %d tokens of a %d-token transcript", i, n, tokens)
		require.Less(t, n, agent.DefaultContextTokens, "request %d is inside the agent's context bound", i)
	}
}

// TestLongTurnOverOpenAI: OpenAI's Go client streams a long turn's answer
// through the OpenAI door while the turn continues as new run after run:
// the answer arrives whole, once, and the stream ends as a completion
// does.
func TestLongTurnOverOpenAI(t *testing.T) {
	// A step of a local call and a local tool records two markers, so a
	// run of 100 events holds some 45 steps: 60 make two runs.
	const calls = 60
	token := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: countingScript(calls), Catalogs: []string{longTurnCatalog}, HTTPAPI: true,
		Tokens: map[string]string{token: "demo:user:uma"}})
	e := &openAIEnv{Server: srv, t: t, token: token, api: "http://" + srv.HTTPAPIAddr()}
	c := openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(token), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	job := "long-" + testserver.RandomID()
	got, err := e.stream(ctx, c, openai.ChatCompletionNewParams{Model: "counter", Messages: userMessages("count")},
		option.WithHeader("Idempotency-Key", job))
	require.NoError(t, err)
	// The door sends the turn's answer: the last step's text.
	require.Equal(t, fmt.Sprintf("Counted to %d.", calls), got.content)
	require.Equal(t, "stop", got.finish)
	runs, _ := (&env{Server: srv, t: t}).runsOf(ctx, contract.TurnWorkflowID("demo", job))
	require.Greater(t, len(runs), 1, "the turn continued as new while the client read it")
}

// TestLongTurnOfLocalCallsContinuesAsNew: a turn whose model calls and
// tool are local activities runs step after step in one workflow task,
// whose history length Temporal reports as it was at the task's start;
// the turn counts the markers of the local activities it started since
// (turn.historyLength), so it still continues as new at its bound, and
// its answer and each call are the same as on activities. The first run
// is recorded as turn_local_continued_as_new.
func TestLongTurnOfLocalCallsContinuesAsNew(t *testing.T) {
	const calls = 60 // two markers a step: 40 steps hold fewer than 100 events
	e, ctx, run := startCounting(t, agent.ModelLocal, calls, agent.TurnRequest{JobID: "long-local-"})
	srv := e.Server
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, fmt.Sprintf("Counted to %d.", calls), res.Output)
	require.Len(t, srv.Model.Requests(), calls+1, "each model call made once")

	runs, sizes := e.runsOf(ctx, run.GetID())
	t.Logf("%d runs, of %v events", len(runs), sizes)
	first := testserver.History(ctx, t, e.Client(), run.GetID(), runs[0])
	markers := 0
	for _, ev := range first {
		if ev.GetEventType() == enumspb.EVENT_TYPE_MARKER_RECORDED {
			markers++
		}
	}
	require.Greater(t, markers, 20, "the first run's calls and tool calls are local activities")
	e.replayEvents(first, "turn_local_continued_as_new")
	require.Greater(t, len(runs), 1, "a turn of %d local steps whose runs hold 100 events continues as new: %v", calls, sizes)
	for i, n := range sizes {
		require.Less(t, n, 100+40, "run %d holds %d events", i, n)
	}
}

// TestLongTurnHeldForSubscribers: a long turn of local calls started with
// a window for Workflow Streams subscribers (stream_window_sec) keeps its
// first run past its history bound until a subscriber's first poll has
// reached it or the window has passed, so a subscriber polling from its
// start within the window reads every item. Without the hold the run
// hands on within its first workflow task, before any poll can reach it,
// and a poll from offset 0 reaches a later run, which holds only the
// log's tail. Each later run hands on what the subscriber has not read:
// a run of local calls may make all its steps in its first workflow task,
// before the subscriber's next poll reaches it.
func TestLongTurnHeldForSubscribers(t *testing.T) {
	const calls = 60
	// The longest window: the subscriber's first poll reaches the first
	// run however busy the machine is (the hold ends at that poll).
	e, ctx, run := startCounting(t, "", calls, agent.TurnRequest{JobID: "long-held-", StreamWindowSec: agent.MaxStreamWindowSec})
	srv := e.Server
	polled := make(chan wsFollowed, 1)
	pollErr := make(chan error, 1)
	go func() {
		f, err := wsSubscribe(ctx, e.Client(), run.GetID(), []string{"events"}, 0)
		polled <- f
		pollErr <- err
	}()
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Len(t, srv.Model.Requests(), calls+1, "each model call made once")

	events, err := collect(ctx, e.Follower(), run.GetID(), 0)
	require.NoError(t, err)
	sub := <-polled
	require.NoError(t, <-pollErr, "the Workflow Streams subscriber")
	require.Zero(t, sub.truncated)
	require.Equal(t, events, wsEvents(t, sub.items), "the subscriber read every item from the turn's start")

	runs, sizes := e.runsOf(ctx, run.GetID())
	t.Logf("%d runs, of %v events", len(runs), sizes)
	require.NotEmpty(t, sub.runs)
	require.Equal(t, runs[0], sub.runs[0], "the subscriber's first poll reached the first run")
}
