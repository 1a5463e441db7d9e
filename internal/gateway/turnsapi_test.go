package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestTurnsList: GET /v1/turns lists the caller's tenant's turns newest
// first with their outcome and sums, filters them and pages with the
// cursor it gives; bad queries are 400s; POST /v1/turns still starts a
// turn (the grpc-gateway's route behind the root mux's GET).
func TestTurnsList(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Script: script, Catalogs: catalogs, HTTPAPI: true,
		Tokens: map[string]string{"tok-demo": "demo:user+approver+admin:ana", "tok-other": "other:user+approver+admin", "tok-user": "demo:user"}})
	f := fixture{client: pb.NewAgentServiceClient(ts.Conn), conn: ts.Conn, srv: ts}
	h := httpCall{ts: ts}
	ctx, cancel := context.WithTimeout(f.as("tok-user"), 2*time.Minute)
	defer cancel()

	_, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "tl-1", Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	_, err = f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "tl-2", AgentId: "writer", SessionId: "tl-conv", Prompt: "hi"}})
	require.NoError(t, err)

	// POST /v1/turns is the Start RPC's, as before.
	code, out := h.do(t, "POST", "/v1/turns", "tok-user", map[string]any{"job_id": "tl-3", "prompt": "hello"})
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "turn/demo/tl-3", out["stream_id"])
	waitTurn(t, f, ctx, "turn/demo/tl-3")

	list := func(query string) []map[string]any {
		t.Helper()
		code, out := h.do(t, "GET", "/v1/turns"+query, "tok-user", nil)
		require.Equal(t, http.StatusOK, code, out)
		var rows []map[string]any
		for _, r := range out["turns"].([]any) {
			rows = append(rows, r.(map[string]any))
		}
		return rows
	}
	jobs := func(rows []map[string]any) []string {
		out := []string{}
		for _, r := range rows {
			out = append(out, r["job_id"].(string))
		}
		return out
	}
	all := list("")
	require.Equal(t, []string{"tl-3", "tl-2", "tl-1"}, jobs(all))
	first := all[2]
	require.Equal(t, "turn/demo/tl-1", first["stream_id"])
	require.Equal(t, "assistant", first["agent_id"])
	require.Equal(t, agent.StatusCompleted, first["status"])
	require.Equal(t, agent.ChannelGRPC, first["channel"])
	require.Equal(t, "What is 6 * 7?", first["prompt"])
	require.EqualValues(t, 2, first["model_calls"], "the call, and the answer")
	require.EqualValues(t, 1, first["tool_calls"])
	require.Positive(t, first["input_tokens"])
	require.NotEmpty(t, first["ended_at"])
	require.Equal(t, agent.ChannelHTTP, all[0]["channel"])

	for _, tc := range []struct{ query, want string }{
		{"?agent_id=writer", "tl-2"},
		{"?session_id=tl-conv", "tl-2"},
		{"?channel=http", "tl-3"},
		{"?status=completed&agent_id=assistant&channel=grpc", "tl-1"},
		{"?since=" + url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339)) + "&min_cost=0&agent_id=writer", "tl-2"},
	} {
		t.Run(tc.query, func(t *testing.T) { require.Equal(t, []string{tc.want}, jobs(list(tc.query))) })
	}
	require.Empty(t, list("?status=running"))
	require.Empty(t, list("?until=2000-01-01T00:00:00Z"))

	// Pages, by the cursor each gives.
	code, out = h.do(t, "GET", "/v1/turns?limit=2", "tok-user", nil)
	require.Equal(t, http.StatusOK, code, out)
	require.Len(t, out["turns"], 2)
	next := out["next"].(string)
	require.Equal(t, []string{"tl-1"}, jobs(list("?limit=2&before="+url.QueryEscape(next))))

	code, out = h.do(t, "GET", "/v1/turns", "tok-other", nil)
	require.Equal(t, http.StatusOK, code, out)
	require.Empty(t, out["turns"], "another tenant's list has none of demo's")

	for _, tc := range []struct{ query, want string }{
		{"?status=done", `status "done"`},
		{"?limit=0", `limit "0"`},
		{"?limit=201", `limit "201"`},
		{"?min_cost=-1", `min_cost "-1"`},
		{"?since=yesterday", `since "yesterday"`},
		{"?before=not-a-cursor", "is not a cursor"},
		{"?channel=fax", `channel "fax"`},
		{"?colour=red", `unknown query parameter "colour"`},
		{"?limit=1&limit=2", "given 2 times"},
	} {
		t.Run("bad "+tc.query, func(t *testing.T) {
			code, out := h.do(t, "GET", "/v1/turns"+tc.query, "tok-user", nil)
			require.Equal(t, http.StatusBadRequest, code, out)
			require.Contains(t, out["detail"], tc.want)
		})
	}
}
