package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// payloadScript fetches from the API (API stands for its URL): one row of
// 9 MiB, or a request the API never answers.
const payloadScript = `
pacing: {chunk_words: 4, delay_ms: 2}
rules:
  - name: big-row
    when: {user: '^fetch the big row'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "API/big-row"}]}'
  - name: hang
    when: {user: '^fetch from the stuck service'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "API/hang"}]}'
  - name: cut
    when: {tool: '(?s)(?P<ref>cas://sha256:[0-9a-f]{64}).*the row is 9\.0 MiB; it was cut to fit the preview'}
    reply: {text: 'The row is too large to show; it is kept at ${ref}.'}
  - name: fallback
    reply: {text: "I don't know."}
`

// payloadCatalog gives the agent execute_pipeline with the API (API
// stands for its host:port) in the tenant's egress allowlist.
const payloadCatalog = `
tenant: demo
default_agent: data
egress: ["API"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
agents:
  - id: data
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
`

// bigRowBytes is the size of the API's big row.
const bigRowBytes = 9 << 20

// payloadAPI answers GET /big-row with a table of one row of 9 MiB, and
// holds GET /hang until the client goes away (or the test ends), counting
// both and the held requests whose client went away.
type payloadAPI struct {
	*httptest.Server
	bigRows, hangs, abandoned atomic.Int32
}

func startPayloadAPI(t *testing.T) *payloadAPI {
	t.Helper()
	api := &payloadAPI{}
	row := `[{"id":1,"blob":"` + strings.Repeat("a", bigRowBytes-20) + `"}]`
	release := make(chan struct{})
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big-row":
			api.bigRows.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(row))
		case "/hang":
			api.hangs.Add(1)
			select {
			case <-r.Context().Done():
				api.abandoned.Add(1)
			case <-release:
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(api.Close)
	t.Cleanup(func() { close(release) }) // first: Close waits for the held requests
	return api
}

func newPayloadEnv(t *testing.T) (*env, *payloadAPI) {
	t.Helper()
	api := startPayloadAPI(t)
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(payloadScript, "API", api.URL),
		Catalogs: []string{strings.ReplaceAll(payloadCatalog, "API", strings.TrimPrefix(api.URL, "http://"))},
	})
	return &env{Server: srv, t: t}, api
}

// activityEvents counts a history's events of an activity type by kind:
// scheduled, started (and the highest attempt), and how attempts ended.
type activityEvents struct {
	scheduled, started, completed, failed, timedOut, canceled int
	maxAttempt                                                int32
}

func countActivity(events []*historypb.HistoryEvent, activityType string) activityEvents {
	var c activityEvents
	scheduled := map[int64]bool{} // ids of the type's ActivityTaskScheduled events
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activityType {
				scheduled[ev.GetEventId()] = true
				c.scheduled++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if a := ev.GetActivityTaskStartedEventAttributes(); scheduled[a.GetScheduledEventId()] {
				c.started++
				c.maxAttempt = max(c.maxAttempt, a.GetAttempt())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if scheduled[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				c.completed++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			if scheduled[ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()] {
				c.failed++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			if scheduled[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()] {
				c.timedOut++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			if scheduled[ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()] {
				c.canceled++
			}
		}
	}
	return c
}

// TestBigRowTurn: an API answering one row of 9 MiB no longer breaks the
// turn. The row is kept whole by ref and cut in the preview, so the
// tool's result is kilobytes: its activity completes in one attempt (the
// API is fetched once), the model reads that the row was cut and where
// it is, and the turn's history stays small.
func TestBigRowTurn(t *testing.T) {
	e, api := newPayloadEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "big-row-" + testserver.RandomID()
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
		TenantID: "demo", JobID: job, Prompt: "fetch the big row"})
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)

	require.Equal(t, agent.StatusCompleted, res.Status)
	require.True(t, strings.HasPrefix(res.DataRef, agent.CASRefPrefix), res.DataRef)
	require.Equal(t, "The row is too large to show; it is kept at "+res.DataRef+".", res.Output)
	require.Len(t, res.Metadata.ToolCalls, 1)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.EqualValues(t, 1, api.bigRows.Load(), "the API is fetched once")

	// The data behind the ref is the whole row.
	data, err := e.Store().Data(ctx, "demo", res.DataRef)
	require.NoError(t, err)
	require.Equal(t, bigRowBytes, len(data))

	// The result's preview and the tool_end event carry a cut row.
	var preview agent.DataPreview
	require.NoError(t, json.Unmarshal(res.ResultPreview, &preview))
	require.Equal(t, 1, preview.RowCount)
	require.Equal(t, bigRowBytes, preview.Bytes)
	require.Len(t, preview.Sample, 1)
	require.Contains(t, string(preview.Sample[0]), "the row is 9.0 MiB; it was cut to fit the preview")
	require.Less(t, len(res.ResultPreview), 4<<10)
	page, err := turnclient.Events(ctx, e.Client(), run.GetID(), agent.EventsQuery{})
	require.NoError(t, err)
	var ended bool
	for _, ev := range page.Events {
		if ev.Kind == agent.EventToolEnd {
			ended = true
			require.Equal(t, agent.ToolOK, ev.Tool.Status)
			require.NotNil(t, ev.Tool.Data)
			require.Equal(t, res.DataRef, ev.Tool.Data.Ref)
			require.Contains(t, string(ev.Tool.Data.Sample[0]), "it was cut to fit the preview")
		}
	}
	require.True(t, ended, "a tool_end event")

	// One attempt of ExecuteTool, completed; a history of kilobytes.
	events := e.history(run.GetID())
	tool := countActivity(events, contract.ExecuteTool)
	require.Equal(t, activityEvents{scheduled: 1, started: 1, completed: 1, maxAttempt: 1}, tool)
	size := proto.Size(&historypb.History{Events: events})
	require.Less(t, size, 64<<10, "the history does not carry the row")
}

// TestCancelEndsStuckTool: a turn whose tool waits on an API that never
// answers is ended by Cancel: the cancellation reaches the tool call in
// flight, whose request is abandoned, and the turn ends CANCELED with
// the call recorded canceled and answered in the transcript. The call is
// not tried again, and ends before the tool's own 30 s limit would have
// made it an error.
func TestCancelEndsStuckTool(t *testing.T) {
	e, api := newPayloadEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "stuck-" + testserver.RandomID()
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
		TenantID: "demo", JobID: job, Prompt: "fetch from the stuck service"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return api.hangs.Load() > 0 }, time.Minute, 50*time.Millisecond, "the tool reaches the API")

	require.NoError(t, turnclient.Cancel(ctx, e.Client(), run.GetID(), agent.CancelRequest{RequestedBy: "ana", Reason: "the API is stuck"}))
	err = run.Get(ctx, nil)
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "the turn ends CANCELED, not with %v", err)
	res, ok := contract.FailedResult(err)
	require.True(t, ok, "the cancellation carries the result")
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.Equal(t, "the turn was cancelled by ana: the API is stuck", res.Error.Message)
	require.Len(t, res.Metadata.ToolCalls, 1)
	require.Equal(t, agent.ToolCanceled, res.Metadata.ToolCalls[0].Status)

	// The tool's request was abandoned, not waited for, and not made again.
	require.Eventually(t, func() bool { return api.abandoned.Load() == 1 }, time.Minute, 50*time.Millisecond)
	require.EqualValues(t, 1, api.hangs.Load())
	tool := countActivity(e.history(run.GetID()), contract.ExecuteTool)
	require.Equal(t, activityEvents{scheduled: 1, started: 1, canceled: 1, maxAttempt: 1}, tool)

	// The stored result says canceled, and the transcript answers the call.
	stored, err := e.Store().Result(ctx, "demo", job)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, stored.Status)
	steps, err := e.Store().Steps(ctx, "demo", job)
	require.NoError(t, err)
	require.Len(t, steps, 3, "the prompt, the model's call, the call's result")
	require.Equal(t, agent.RoleTool, steps[2].Role)
	require.Equal(t, "error: the turn was cancelled while the call ran", steps[2].Content)
	e.replay(run.GetID(), "turn_tool_canceled")
}
