package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	a2adoor "github.com/agentflow/agentflow/internal/gateway/a2a"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestA2AStreamLimit: the probe of issue 64 — A2A at the tenant's stream
// limit (AGENTFLOW_MAX_STREAMS_PER_TENANT), which A2A answered as an
// internal error (1.0: HTTP 200, -32603; 0.3: -32000 "server error"), so
// that a client could not tell a limit from a bug. Now both versions
// answer HTTP 429 with Retry-After and -32000, whose data says the error
// is RateLimited and when to try again: a2a-go's client (0.3) reads the
// 429, a2a-js's clients (1.0 and 0.3) the code and the data, for a
// message sent and one streamed (TestStreamLimitEveryDoor shows that
// nothing starts). The a2a-js half needs
// Node.js (with npm): without it that half skips, except under CI.
func TestA2AStreamLimit(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.MaxStreamsPerTenant = 1
		o.Catalogs = everyDoorCatalogs
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	held := e.socket(ctx, e.user, "") // demo's one stream
	defer held.CloseNow()

	// The wire, in both versions.
	for _, v := range []struct{ version, method, params string }{
		{"1.0", "SendStreamingMessage", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`},
		{"0.3", "message/stream", `{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}`},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.api+a2adoor.A2APrefix+"assistant",
			strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"`+v.method+`","params":`+v.params+`}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+e.user)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", v.version)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var answer struct {
			ID    int `json:"id"`
			Error struct {
				Code    int             `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
		_ = resp.Body.Close()
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, v.version)
		require.Equal(t, "1", resp.Header.Get("Retry-After"), v.version)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), v.version)
		require.Equal(t, -32000, answer.Error.Code, v.version)
		require.Contains(t, string(answer.Error.Data), "RateLimited", v.version)
		require.Contains(t, answer.Error.Message+string(answer.Error.Data), "AGENTFLOW_MAX_STREAMS_PER_TENANT", "%s: the limit is named", v.version)
	}

	// a2a-go's client (0.3).
	a2aCtx := a2aclient.WithSessionID(ctx, "s")
	card, err := agentcard.NewResolver(nil).Resolve(a2aCtx, e.api+a2adoor.A2APrefix+"assistant",
		agentcard.WithRequestHeader("Authorization", "Bearer "+e.user))
	require.NoError(t, err)
	creds := a2aclient.NewInMemoryCredentialsStore()
	creds.Set("s", "bearer", a2aclient.AuthCredential(e.user))
	client, err := a2aclient.NewFromCard(a2aCtx, card, a2aclient.WithInterceptors(&a2aclient.AuthInterceptor{Service: creds}))
	require.NoError(t, err)
	_, err = client.SendMessage(a2aCtx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})})
	require.ErrorContains(t, err, "429 Too Many Requests")
	for _, err := range client.SendStreamingMessage(a2aCtx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})}) {
		require.ErrorContains(t, err, "429 Too Many Requests")
		break
	}

	// a2a-js's clients (1.0 and 0.3).
	dir := nodeClient(t, "a2a", "@a2a-js/sdk")
	out := runNode(t, dir, "limit.mjs", nodeInput(t, map[string]string{"base": e.api, "token": e.user, "agent": "assistant"}))
	type refusal struct {
		Name     string
		Accepted bool
		Code     int
		Data     json.RawMessage
		Message  string
	}
	var got struct {
		V1, Legacy struct {
			Version        string
			Sent, Streamed refusal
		}
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Equal(t, "1.0", got.V1.Version)
	require.Equal(t, "0.3", got.Legacy.Version)
	for name, r := range map[string]refusal{"1.0 send": got.V1.Sent, "1.0 stream": got.V1.Streamed, "0.3 send": got.Legacy.Sent, "0.3 stream": got.Legacy.Streamed} {
		require.False(t, r.Accepted, name)
		require.Equal(t, -32000, r.Code, "%s: %+v", name, r)
		require.Contains(t, string(r.Data), `"RateLimited"`, name)
		require.Contains(t, string(r.Data), `"agentflow.v1"`, name)
	}
	var v1Data []map[string]any
	require.NoError(t, json.Unmarshal(got.V1.Sent.Data, &v1Data))
	require.Contains(t, v1Data, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}, "1.0's data says when to try again")
	var legacyData map[string]any
	require.NoError(t, json.Unmarshal(got.Legacy.Sent.Data, &legacyData))
	require.Equal(t, "1s", legacyData["retryDelay"], "0.3's data says when to try again")
	_ = e.socket(ctx, e.rival, "") // rival's streams are its own
}
