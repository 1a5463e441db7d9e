package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/timeline"
)

// seedTimelineTurn writes a turn of tenant demo as the worker does: the
// prompt, a reply its second attempt stored asking for a call behind
// approval, the call's result and the answer.
func seedTimelineTurn(t *testing.T, st *store.Store, job string) {
	t.Helper()
	ctx := t.Context()
	_, err := st.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", DefaultAgent: "assistant",
		Agents: []agent.Agent{{ID: "assistant", Model: "openai:gpt-4o-mini", SystemPrompt: "Be kind to ana."}}}}}, false)
	require.NoError(t, err)
	ag, err := st.ActiveAgent(ctx, "demo", "assistant")
	require.NoError(t, err)
	req := agent.TurnRequest{Version: agent.ProtocolVersion, JobID: job, TenantID: "demo", Prompt: "mail ana"}
	require.NoError(t, st.BeginTurn(ctx, store.Turn{TenantID: "demo", JobID: job, WorkflowID: "turn/demo/" + job, AgentID: "assistant",
		AgentVersion: ag.Version, Request: req, Prompt: &agent.Message{Role: agent.RoleUser, Content: req.Prompt}}))
	call := store.ModelCall{TenantID: "demo", JobID: job, Step: 1, Attempt: 2, AgentID: "assistant", AgentVersion: ag.Version,
		Model: "openai:gpt-4o-mini", Usage: agent.Usage{PromptTokens: 50, CompletionTokens: 5}, Unbudgeted: true}
	require.NoError(t, st.PutReply(ctx, call, agent.Message{Role: agent.RoleAssistant,
		ToolCalls: []agent.ToolCall{{ID: "call-1", Name: "send_mail", Arguments: `{"to":"ana"}`}}}))
	require.NoError(t, st.RecordApproval(ctx, agent.ApprovalRecord{TenantID: "demo", JobID: job, CallID: "call-1", Tool: "send_mail",
		Outcome: agent.ApprovalApproved, Approver: "ana", Via: "signal", ApprovalID: "ap-1", RequestedAt: time.Now().Add(-time.Second), DecidedAt: time.Now()}))
	require.NoError(t, st.PutStep(ctx, "demo", job, 2, agent.Message{Role: agent.RoleTool, ToolCallID: "call-1", Name: "send_mail", Content: "sent"}))
	call.Step, call.Attempt = 3, 1
	require.NoError(t, st.PutReply(ctx, call, agent.Message{Role: agent.RoleAssistant, Content: "Mailed ana."}))
}

// TestTimelineRoutes: a turn's timeline and a model call's request over
// HTTP, with the turn's run from the real Temporal server; another
// tenant's turn is not found, bad parameters are 400, and only an admin
// reads the system prompt.
func TestTimelineRoutes(t *testing.T) {
	ctx := t.Context()
	logger := zaptest.NewLogger(t)
	st, err := store.Open(ctx, devtest.Database(t), store.Options{Logger: logger})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	job := "tl-" + testserver.RandomID()

	// The turn's run: a workflow of its id that no worker takes.
	addr, ns := devtest.Temporal(t)
	tc, err := client.Dial(client.Options{HostPort: addr, Namespace: ns})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "turn/demo/" + job, TaskQueue: "timeline-" + testserver.RandomID()}, "AgentTurn")
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test over") })
	seedTimelineTurn(t, st, job) // the run began before the turn's steps

	var tokens []gateway.Token
	for _, tk := range []struct {
		secret, tenant string
		roles          []gateway.Role
	}{{"tok-user", "demo", []gateway.Role{gateway.RoleUser}}, {"tok-admin", "demo", []gateway.Role{gateway.RoleUser, gateway.RoleAdmin}},
		{"tok-other", "other", []gateway.Role{gateway.RoleUser, gateway.RoleAdmin}}} {
		tok, err := gateway.NewToken(tk.secret, tk.tenant, tk.secret, tk.roles...)
		require.NoError(t, err)
		tokens = append(tokens, tok)
	}
	svc, err := gateway.New(gateway.Options{Client: tc, Store: st, Tokens: tokens, Logger: logger,
		Timeline: gateway.TimelineOptions{WebUIURL: "http://127.0.0.1:8233", Namespace: ns, TraceURL: "http://trace.test/t?run={run_id}"}})
	require.NoError(t, err)
	api, err := gateway.NewHTTPAPI(svc, nil, gateway.HTTPOptions{})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- api.Serve() }()
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		api.Stop(0)
		require.NoError(t, <-done)
	})
	fetch := func(token, path string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	get := func(token, path string) (int, []byte) {
		t.Helper()
		code, body, err := fetch(token, path)
		require.NoError(t, err)
		return code, body
	}
	base := "/v1/turn/demo/" + job + "/timeline"

	t.Run("timeline", func(t *testing.T) {
		var tl timeline.Timeline
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body, err := fetch("tok-user", base)
			require.NoError(c, err)
			require.Equal(c, http.StatusOK, code, "%s", body)
			require.NoError(c, json.Unmarshal(body, &tl))
			require.Len(c, tl.Runs, 1)
		}, 20*time.Second, 100*time.Millisecond, "the run shows once visibility has it")
		require.Equal(t, "running", tl.Status)
		require.Equal(t, run.GetRunID(), tl.Runs[0].RunID)
		require.Equal(t, "Running", tl.Runs[0].Status)
		require.Equal(t, "http://127.0.0.1:8233/namespaces/"+ns+"/workflows/turn%2Fdemo%2F"+job+"/"+run.GetRunID()+"/history", tl.Links.WebUI)
		require.Equal(t, "http://trace.test/t?run="+run.GetRunID(), tl.Links.Trace)
		require.Equal(t, timeline.Totals{Steps: 4, ModelCalls: 2, ToolCalls: 1, Retries: 1, Approvals: 1, InputTokens: 100, OutputTokens: 10,
			DurationMs: tl.Totals.DurationMs}, tl.Totals)
		require.Len(t, tl.Items, 4)
		require.Equal(t, 2, tl.Items[1].Attempt)
		require.Equal(t, 1, tl.Items[1].Retries)
		mail := tl.Items[2].Tool
		require.Equal(t, `{"to":"ana"}`, string(mail.Args))
		require.Equal(t, "approved", mail.Approval.Outcome)
		require.Equal(t, "ana", mail.Approval.Approver)
		for _, it := range tl.Items {
			require.Equal(t, 0, it.Run)
		}

		code, body := get("tok-user", base+"?after=1&limit=1")
		require.Equal(t, http.StatusOK, code, "%s", body)
		require.NoError(t, json.Unmarshal(body, &tl))
		require.Len(t, tl.Items, 1)
		require.Equal(t, 2, tl.Items[0].Seq)
		require.Equal(t, 2, *tl.NextAfter)
	})

	t.Run("refused", func(t *testing.T) {
		_, unknown := get("tok-user", "/v1/turn/demo/nope/timeline")
		for _, tc := range []struct {
			name, token, path string
			status            int
			detail            string
		}{
			{"another tenant's token", "tok-other", base, http.StatusNotFound, `turn \"` + job + `\" not found`},
			{"another tenant in the path", "tok-other", "/v1/turn/other/" + job + "/timeline", http.StatusNotFound, `turn \"` + job + `\" not found`},
			{"another tenant's request", "tok-other", base + "/steps/1/request", http.StatusNotFound, `turn \"` + job + `\" not found`},
			{"no such turn", "tok-user", "/v1/turn/demo/nope/timeline", http.StatusNotFound, `turn \"nope\" not found`},
			{"limit too large", "tok-user", base + "?limit=1001", http.StatusBadRequest, `limit \"1001\": want 1 to 1000`},
			{"limit zero", "tok-user", base + "?limit=0", http.StatusBadRequest, `limit \"0\": want 1 to 1000`},
			{"after not a number", "tok-user", base + "?after=x", http.StatusBadRequest, `after \"x\": want -1`},
			{"after too small", "tok-user", base + "?after=-2", http.StatusBadRequest, `after \"-2\": want -1`},
			{"unknown parameter", "tok-user", base + "?page=2", http.StatusBadRequest, `unknown query parameter \"page\"`},
			{"bad seq", "tok-user", base + "/steps/x/request", http.StatusBadRequest, `step \"x\": want a step's seq`},
			{"not a model call", "tok-user", base + "/steps/2/request", http.StatusNotFound, "step 2 of turn"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, body := get(tc.token, tc.path)
				require.Equal(t, tc.status, code, "%s", body)
				require.Contains(t, string(body), tc.detail)
			})
		}
		// Another tenant's turn answers as a turn that does not exist.
		_, other := get("tok-other", "/v1/turn/other/nope/timeline")
		require.JSONEq(t, string(unknown), string(other))
	})

	t.Run("request", func(t *testing.T) {
		for _, tc := range []struct {
			token  string
			prompt string
			hidden bool
		}{{"tok-admin", "Be kind to ana.", false}, {"tok-user", "", true}} {
			code, body := get(tc.token, base+"/steps/3/request")
			require.Equal(t, http.StatusOK, code, "%s", body)
			var req timeline.Request
			require.NoError(t, json.Unmarshal(body, &req))
			require.Equal(t, 3, req.Seq)
			require.Equal(t, tc.prompt, req.SystemPrompt)
			require.Equal(t, tc.hidden, req.SystemPromptHidden)
			require.Equal(t, "openai:gpt-4o-mini", req.Model)
			require.Len(t, req.Messages, 3, "the prompt, the reply and the result")
			require.Equal(t, "mail ana", req.Messages[0].Content)
		}
	})
}
