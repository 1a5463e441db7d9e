package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
)

// jobReuseCatalog is the HTTP tests' tenant demo with its assistant
// served over AG-UI too.
var jobReuseCatalog = strings.Replace(httpCatalogs[0], "    tools: [calculator]\n", "    tools: [calculator]\n    expose: [ag_ui]\n", 1)

// TestRefusedJobReuseChangesNothing: a job id names one request. A key
// reused in another session (OpenAI's Idempotency-Key) or on another
// thread (AG-UI's runId) is refused with 409, and the refusal leaves the
// turn the key names as it was: its workflow has one run, the completed
// one, and the first request sent again still attaches to it.
func TestRefusedJobReuseChangesNothing(t *testing.T) {
	require.Contains(t, jobReuseCatalog, "expose: [ag_ui]")
	token := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: openAIScript, Catalogs: []string{jobReuseCatalog, httpCatalogs[1]}, HTTPAPI: true,
		Tokens: map[string]string{token: "demo:user:uma"}})
	api := "http://" + srv.HTTPAPIAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// latestRun is the run id of the job's workflow's latest run, which
	// every attach reads; it must be a completed one.
	latestRun := func(job string) string {
		t.Helper()
		// The answer comes once the result is stored; the workflow closes
		// when the task that logs its end completes.
		_ = srv.Client().GetWorkflow(ctx, contract.TurnWorkflowID("demo", job), "").Get(ctx, nil)
		desc, err := srv.Client().DescribeWorkflowExecution(ctx, contract.TurnWorkflowID("demo", job), "")
		require.NoError(t, err)
		info := desc.GetWorkflowExecutionInfo()
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, info.GetStatus())
		return info.GetExecution().GetRunId()
	}

	t.Run("OpenAI Idempotency-Key in another session", func(t *testing.T) {
		c := openai.NewClient(option.WithBaseURL(api+"/v1"), option.WithAPIKey(token), option.WithMaxRetries(0))
		key := option.WithHeader("Idempotency-Key", "k-"+testserver.RandomID())
		inA := option.WithHeader("X-Agentflow-Session", "a-"+testserver.RandomID())
		inB := option.WithHeader("X-Agentflow-Session", "b-"+testserver.RandomID())
		params := openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("My name is Ada.")}

		first, err := c.Chat.Completions.New(ctx, params, inA, key)
		require.NoError(t, err)
		require.Equal(t, "Nice to meet you, Ada.", first.Choices[0].Message.Content)
		firstRun := latestRun(first.ID)

		_, err = c.Chat.Completions.New(ctx, params, inB, key)
		apiErr := requireAPIError(t, err, http.StatusConflict, "Conflict")
		require.Contains(t, apiErr.Message, "names a turn that another request started")
		// Refused twice the same way: session B kept nothing of it.
		_, err = c.Chat.Completions.New(ctx, params, inB, key)
		requireAPIError(t, err, http.StatusConflict, "Conflict")

		again, err := c.Chat.Completions.New(ctx, params, inA, key)
		require.NoError(t, err, "the first request's retry attaches to its turn")
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, first.Choices[0].Message.Content, again.Choices[0].Message.Content)
		require.Equal(t, firstRun, latestRun(first.ID), "the refusals started no run")
	})

	t.Run("AG-UI runId on another thread", func(t *testing.T) {
		run := "r-" + testserver.RandomID()
		post := func(thread string) (int, string) {
			t.Helper()
			body := `{"threadId":"` + thread + `","runId":"` + run + `","state":{},"tools":[],"context":[],"forwardedProps":{},` +
				`"messages":[{"id":"m1","role":"user","content":"My name is Ada."}]}`
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/ag-ui/assistant", strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(data)
		}
		threadA, threadB := "ta-"+testserver.RandomID(), "tb-"+testserver.RandomID()
		status, first := post(threadA)
		require.Equal(t, http.StatusOK, status, first)
		require.Contains(t, first, "Nice to meet you, Ada.")
		require.Contains(t, first, `"type":"RUN_FINISHED"`)
		firstRun := latestRun(run)

		status, body := post(threadB)
		require.Equal(t, http.StatusConflict, status, body)
		require.Contains(t, body, "names a turn that another request started")

		status, again := post(threadA)
		require.Equal(t, http.StatusOK, status, again)
		require.Contains(t, again, "Nice to meet you, Ada.")
		require.Contains(t, again, `"type":"RUN_FINISHED"`)
		require.Equal(t, firstRun, latestRun(run), "the refusal started no run")
	})
}
