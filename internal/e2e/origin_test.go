package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/testissuer"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// originCatalog: tenant acme, whose desk agent MCP clients call, and
// whose careful agent's calculator waits for a person.
const originCatalog = `
tenant: acme
default_agent: desk
tools:
  - {name: calculator, kind: calculator}
  - {name: careful_calculator, kind: calculator, approval: always}
agents:
  - {id: desk, model: openai:gpt-4o-mini, tools: [calculator], expose: [mcp]}
  - id: careful
    model: openai:gpt-4o-mini
    tools: [careful_calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
`

// mcpRaw sends one MCP request over HTTP in session with token, and
// returns the status and the body.
func mcpRaw(t *testing.T, ctx context.Context, api, method, token, session string, header map[string]string, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, api+mcpdoor.MCPPath, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Session-Id", session)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

// TestIdentityKeepsItsOrigin: an identity provider's user whose mapped
// name is a static token's ("aap", the name claim being the email) is
// another caller. It cannot use the MCP session the token's holder
// opened, nor get the result of a call made in it — by sending the call
// again in the session, or by resuming its stream on a gateway that does
// not hold the session — nor attach to a turn the token's holder started
// with the same job id. Approvals and grants are recorded with the
// issuer and subject of whoever made them.
func TestIdentityKeepsItsOrigin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	iss := testissuer.Start(t)
	claims, err := oidcauth.ParseClaims("tenant=org_id,roles=groups,name=email")
	require.NoError(t, err)
	roles, err := oidcauth.ParseRoleMap("*=user,approvers=user+approver")
	require.NoError(t, err)
	logger, _ := keptLog(t, zapcore.ErrorLevel)
	opts := testserver.Options{
		Script: httpScript, Catalogs: []string{originCatalog}, HTTPAPI: true, Logger: logger, DatabaseURL: devtest.Database(t),
		Tokens: map[string]string{"tok-aap": "acme:approver+user:aap"},
		OIDC:   &oidcauth.Config{Issuer: iss.URL, Audience: oidcAudience, Claims: claims, Roles: roles},
	}
	first := testserver.Start(t, opts)
	opts.Script, opts.Catalogs, opts.SharedModel, opts.TaskQueue = "", nil, first.Model, first.TaskQueue
	second := testserver.Start(t, opts) // the same deployment: database, Temporal, task queue
	api, other := "http://"+first.HTTPAPIAddr(), "http://"+second.HTTPAPIAddr()
	oidcAap := iss.Sign(t, iss.Claims(oidcAudience, map[string]any{"org_id": "acme", "email": "aap", "sub": "00u-idp-aap",
		"groups": []string{"approvers"}}))

	// The static token's holder calls desk over MCP.
	session, err := mcp.NewClient(&mcp.Implementation{Name: "agentflow-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: api + mcpdoor.MCPPath, HTTPClient: &http.Client{Transport: mcpBearer{token: "tok-aap", base: http.DefaultTransport}},
	}, sessionMCP)
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "desk", Arguments: map[string]any{"prompt": "What is 6 * 7?"}})
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", res.Content[0].(*mcp.TextContent).Text)
	var streamID, requestID string
	require.NoError(t, first.Store().Pool().QueryRow(ctx,
		`SELECT stream_id, request_id::text FROM mcp_streams WHERE session_id = $1 AND job_id IS NOT NULL`, session.ID()).Scan(&streamID, &requestID))

	t.Run("the session is not the IdP user's", func(t *testing.T) {
		// The same call again, in the session: its job is the first call's.
		call := fmt.Sprintf(`{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "desk", "arguments": {"prompt": "What is 6 * 7?"}}}`, requestID)
		code, body := mcpRaw(t, ctx, api, http.MethodPost, oidcAap, session.ID(), nil, call)
		require.Equal(t, http.StatusForbidden, code, "%s", body)
		require.NotContains(t, body, "42")
		code, body = mcpRaw(t, ctx, api, http.MethodGet, oidcAap, session.ID(), map[string]string{"Last-Event-ID": streamID + "_0"}, "")
		require.Equal(t, http.StatusForbidden, code, "%s", body)
	})

	t.Run("nor its call's stream, on another gateway", func(t *testing.T) {
		resume := map[string]string{"Last-Event-ID": streamID + "_0"}
		code, body := mcpRaw(t, ctx, other, http.MethodGet, oidcAap, session.ID(), resume, "")
		require.Equal(t, http.StatusForbidden, code, "%s", body)
		require.NotContains(t, body, "42")
		code, body = mcpRaw(t, ctx, other, http.MethodGet, "tok-aap", session.ID(), resume, "")
		require.Equal(t, http.StatusOK, code, "%s", body)
		require.Contains(t, body, "The result is 42.", "the token's holder resumes it")
	})

	t.Run("nor a turn the token's holder started", func(t *testing.T) {
		job := `{"job_id": "origin-` + testserver.RandomID() + `", "prompt": "What is 2 + 2?"}`
		e := &httpEnv{Server: first, t: t, api: api}
		var res pb.TurnResult
		e.ok("POST", "/v1/turns:invoke", "tok-aap", job, &res)
		require.Equal(t, "The result is 4.", res.GetOutput())
		p := e.problem("POST", "/v1/turns:invoke", oidcAap, job, http.StatusConflict)
		require.Contains(t, p.Detail, "names another request")
	})

	t.Run("approvals and grants name the issuer and subject", func(t *testing.T) {
		e := &httpEnv{Server: first, t: t, api: api, approver: oidcAap, user: "tok-aap"}
		var started pb.StartResponse
		e.ok("POST", "/v1/turns", "tok-aap", `{"agent_id": "careful", "prompt": "Carefully, what is 6 * 7?"}`, &started)
		p := e.waitPending(started.GetStreamId())
		ack := e.approveOverHTTP(started.GetStreamId(), p, true, `, "scope": "turn"`)
		require.Equal(t, "The result is 42.", e.turnResult(started.GetStreamId()).Output)
		recs, err := first.Store().Approvals(ctx, "acme", strings.TrimPrefix(started.GetStreamId(), "turn/acme/"))
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, []string{"aap", iss.URL, "00u-idp-aap"}, []string{recs[0].Approver, recs[0].ApproverIssuer, recs[0].ApproverSubject})
		var list pb.ListGrantsResponse
		e.ok("GET", "/v1/grants?stream_id="+started.GetStreamId(), "tok-aap", "", &list)
		require.Len(t, list.GetGrants(), 1)
		g := list.GetGrants()[0]
		require.Equal(t, ack.GetGrantId(), g.GetId())
		require.Equal(t, []string{"aap", iss.URL, "00u-idp-aap"}, []string{g.GetApprover(), g.GetApproverIssuer(), g.GetApproverSubject()})

		// The static token's holder revokes it: recorded as the token's.
		var revoked pb.Grant
		e.ok("POST", "/v1/grants/"+g.GetId()+"/revoke", "tok-aap", `{}`, &revoked)
		require.Equal(t, []string{"aap", agent.IssuerStaticToken, "aap"},
			[]string{revoked.GetRevokedBy(), revoked.GetRevokedByIssuer(), revoked.GetRevokedBySubject()})
	})
}
