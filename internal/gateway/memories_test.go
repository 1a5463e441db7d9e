package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/store"
)

// TestMemoriesRoutes: a caller lists and deletes its own memories only,
// erases all of them (nothing of it is left in the tables), an admin
// erases a named user's, and bad requests are clear errors.
func TestMemoriesRoutes(t *testing.T) {
	logger := zaptest.NewLogger(t)
	ctx := t.Context()
	st, err := store.Open(ctx, devtest.Database(t), store.Options{Logger: logger})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	ks, err := knowledge.New(ctx, st.Pool(), knowledge.Options{})
	require.NoError(t, err)
	model, err := scripted.Start("127.0.0.1:0", scripted.Demo(), scripted.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = model.Close() })
	emb, err := llm.New(llm.Config{OpenAIBaseURL: model.URL()})
	require.NoError(t, err)
	mem := ks.Memories(emb, "openai:text-embedding-3-small")

	tokens := map[string]gateway.Token{}
	for _, tk := range []struct {
		secret, tenant, name string
		role                 gateway.Role
	}{
		{"tok-alice", "demo", "alice", gateway.RoleUser}, {"tok-bob", "demo", "bob", gateway.RoleUser},
		{"tok-other", "other", "alice", gateway.RoleUser}, {"tok-admin", "demo", "root", gateway.RoleAdmin},
	} {
		tok, err := gateway.NewToken(tk.secret, tk.tenant, tk.name, tk.role)
		require.NoError(t, err)
		tokens[tk.secret] = tok
	}
	scope := func(secret, agentID string) agent.MemoryScope {
		tok := tokens[secret]
		return agent.MemoryScope{Tenant: tok.Tenant, AgentID: agentID, User: tok.Caller().Principal()}
	}
	remember := func(s agent.MemoryScope, text string) agent.MemoryRecord {
		m, _, err := mem.Remember(ctx, s, agent.MemoryRecord{Text: text, Source: agent.MemoryRemembered})
		require.NoError(t, err)
		return m
	}
	tea := remember(scope("tok-alice", "assistant"), "prefers tea")
	remember(scope("tok-alice", "ops"), "is on call on Mondays")
	bobs := remember(scope("tok-bob", "assistant"), "prefers coffee")
	remember(scope("tok-other", "assistant"), "prefers water")

	var list []gateway.Token
	for _, tok := range tokens {
		list = append(list, tok)
	}
	svc, err := gateway.New(gateway.Options{Store: st, Tokens: list, Logger: logger, Memories: mem})
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
	do := func(method, token, path string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, data
	}
	memories := func(token, query string) gateway.MemoryList {
		t.Helper()
		resp, data := do(http.MethodGet, token, "/v1/memories"+query)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
		var out gateway.MemoryList
		require.NoError(t, json.Unmarshal(data, &out))
		return out
	}

	got := memories("tok-alice", "")
	require.Len(t, got.Memories, 2)
	require.Equal(t, "is on call on Mondays", got.Memories[0].Text)
	require.Equal(t, "ops", got.Memories[0].AgentID)
	require.Len(t, memories("tok-alice", "?agent_id=assistant").Memories, 1)
	page := memories("tok-alice", "?limit=1")
	require.Len(t, page.Memories, 1)
	require.Equal(t, tea.ID, memories("tok-alice", "?limit=1&before="+page.Next).Memories[0].ID)
	// The same name in another tenant is another user.
	require.Equal(t, "prefers water", memories("tok-other", "").Memories[0].Text)

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, token, path string
			status                    int
			title, detail             string
		}{
			{"another user's memory", http.MethodDelete, "tok-alice", "/v1/memories/" + bobs.ID, http.StatusNotFound, agent.ErrTypeNotFound, "not found"},
			{"another tenant's user", http.MethodDelete, "tok-other", "/v1/memories/" + tea.ID, http.StatusNotFound, agent.ErrTypeNotFound, "not found"},
			{"not a memory id", http.MethodDelete, "tok-alice", "/v1/memories/doc_1", http.StatusBadRequest, agent.ErrTypeInvalidRequest, "not a memory id"},
			{"unknown parameter", http.MethodGet, "tok-alice", "/v1/memories?user=bob", http.StatusBadRequest, agent.ErrTypeInvalidRequest, "unknown query parameter"},
			{"bad limit", http.MethodGet, "tok-alice", "/v1/memories?limit=0", http.StatusBadRequest, agent.ErrTypeInvalidRequest, "want 1 to 1000"},
			{"bad before", http.MethodGet, "tok-alice", "/v1/memories?before=x", http.StatusBadRequest, agent.ErrTypeInvalidRequest, "not a memory id"},
			{"a user erasing another's", http.MethodDelete, "tok-alice", "/v1/memories?subject=bob", http.StatusForbidden, agent.ErrTypePermissionDenied, "admin"},
			{"an admin naming nobody", http.MethodDelete, "tok-admin", "/v1/memories?issuer=x", http.StatusBadRequest, agent.ErrTypeInvalidRequest, "subject is required"},
			{"no token", http.MethodGet, "", "/v1/memories", http.StatusUnauthorized, agent.ErrTypeUnauthenticated, "missing bearer token"},
			{"another method", http.MethodPost, "tok-alice", "/v1/memories", http.StatusMethodNotAllowed, "", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, data := do(tc.method, tc.token, tc.path)
				if tc.title == "" {
					require.Equal(t, tc.status, resp.StatusCode, "%s", data)
					return
				}
				requireProblem(t, resp, data, tc.status, tc.title, tc.detail)
			})
		}
	})

	resp, data := do(http.MethodDelete, "tok-alice", "/v1/memories/"+tea.ID)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", data)
	require.Len(t, memories("tok-alice", "").Memories, 1)

	// Erase: all of Alice's memories, rows and vectors; nobody else's.
	resp, data = do(http.MethodDelete, "tok-alice", "/v1/memories")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	require.JSONEq(t, `{"deleted":1}`, string(data))
	require.Empty(t, memories("tok-alice", "").Memories)
	var left int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM knowledge_documents d JOIN knowledge_collections c ON c.id = d.collection_id
			WHERE c.tenant_id LIKE 'demo%' AND d.metadata->>'user' = $1) +
		(SELECT count(*) FROM knowledge_chunks k JOIN knowledge_collections c ON c.id = k.collection_id
			WHERE c.tenant_id LIKE 'demo%' AND (k.metadata->>'user' = $1 OR k.text LIKE '%Mondays%' OR k.text = 'prefers tea'))`,
		tokens["tok-alice"].Caller().Principal()).Scan(&left))
	require.Zero(t, left)
	require.Len(t, memories("tok-bob", "").Memories, 1)
	require.Len(t, memories("tok-other", "").Memories, 1)

	// An admin erases a named user of its own tenant.
	resp, data = do(http.MethodDelete, "tok-admin", "/v1/memories?subject=bob")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	require.JSONEq(t, `{"deleted":1}`, string(data))
	require.Empty(t, memories("tok-bob", "").Memories)
	require.Len(t, memories("tok-other", "").Memories, 1)
}
