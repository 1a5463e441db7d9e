package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// httpCall is one request to a test server's HTTP API.
type httpCall struct {
	ts *testserver.Server
}

// do sends body (nil: none) as token and answers the status and the
// decoded JSON answer.
func (h httpCall) do(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = strings.NewReader(string(raw))
	}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+h.ts.HTTPAPIAddr()+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	return resp.StatusCode, out
}

// waitTurn follows a turn's stream to its end and answers its text.
func waitTurn(t *testing.T, f fixture, ctx context.Context, streamID string) string {
	t.Helper()
	s, err := f.client.Resume(ctx, &pb.ResumeRequest{StreamId: streamID})
	require.NoError(t, err)
	events := collect(t, s)
	require.True(t, events[len(events)-1].Terminal())
	return agent.ReplayText(events)
}

// TestRetryTurn: "try again from here" replays a recorded turn with a
// person's edited tool result: the model is called again, the tool does
// not run (the retry's stored steps hold the edited result, never the
// calculator's), and the answer follows the edit. A turn of a session is
// retried in a fork made before it, which the session lists; bad
// requests are clear 400s and other tenants' turns are not found.
func TestRetryTurn(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Script: script, Catalogs: catalogs, HTTPAPI: true,
		Tokens: map[string]string{"tok-demo": "demo:user+approver+admin:ana", "tok-other": "other:user+approver+admin", "tok-user": "demo:user"}})
	f := fixture{client: pb.NewAgentServiceClient(ts.Conn), conn: ts.Conn, srv: ts}
	h := httpCall{ts: ts}
	ctx, cancel := context.WithTimeout(f.as("tok-user"), 2*time.Minute)
	defer cancel()
	st := ts.Store()

	res, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "rt-1", Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", res.GetOutput())
	callID := res.GetMetadata().GetToolCalls()[0].GetCallId()
	require.NotEmpty(t, callID)

	code, out := h.do(t, "POST", "/v1/turn/demo/rt-1/retry", "tok-user",
		map[string]any{"seq": 2, "results": []map[string]string{{"call_id": callID, "result": "99"}}})
	require.Equal(t, http.StatusOK, code, out)
	job := out["job_id"].(string)
	require.NotEqual(t, "rt-1", job)
	require.Equal(t, "turn/demo/"+job, out["stream_id"])
	require.Nil(t, out["session_id"], "a turn of no session is retried in none")
	require.Equal(t, "The result is 99.", waitTurn(t, f, ctx, out["stream_id"].(string)))

	turn, err := st.Turn(ctx, "demo", job)
	require.NoError(t, err)
	require.Equal(t, agent.ChannelRetry, turn.Request.Channel)
	require.Equal(t, &agent.Replay{JobID: "rt-1", Seq: 2, Results: []agent.ReplayResult{{CallID: callID, Result: "99"}}}, turn.Request.Replay)
	steps, err := st.Steps(ctx, "demo", job)
	require.NoError(t, err)
	var toolResults []string
	for _, m := range steps {
		if m.Role == agent.RoleTool {
			toolResults = append(toolResults, m.Content)
		}
	}
	require.Equal(t, []string{"99"}, toolResults, "the edited result, and no run of the calculator (42)")

	// A turn of a session: the retry runs in a fork made before it.
	for _, j := range []struct{ job, prompt string }{{"rs-1", "What is 1 + 1?"}, {"rs-2", "What is 2 * 3?"}} {
		_, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: j.job, SessionId: "conv-rt", Prompt: j.prompt}})
		require.NoError(t, err)
	}
	code, out = h.do(t, "POST", "/v1/turn/demo/rs-2/retry", "tok-user", map[string]any{"seq": 0})
	require.Equal(t, http.StatusOK, code, out)
	fork := out["session_id"].(string)
	require.True(t, strings.HasPrefix(fork, "conv-rt-retry-"), fork)
	require.Equal(t, "The result is 6.", waitTurn(t, f, ctx, out["stream_id"].(string)))
	msgs, err := st.SessionMessages(ctx, "demo", fork, 0)
	require.NoError(t, err)
	var contents []string
	for _, m := range msgs {
		contents = append(contents, m.Content)
	}
	require.Equal(t, []string{"What is 1 + 1?", "The result is 2.", "What is 2 * 3?", "The result is 6."}, contents)
	code, out = h.do(t, "GET", "/v1/conversations/conv-rt/forks", "tok-user", nil)
	require.Equal(t, http.StatusOK, code, out)
	forks := out["forks"].([]any)
	require.Len(t, forks, 1)
	require.Equal(t, fork, forks[0].(map[string]any)["session_id"])
	require.Equal(t, "rs-2", forks[0].(map[string]any)["forked_at_job"])
	code, out = h.do(t, "GET", "/v1/conversations/conv-rt/forks", "tok-other", nil)
	require.Equal(t, http.StatusOK, code, out)
	require.Empty(t, out["forks"], "another tenant's session of the same name has none")

	for _, tc := range []struct {
		name, path, token string
		body              any
		code              int
		want              string
	}{
		{"another tenant's token", "/v1/turn/demo/rt-1/retry", "tok-other", map[string]any{"seq": 1}, http.StatusNotFound, "not found"},
		{"another tenant in the path", "/v1/turn/other/rt-1/retry", "tok-user", map[string]any{"seq": 1}, http.StatusNotFound, "not found"},
		{"no such turn", "/v1/turn/demo/nope/retry", "tok-user", map[string]any{"seq": 1}, http.StatusNotFound, "not found"},
		{"unknown member", "/v1/turn/demo/rt-1/retry", "tok-user", `{"seq": 1, "tools": []}`, http.StatusBadRequest, `unknown member "tools"`},
		{"no seq", "/v1/turn/demo/rt-1/retry", "tok-user", `{"prompt": "x"}`, http.StatusBadRequest, "body.seq is required"},
		{"seq not a number", "/v1/turn/demo/rt-1/retry", "tok-user", `{"seq": "2"}`, http.StatusBadRequest, "body.seq: want an integer"},
		{"unknown member of a result", "/v1/turn/demo/rt-1/retry", "tok-user", `{"seq": 1, "results": [{"call_id": "a", "text": "x"}]}`,
			http.StatusBadRequest, "body.results"},
		{"a call twice", "/v1/turn/demo/rt-1/retry", "tok-user",
			map[string]any{"seq": 1, "results": []map[string]string{{"call_id": "a", "result": "1"}, {"call_id": "a", "result": "2"}}},
			http.StatusBadRequest, "given twice"},
		{"a model the agent does not allow", "/v1/turn/demo/rt-1/retry", "tok-user", map[string]any{"seq": 1, "model": "openai:gpt-5"},
			http.StatusForbidden, "openai:gpt-5"},
		{"not a body", "/v1/turn/demo/rt-1/retry", "tok-user", `[1]`, http.StatusBadRequest, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := h.do(t, "POST", tc.path, tc.token, tc.body)
			require.Equal(t, tc.code, code, out)
			require.Contains(t, out["detail"], tc.want)
		})
	}
	code, _ = h.do(t, "GET", "/v1/turn/demo/rt-1/retry", "tok-user", nil)
	require.Equal(t, http.StatusMethodNotAllowed, code)
}
