package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// slowScript has a model that thinks for a while, with and without tools.
const slowScript = `
pacing: {chunk_words: 2, delay_ms: 100}
rules:
  - name: think
    when: {user: '^think about (.+)$'}
    reply: {text: 'After long thought: $1 is fine.', delay_ms: 15000}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}], delay_ms: 2000}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1, as the calculator says, word by word, for a while.', delay_ms: 1000}
  - name: fallback
    reply: {text: "I don't know."}
`

// TestSlowUnstreamedModelCall: a model call that takes 15 s without
// streaming heartbeats, so it is neither given up for lost nor paid for
// twice, and its tokens are counted.
func TestSlowUnstreamedModelCall(t *testing.T) {
	e := newEnvWith(t, slowScript)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	off := false
	req := agent.TurnRequest{TenantID: "demo", JobID: "slow-" + testserver.RandomID(), Prompt: "think about the plan", Stream: &off}
	req.Normalize()
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "After long thought: the plan is fine.", res.Output)
	require.Equal(t, 1, e.Model.Served("think"), "one model call for one step")
	require.Positive(t, res.Metadata.TokensUsed)
	_, _, tokens, _ := e.resultRows(req.JobID)
	require.Equal(t, res.Metadata.TokensUsed, tokens)
}

// TestPostgresOutage: turns in flight when PostgreSQL goes away for a
// minute, and turns started while it is away, all complete once it is
// back, with one stored result each.
func TestPostgresOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "agentflow-outage-*")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pg, err := devstack.Start(ctx, devstack.Options{Dir: dir, SkipTemporal: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop() })
	u, err := url.Parse(pg.DatabaseURL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)

	// The turns' timeout (4 minutes) outlasts the outage.
	catalog := strings.Replace(testCatalog, "turn_timeout_sec: 60", "turn_timeout_sec: 240", 1)
	require.NotEqual(t, testCatalog, catalog)
	e := &env{Server: testserver.Start(t, testserver.Options{Script: slowScript, Catalogs: []string{catalog},
		DatabaseURL: pg.DatabaseURL}), t: t}
	prompts := map[string]string{}
	start := func(prompt string) string {
		req := agent.TurnRequest{TenantID: "demo", JobID: "outage-" + testserver.RandomID(), Prompt: prompt}
		req.Normalize()
		run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
		require.NoError(t, err)
		prompts[run.GetID()] = prompt
		return run.GetID()
	}
	var ids []string
	for i := range 6 {
		ids = append(ids, start(fmt.Sprintf("What is %d * 7?", i)))
	}
	// Every turn is past its start: routed, loaded, at the model.
	require.Eventually(t, func() bool {
		for _, id := range ids {
			page, err := turnclient.Events(ctx, e.Client(), id, agent.EventsQuery{})
			if err != nil || len(page.Events) < 1 {
				return false
			}
		}
		return e.Model.Served("calc") >= len(ids)
	}, time.Minute, 100*time.Millisecond)

	require.NoError(t, pg.Stop())
	outage := time.Now()
	for i := range 3 {
		ids = append(ids, start(fmt.Sprintf("What is %d + 1?", i))) // started while the database is away
	}
	time.Sleep(time.Minute - time.Since(outage)) // the outage itself
	pg, err = devstack.Start(ctx, devstack.Options{Dir: dir, SkipTemporal: true, PostgresPort: port})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop() })

	for _, id := range ids {
		var res agent.TurnResult
		err := e.Client().GetWorkflow(ctx, id, "").Get(ctx, &res)
		require.NoError(t, err, id)
		require.Equal(t, agent.StatusCompleted, res.Status, id)
		require.Contains(t, res.Output, "The result is", id)
		jobID := id[len("turn/demo/"):]
		count, status, _, _ := e.resultRows(jobID)
		require.Equal(t, 1, count, id)
		require.Equal(t, agent.StatusCompleted, status, id)
	}
	// A model call is made again only when an attempt of it failed: on a
	// loaded machine an AwaitModel attempt may miss its heartbeat and its
	// retry call afresh, which the turn's history shows.
	asked := map[string]int{}
	for _, r := range e.Model.Requests() {
		if r.Rule == "calc" {
			asked[lastUser(r)]++
		}
	}
	for _, id := range ids {
		n, retries := asked[prompts[id]], modelRetries(t, e.history(id))
		require.Positive(t, n, id)
		require.LessOrEqual(t, n-1, retries, "%s: its first model call was asked %d times, and %d of its model attempts were retries", id, n, retries)
	}
}

// lastUser is the text of a model request's last user message.
func lastUser(r scripted.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// modelRetries counts the attempts of a run's model calls after their
// first: CallModel's (modelCallAttempts) and those of the AwaitModel
// activities that took handed-off calls over.
func modelRetries(t *testing.T, events []*historypb.HistoryEvent) int {
	n := 0
	for _, a := range modelCallAttempts(t, events) {
		n += int(max(a, 1) - 1)
	}
	awaits := map[int64]bool{}
	for _, ev := range events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == contract.AwaitModel {
			awaits[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && awaits[a.GetScheduledEventId()] {
			n += int(max(a.GetAttempt(), 1) - 1)
		}
	}
	return n
}

// TestCancelFromTemporal: `temporal workflow cancel` and the cancel_turn
// signal end a turn CANCELED with a stored canceled result, and the
// conversation whose turn it was goes on.
func TestCancelFromTemporal(t *testing.T) {
	e := newEnvWith(t, slowScript)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, how := range []string{"workflow cancel", "cancel_turn signal"} {
		t.Run(how, func(t *testing.T) {
			job := "cancel-" + testserver.RandomID()
			id := contract.TurnWorkflowID("demo", job)
			e.startWithCLI(id, `{"tenant_id":"demo","job_id":"`+job+`","prompt":"think about the plan"}`)
			require.Eventually(t, func() bool { return e.Model.Served("think") > 0 }, time.Minute, 50*time.Millisecond)
			var out string
			var err error
			if how == "workflow cancel" {
				out, err = e.Temporal("workflow", "cancel", "--workflow-id", id)
			} else {
				out, err = e.Temporal("workflow", "signal", "--workflow-id", id, "--name", contract.SignalCancelTurn,
					"--input", `{"reason":"not needed","requested_by":"ops"}`)
			}
			require.NoError(t, err, out)

			err = e.Client().GetWorkflow(ctx, id, "").Get(ctx, nil)
			var canceled *temporal.CanceledError
			require.True(t, errors.As(err, &canceled), "the turn ends CANCELED, not with %v", err)
			res, ok := contract.FailedResult(err)
			require.True(t, ok, "the cancellation carries the result")
			desc, err := e.Client().DescribeWorkflowExecution(ctx, id, "")
			require.NoError(t, err)
			require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus())
			stored, err := e.Store().Result(ctx, "demo", job)
			require.NoError(t, err)
			require.Equal(t, agent.StatusCanceled, stored.Status)
			require.Equal(t, agent.ErrTypeCanceled, stored.Error.Type)
			require.False(t, stored.Error.Retryable)
			require.Equal(t, stored.Error.Message, res.Error.Message)
			if how == "cancel_turn signal" {
				require.Equal(t, "the turn was cancelled by ops: not needed", res.Error.Message)
				e.replay(id, "turn_canceled_by_signal")
			} else {
				require.Equal(t, "the turn was cancelled by temporal: the workflow was cancelled", res.Error.Message)
				e.replay(id, "turn_canceled_by_temporal")
			}
		})
	}

	t.Run("conversation goes on", func(t *testing.T) {
		in := agent.ConversationInput{TenantID: "demo", SessionID: "s-" + testserver.RandomID()}
		first, err := turnclient.SendMessage(ctx, e.Client(), e.TaskQueue, in, agent.SendMessage{Prompt: "think about the plan"})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return turnclient.Cancel(ctx, e.Client(), first.TurnWorkflowID, agent.CancelRequest{RequestedBy: "test"}) == nil
		}, time.Minute, 100*time.Millisecond)
		second, err := turnclient.SendMessage(ctx, e.Client(), e.TaskQueue, in, agent.SendMessage{Prompt: "What is 2 + 2?"})
		require.NoError(t, err)
		var res agent.TurnResult
		require.Eventually(t, func() bool {
			return e.Client().GetWorkflow(ctx, second.TurnWorkflowID, "").Get(ctx, &res) == nil
		}, time.Minute, 200*time.Millisecond)
		require.Equal(t, agent.StatusCompleted, res.Status)
		// The conversation records the turn's outcome in its next workflow
		// task, after the turn has closed: read the transcript once it has.
		var tr agent.Transcript
		require.Eventually(t, func() bool {
			v, err := e.Client().QueryWorkflow(ctx, contract.ConversationWorkflowID(in.TenantID, in.SessionID), "", contract.QueryTranscript)
			return err == nil && v.Get(&tr) == nil && len(tr.Window) == 2
		}, time.Minute, 100*time.Millisecond, "the transcript holds both turns: %+v", &tr)
		require.Equal(t, agent.StatusCanceled, tr.Window[0].Status)
		require.Equal(t, agent.StatusCompleted, tr.Window[1].Status)
	})
}
