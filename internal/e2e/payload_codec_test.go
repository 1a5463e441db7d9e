package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/payloadstore"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// codecScript fetches the API's rows (API stands for its URL) and says
// how many bytes the request held.
const codecScript = `
rules:
  - name: rows
    when: {user: '^fetch the rows'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "API/rows"}]}'
  - name: fetched
    when: {tool: 'row-0'}
    reply: {text: 'Fetched the rows.'}
  - name: fallback
    reply: {text: "I don't know."}
`

// codecThreshold is the payload threshold of the test's store, low
// enough that the tool's result is over it: a tool's output travels by
// cas:// reference with a bounded preview, so its result is a few KiB.
const codecThreshold = 1 << 10

// codecRequest is a request of about 2.6 MiB (a prompt and twelve text
// parts of 200 KiB each): over the Temporal server's 2 MiB limit of a
// payload.
func codecRequest(jobID string) agent.TurnRequest {
	filler := strings.Repeat("lorem ipsum ", 200<<10/12)
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: jobID, Prompt: "fetch the rows " + filler}
	for range 12 {
		req.Parts = append(req.Parts, agent.Part{Type: agent.PartText, Text: filler})
	}
	return req
}

// TestPayloadCodec: with an object store, a turn whose request is over
// Temporal's own limit of a payload (which a client without the store is
// refused) and whose tool result is over the store's threshold
// completes; its history holds references, which the temporal CLI shows,
// not the bytes; a start of the same job finds the same request in a run
// whose request is a reference; and a store that is down when a worker reads a
// reference fails the workflow task clearly, which Temporal retries
// until the store is back.
func TestPayloadCodec(t *testing.T) {
	row := `[` + strings.Repeat(`{"id":"row-0","text":"`+strings.Repeat("x", 1000)+`"},`, 40) + `{"id":"last"}]`
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(row))
	}))
	t.Cleanup(api.Close)
	cfg := devtest.ObjectStore(t)
	store := devtest.StartProxy(t, strings.TrimPrefix(cfg.Endpoint, "http://"))
	cfg.Endpoint, cfg.MinPayloadBytes = "http://"+store.Addr(), codecThreshold
	srv := testserver.Start(t, testserver.Options{
		Script:            strings.ReplaceAll(codecScript, "API", api.URL),
		Catalogs:          []string{strings.ReplaceAll(payloadCatalog, "API", strings.TrimPrefix(api.URL, "http://"))},
		ObjectStoreConfig: cfg,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	req := codecRequest("codec-" + testserver.RandomID())
	// Without the store, the server refuses the request.
	plain, err := client.DialContext(ctx, client.Options{HostPort: srv.Address, Namespace: srv.Namespace, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.ExecuteWorkflow(ctx, turnclient.StartOptions(srv.TaskQueue, req), "AgentTurn", req)
	require.ErrorContains(t, err, "Blob data size exceeds limit")

	// With it, the turn completes.
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "Fetched the rows.", res.Output)

	// The history holds references, not the bytes: the request's and the
	// tool result's.
	events := testserver.History(ctx, t, srv.Client(), run.GetID(), run.GetRunID())
	sizes := historySizes(t, events)
	t.Logf("history of a %d-byte request: %d bytes in %d events, %d references, largest inline payload %d bytes",
		proto.Size(mustPayloads(t, req)), sizes.total, len(events), sizes.references, sizes.largestInline)
	require.Less(t, sizes.largestInline, codecThreshold)
	require.Less(t, sizes.total, 256<<10, "the history does not grow with the request")
	input := events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	require.True(t, payloadstore.IsReference(input))
	require.True(t, toolResultIsReference(events), "the tool's result is a reference")
	claim, _, err := payloadstore.ParseReference(input)
	require.NoError(t, err)
	require.Greater(t, claim.Size, int64(2<<20))

	// The CLI shows the result's reference, as JSON.
	result := events[len(events)-1].GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()[0]
	resultClaim, ok, err := payloadstore.ParseReference(result)
	require.NoError(t, err)
	require.True(t, ok)
	out, err := srv.Temporal("workflow", "show", "--workflow-id", run.GetID())
	require.NoError(t, err, out)
	require.Contains(t, out, `"driverName":"agentflow-s3"`)
	require.Contains(t, out, `"uri":"s3://`+cfg.Bucket+"/"+resultClaim.Key+`"`)

	// A run started without its request's hash in the memo (a
	// Conversation's or a process's child turn) is compared by its input,
	// a reference read from the store: the same request attaches to it.
	child := codecRequest("codec-child-" + testserver.RandomID())
	childOpts := turnclient.StartOptions(srv.TaskQueue, child)
	childOpts.Memo = nil
	first, err := srv.Client().ExecuteWorkflow(ctx, childOpts, "AgentTurn", child)
	require.NoError(t, err)
	objects, err := objstore.New(ctx, cfg)
	require.NoError(t, err)
	again, err := turnclient.StartWith(ctx, srv.Client(), payloadstore.Converter(payloadstore.New(objects)), srv.TaskQueue, child)
	require.NoError(t, err)
	require.Equal(t, first.GetRunID(), again.GetRunID())
	res, err = turnclient.Result(ctx, again)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)

	// A store that is down when the worker reads a reference: the
	// workflow task fails, saying why, and is retried until it is back.
	late := codecRequest("codec-down-" + testserver.RandomID())
	opts := turnclient.StartOptions(srv.TaskQueue, late)
	opts.EnableEagerStart, opts.StartDelay = false, 2*time.Second
	run, err = srv.Client().ExecuteWorkflow(ctx, opts, "AgentTurn", late)
	require.NoError(t, err)
	store.Down()
	var failure string
	require.Eventually(t, func() bool {
		for _, ev := range testserver.History(ctx, t, srv.Client(), run.GetID(), run.GetRunID()) {
			if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil {
				failure = a.GetFailure().GetMessage()
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "the workflow task fails while the store is down")
	require.Contains(t, failure, `storage driver "agentflow-s3" retrieve failed`)
	require.Contains(t, failure, "object store")
	t.Logf("workflow task failure while the store is down: %s", failure)
	desc, err := srv.Client().DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus(), "the turn waits, it does not fail")
	store.Up(t)
	upAt := time.Now()
	res, err = turnclient.Result(ctx, run)
	t.Logf("the turn completed %s after the store came back", time.Since(upAt).Round(time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
}

type payloadSizes struct {
	total, references, largestInline int
}

// historySizes measures a history: its serialized size, how many
// payloads are references, and the largest other payload.
func historySizes(t *testing.T, events []*historypb.HistoryEvent) payloadSizes {
	t.Helper()
	var s payloadSizes
	for _, ev := range events {
		s.total += proto.Size(ev)
		err := proxy.VisitPayloads(context.Background(), ev, proxy.VisitPayloadsOptions{
			Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
				for _, p := range ps {
					if payloadstore.IsReference(p) {
						s.references++
					} else {
						s.largestInline = max(s.largestInline, proto.Size(p))
					}
				}
				return ps, nil
			},
		})
		require.NoError(t, err)
	}
	return s
}

// toolResultIsReference reports whether an ExecuteTool's result in
// events is a reference.
func toolResultIsReference(events []*historypb.HistoryEvent) bool {
	tools := map[int64]bool{}
	for _, ev := range events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "ExecuteTool" {
			tools[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && tools[a.GetScheduledEventId()] {
			if ps := a.GetResult().GetPayloads(); len(ps) == 1 && payloadstore.IsReference(ps[0]) {
				return true
			}
		}
	}
	return false
}

func mustPayloads(t *testing.T, v any) *commonpb.Payloads {
	t.Helper()
	p, err := payloadstore.Converter(nil).ToPayloads(v)
	require.NoError(t, err)
	return p
}
