package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/testissuer"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// oidcCatalogs: tenant acme, whose tenant id the tokens' org_id claim
// gives, with a rule only admins may list; tenant rival beside it.
var oidcCatalogs = []string{`
tenant: acme
default_agent: desk
tools:
  - {name: calculator, kind: calculator}
rules:
  - {name: acme-math, priority: 10, when: 'true', agent: desk}
agents:
  - {id: desk, model: openai:gpt-4o-mini, tools: [calculator]}
`, `
tenant: rival
default_agent: other
tools:
  - {name: calculator, kind: calculator}
agents:
  - {id: other, model: openai:gpt-4o-mini, tools: [calculator]}
`}

const oidcAudience = "agentflow"

// oidcEnv calls the gateway's gRPC and HTTP APIs with bearer tokens.
type oidcEnv struct {
	t      *testing.T
	srv    *testserver.Server
	agents pb.AgentServiceClient
	cat    pb.CatalogServiceClient
}

func (o *oidcEnv) ctx(token string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	o.t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func (o *oidcEnv) grpcAgents(token string) ([]string, error) {
	res, err := o.agents.ListAgents(o.ctx(token), &pb.ListAgentsRequest{})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, a := range res.GetAgents() {
		ids = append(ids, a.GetId())
	}
	return ids, nil
}

// get calls the HTTP API and returns the status and body.
func (o *oidcEnv) get(token, path string) (int, http.Header, []byte) {
	o.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+o.srv.HTTPAPIAddr()+path, nil)
	require.NoError(o.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(o.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(o.t, err)
	return resp.StatusCode, resp.Header, body
}

// TestOIDCIdentity: tokens of a local issuer (keys made here, discovery
// and JWKS served over HTTP) are callers of the gateway on every door,
// as their claims say: tenant from org_id, roles mapped from groups,
// name from email. Bad tokens are refused with a plain 401 whose
// reference leads to the reason in the log; a rotated key is picked up
// without a restart; an issuer gone away leaves the keys held working.
func TestOIDCIdentity(t *testing.T) {
	iss := testissuer.Start(t)
	claims, err := oidcauth.ParseClaims("tenant=org_id,roles=groups,name=email")
	require.NoError(t, err)
	roles, err := oidcauth.ParseRoleMap("*=user,agentflow-admins=admin+approver")
	require.NoError(t, err)
	logger, log := keptLog(t, zap.WarnLevel)
	srv := testserver.Start(t, testserver.Options{
		Script: testScript, Catalogs: oidcCatalogs, HTTPAPI: true, HTTP: true, Logger: logger,
		// A static token beside the issuer's.
		Tokens: map[string]string{"tok-rival": "rival:user+admin:eve"},
		// Every unknown key id may fetch the keys: the rate limit has its
		// own test (oidcauth's TestKeyRotation).
		OIDC: &oidcauth.Config{Issuer: iss.URL, Audience: oidcAudience, Claims: claims, Roles: roles, MinRefetch: time.Nanosecond},
	})
	o := &oidcEnv{t: t, srv: srv, agents: pb.NewAgentServiceClient(srv.Conn), cat: pb.NewCatalogServiceClient(srv.Conn)}
	token := func(extra map[string]any) string {
		base := map[string]any{"org_id": "acme", "email": "bo@acme.example", "groups": []string{"Engineering"}}
		for k, v := range extra {
			base[k] = v
		}
		c := iss.Claims(oidcAudience, base)
		for k, v := range extra {
			if v == nil {
				delete(c, k)
			}
		}
		return iss.Sign(t, c)
	}
	user := token(nil)
	admin := token(map[string]any{"email": "ana@acme.example", "groups": []string{"agentflow-admins", "Engineering"}})

	// gRPC: the tenant's agents, and the admins' methods only for admins.
	ids, err := o.grpcAgents(user)
	require.NoError(t, err)
	require.Equal(t, []string{"desk"}, ids, "acme's agents only")
	_, err = o.cat.ListRules(o.ctx(user), &pb.ListRulesRequest{})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "token bo@acme.example has the roles user; ListRules needs the role admin")
	rules, err := o.cat.ListRules(o.ctx(admin), &pb.ListRulesRequest{})
	require.NoError(t, err)
	require.Len(t, rules.GetRules(), 1)
	require.Equal(t, "acme-math", rules.GetRules()[0].GetName())
	ids, err = o.grpcAgents("tok-rival")
	require.NoError(t, err)
	require.Equal(t, []string{"other"}, ids, "the static token keeps working, for its tenant")

	// The HTTP API, and the OpenAI-compatible door: the same callers.
	code, _, body := o.get(user, "/v1/agents")
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Contains(t, string(body), `"id":"desk"`)
	require.NotContains(t, string(body), `"other"`)
	code, _, body = o.get(user, "/v1/rules")
	require.Equal(t, http.StatusForbidden, code, "%s", body)
	code, _, body = o.get(admin, "/v1/rules")
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Contains(t, string(body), `"acme-math"`)
	code, _, body = o.get(user, "/v1/models")
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Contains(t, string(body), `"id":"desk"`)

	// A turn the token starts is its tenant's, with its caller.
	job := "oidc-" + testserver.RandomID()
	out, err := o.agents.Invoke(o.ctx(admin), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", out.GetOutput())
	var req agent.TurnRequest
	hist := (&env{Server: srv, t: t}).history(contract.TurnWorkflowID("acme", job))
	require.NoError(t, json.Unmarshal(hist[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &req))
	require.Equal(t, &agent.Caller{Name: "ana@acme.example", Roles: []string{"admin", "approver", "user"}, Issuer: iss.URL, Subject: "ana"}, req.Caller)

	// Bad tokens: 401 / Unauthenticated with a plain message, the reason
	// in the log under its reference.
	stranger := iss.NewKey(t)
	good := iss.Claims(oidcAudience, map[string]any{"org_id": "acme", "email": "bo@acme.example"})
	bad := []struct {
		name, token string
		reason      oidcauth.Reason
	}{
		{"bad signature", iss.SignAs(t, stranger, "key-1", good), oidcauth.BadSignature},
		{"expired", token(map[string]any{"exp": time.Now().Add(-time.Minute).Unix()}), oidcauth.Expired},
		{"wrong audience", token(map[string]any{"aud": "another-app"}), oidcauth.WrongAudience},
		{"wrong issuer", token(map[string]any{"iss": "https://idp.example.com"}), oidcauth.WrongIssuer},
		{"no tenant claim", token(map[string]any{"org_id": nil}), oidcauth.NoTenant},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			want := "invalid bearer token (reference "
			if b.reason == oidcauth.Expired {
				want = "the bearer token has expired (reference "
			}
			_, err := o.grpcAgents(b.token)
			require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
			msg := status.Convert(err).Message()
			require.True(t, strings.HasPrefix(msg, want), msg)
			requireRefusalLogged(t, log, msg, b.reason)

			code, header, body := o.get(b.token, "/v1/agents")
			require.Equal(t, http.StatusUnauthorized, code, "%s", body)
			require.Equal(t, `Bearer realm="agentflow"`, header.Get("WWW-Authenticate"))
			var p gateway.Problem
			require.NoError(t, json.Unmarshal(body, &p))
			require.Equal(t, "Unauthenticated", p.Title)
			require.True(t, strings.HasPrefix(p.Detail, want), p.Detail)
			requireRefusalLogged(t, log, p.Detail, b.reason)
			for _, internal := range []string{"audience", "issuer", "org_id", "key-1", "signature", iss.URL} {
				require.NotContains(t, p.Detail+msg, internal)
			}
		})
	}

	// Key rotation: a token signed with the issuer's new key works at
	// once, without a restart; one of the withdrawn key no longer does.
	iss.Rotate(t)
	rotated := token(nil)
	ids, err = o.grpcAgents(rotated)
	require.NoError(t, err)
	require.Equal(t, []string{"desk"}, ids)
	code, _, body = o.get(rotated, "/v1/agents")
	require.Equal(t, http.StatusOK, code, "%s", body)
	_, err = o.grpcAgents(user)
	require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)

	// The issuer goes away: the keys held still verify; a token of a key
	// not held cannot be checked (Unavailable, to try again), and
	// /healthz says why, without taking the gateway out of rotation.
	unheld := iss.NewKey(t)
	iss.Close()
	ids, err = o.grpcAgents(rotated)
	require.NoError(t, err)
	require.Equal(t, []string{"desk"}, ids)
	_, err = o.grpcAgents(iss.SignAs(t, unheld, unheld, good))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	resp, err := http.Get("http://" + srv.HTTPAddr() + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
		Checks []struct{ Name, Status, Error string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", h.Status)
	last := h.Checks[len(h.Checks)-1]
	require.Equal(t, "oidc", last.Name)
	require.Equal(t, "degraded", last.Status)
	require.Contains(t, last.Error, "the last fetch of the issuer's keys failed")

	// No token is in the log, good or bad.
	for _, tok := range append([]string{user, admin, rotated}, bad[0].token, bad[1].token) {
		require.False(t, bytes.Contains(log.Bytes(), []byte(tok)), "a token in the log")
	}
}

// requireRefusalLogged finds the log line of a refusal by the reference
// its message gives, and checks its reason and level.
func requireRefusalLogged(t *testing.T, log *lockedBuffer, msg string, reason oidcauth.Reason) {
	t.Helper()
	_, ref, ok := strings.Cut(msg, "(reference ")
	require.True(t, ok, msg)
	ref = strings.TrimSuffix(ref, ")")
	for line := range bytes.SplitSeq(log.Bytes(), []byte("\n")) {
		var entry map[string]any
		if json.Unmarshal(line, &entry) != nil || entry["ref"] != ref {
			continue
		}
		require.Equal(t, "bearer token refused", entry["M"])
		require.Equal(t, "INFO", entry["L"])
		require.Equal(t, string(reason), entry["reason"])
		return
	}
	t.Fatalf("no log line with reference %s", ref)
}
