package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentflow/agentflow/internal/gateway/mcp"

	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/doors"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// bodyTestAPI serves an HTTP API with no backends and two tokens of two
// tenants ("tok", "tok2"): what these tests send is refused, or cut off,
// before any call reaches a service.
func bodyTestAPI(t *testing.T, o gateway.HTTPOptions) (*gateway.HTTPAPI, string) {
	t.Helper()
	var tokens []gateway.Token
	for _, tk := range []struct{ secret, tenant, name string }{{"tok", "demo", "ana"}, {"tok2", "other", "bob"}, {"tok3", "third", "cy"}} {
		tok, err := gateway.NewToken(tk.secret, tk.tenant, tk.name, gateway.AllRoles()...)
		require.NoError(t, err)
		tokens = append(tokens, tok)
	}
	svc, err := gateway.New(gateway.Options{Tokens: tokens, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	o.Doors = doors.All(nil)
	api, err := gateway.NewHTTPAPI(svc, gateway.NewCatalogService(nil, nil, nil, zaptest.NewLogger(t)), o)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- api.Serve() }()
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		api.Stop(0)
		require.NoError(t, <-done)
	})
	return api, srv.Listener.Addr().String()
}

// bodyDoors are the routes of every door that takes a request body.
var bodyDoors = []string{
	"/v1/turns",                            // the HTTP API (grpc-gateway)
	"/v1/turns:stream",                     // SSE
	"/v1/conversations/s1/messages:stream", // SSE, a conversation's
	"/v1/chat/completions",                 // OpenAI
	"/v1/ui/chat",                          // the AI SDK
	"/ag-ui/assistant",                     // AG-UI
	"/a2a/assistant",                       // A2A
	mcp.MCPPath,                            // MCP
	"/v1/files",                            // uploads
	"/v1/no-such-route",                    // none: the HTTP API's
}

// stalledBody opens a connection and sends a POST's headers, a declared
// length of length bytes and sent bytes of the body; then it sends no
// more. The server has until the bound to answer and close it.
func stalledBody(t *testing.T, addr, path, token string, length, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, addr, length)
	if token != "" {
		fmt.Fprintf(&head, "Authorization: Bearer %s\r\n", token)
	}
	head.WriteString("\r\n")
	// The guard of a test that would otherwise hang: not a timing assert.
	require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute)))
	_, err = io.WriteString(c, head.String())
	require.NoError(t, err)
	// A server that reads nothing may close the connection under the
	// write: what was sent is not what is checked.
	_, _ = c.Write(bytes.Repeat([]byte("x"), sent))
	return c
}

// answered reads the answer on c and then waits for the server to close
// c; it fails the test when the guard's minute passes first.
func answered(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "an answer, while the body is unsent")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	_, err = br.ReadByte()
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server closes the connection")
	require.Error(t, err, "the server closes the connection")
	return resp
}

// TestAnonymousBodiesAreNotRead: the attack of issue 43 — connections
// with no credential that declare a large body, send most of it and
// stall — on every door: each is answered 401 while its body is unsent,
// nothing of it is held, and its connection is closed.
func TestAnonymousBodiesAreNotRead(t *testing.T) {
	api, addr := bodyTestAPI(t, gateway.HTTPOptions{MaxUploadBytes: 1 << 20})
	for _, path := range bodyDoors {
		t.Run(path, func(t *testing.T) {
			conns := make([]net.Conn, 5)
			for i := range conns {
				conns[i] = stalledBody(t, addr, path, "", 4_000_001, 256<<10)
			}
			for _, c := range conns {
				resp := answered(t, c)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
				require.True(t, resp.Close, "the answer closes the connection")
			}
			_, total := api.BodyBudget().InFlight("")
			require.Zero(t, total, "no anonymous byte is held")
		})
	}
}

// TestStalledBodiesAreCutOff: an authenticated client that declares a
// body and stalls is cut off with 408 once the body timeout has passed,
// on every door, and what it held is given back.
func TestStalledBodiesAreCutOff(t *testing.T) {
	api, addr := bodyTestAPI(t, gateway.HTTPOptions{MaxUploadBytes: 8 << 20, BodyTimeout: 500 * time.Millisecond})
	for _, path := range bodyDoors {
		t.Run(path, func(t *testing.T) {
			c := stalledBody(t, addr, path, "tok", 4_000_001, 64<<10)
			resp := answered(t, c)
			require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
			body, _ := io.ReadAll(resp.Body)
			require.Contains(t, string(body), "AGENTFLOW_HTTP_BODY_TIMEOUT")
			require.Eventually(t, func() bool {
				_, total := api.BodyBudget().InFlight("")
				return total == 0
			}, time.Minute, 10*time.Millisecond, "the stalled body's bytes are given back")
		})
	}
}

// TestBodyBytesInFlight: a credential's bodies being received are bounded
// by its share, every client's by the total; a refused body is answered
// 429 before it is read, and a body that ends gives its share back.
func TestBodyBytesInFlight(t *testing.T) {
	const mib = 1 << 20
	api, addr := bodyTestAPI(t, gateway.HTTPOptions{MaxUploadBytes: mib, ClientInflightBytes: 5 * mib, InflightBytes: 9 * mib})
	held := func(client string) int64 {
		mine, _ := api.BodyBudget().InFlight(client)
		return mine
	}
	// ana's first 4 MB body stalls, and holds its declared length.
	first := stalledBody(t, addr, "/v1/turns", "tok", 4*mib, 1024)
	require.Eventually(t, func() bool { return held("demo/ana") == 4*mib }, time.Minute, 10*time.Millisecond)
	// A second one would pass ana's 5 MiB.
	resp := answered(t, stalledBody(t, addr, "/v1/turns", "tok", 2*mib, 1024))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), "AGENTFLOW_HTTP_CLIENT_INFLIGHT_BYTES")
	// bob has a share of his own, but 4 + 4 + 2 MiB pass the total.
	second := stalledBody(t, addr, "/v1/chat/completions", "tok2", 4*mib, 1024)
	require.Eventually(t, func() bool { return held("other/bob") == 4*mib }, time.Minute, 10*time.Millisecond)
	resp = answered(t, stalledBody(t, addr, "/ag-ui/assistant", "tok3", 2*mib, 1024))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	body, _ = io.ReadAll(resp.Body)
	require.Contains(t, string(body), "AGENTFLOW_HTTP_INFLIGHT_BYTES")

	// The stalled bodies' clients go: their shares are back, and a whole
	// body is read (and refused as not JSON).
	require.NoError(t, first.Close())
	require.NoError(t, second.Close())
	require.Eventually(t, func() bool {
		_, total := api.BodyBudget().InFlight("")
		return total == 0
	}, time.Minute, 10*time.Millisecond)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/turns", strings.NewReader(strings.Repeat("x", 4*mib)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer r.Body.Close()
	data, _ := io.ReadAll(r.Body)
	require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", data)
	require.Contains(t, string(data), "not JSON")
}

// TestStalledSocketMessage: a WebSocket message that does not all arrive
// within the body timeout of its first frame closes its socket.
func TestStalledSocketMessage(t *testing.T) {
	api, addr := bodyTestAPI(t, gateway.HTTPOptions{BodyTimeout: 500 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute)))
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	_, err = fmt.Fprintf(c, "GET /v1/socket HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer tok\r\n\r\n", addr, key)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	// A text frame, masked, that declares 1 MB and carries 100 bytes.
	frame := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, 1, 2, 3, 4}
	frame = append(frame, bytes.Repeat([]byte("x"), 100)...)
	_, err = c.Write(frame)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mine, _ := api.BodyBudget().InFlight("demo/ana")
		return mine > 0
	}, time.Minute, 10*time.Millisecond, "the message's bytes count while they arrive")
	_, err = io.Copy(io.Discard, br)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server closes the socket")
	require.Eventually(t, func() bool {
		_, total := api.BodyBudget().InFlight("")
		return total == 0
	}, time.Minute, 10*time.Millisecond)
}
