package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/chatpage"
	"github.com/agentflow/agentflow/internal/gateway"
)

// TestChatDevToken: the chat page's dev token must be one of the
// gateway's tokens, and the page then offers it with its tenant; a
// gateway without one offers nothing.
func TestChatDevToken(t *testing.T) {
	tok, err := gateway.NewToken("local-7c2e", "demo", "dev", gateway.AllRoles()...)
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{Tokens: []gateway.Token{tok}, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)

	_, err = gateway.NewHTTPAPI(svc, nil, gateway.HTTPOptions{ChatDevToken: "not-a-token"})
	require.ErrorContains(t, err, "the chat page's dev token (AGENTFLOW_CHAT_DEV_TOKEN) is none of the gateway's tokens")

	get := func(srv *httptest.Server) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + chatpage.DevPath)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	api, err := gateway.NewHTTPAPI(svc, nil, gateway.HTTPOptions{ChatDevToken: "local-7c2e"})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- api.Serve() }()
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		api.Stop(0)
		require.NoError(t, <-done)
	})
	status, body := get(srv)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"token": "local-7c2e", "tenant": "demo"}`, body)

	status, _ = get(startHTTPAPI(t))
	require.Equal(t, http.StatusNotFound, status, "no dev token: the page offers none")
}
