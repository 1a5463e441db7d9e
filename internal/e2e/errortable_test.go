package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/doors"
	"github.com/agentflow/agentflow/internal/testserver"
)

// errTabStreams is the streams a tenant may have open in the error
// table's test: the limit is met by holding them all, and the other
// probes, one at a time, never come near it.
const errTabStreams = 3

// errEnv is the error table's server: demo's agents on every door, a
// Telegram bot of assistant's, errTabStreams streams a tenant, and
// PostgreSQL behind a proxy that takes it away.
type errEnv struct {
	*httpEnv
	ctx context.Context
	pg  *devtest.Proxy
	// conflict is a job whose turn ran with another prompt than the
	// probes send: each door that names a turn by the client's id is
	// refused it.
	conflict string
}

// newErrEnv starts the error table's server.
func newErrEnv(t *testing.T) *errEnv {
	t.Setenv("ERRTAB_TG_BOT", "bot-token-1")
	t.Setenv("ERRTAB_TG_HOOK", "hook-secret-1")
	bot := httptest.NewServer(&botAPI{})
	t.Cleanup(bot.Close)
	dbURL, err := url.Parse(devtest.Database(t))
	require.NoError(t, err)
	pg := devtest.StartProxy(t, dbURL.Host)
	dbURL.Host = pg.Addr()
	catalog := strings.Replace(everyDoorCatalogs[0], "default_agent: assistant\n", "default_agent: assistant\negress: [\"127.0.0.1\"]\n", 1)
	catalog = strings.Replace(catalog, "    limits: {max_iterations: 4, turn_timeout_sec: 120}\n", "    limits: {max_iterations: 4, turn_timeout_sec: 120}\n"+
		"    deliver:\n      - {name: tg, kind: telegram, bot_token: 'env:ERRTAB_TG_BOT', webhook_secret: 'env:ERRTAB_TG_HOOK'}\n", 1)
	require.Contains(t, catalog, "webhook_secret")
	e := &errEnv{pg: pg, conflict: "errtab-" + testserver.RandomID()}
	e.httpEnv = newHTTPEnvWith(t, func(o *testserver.Options) {
		o.MaxStreamsPerTenant = errTabStreams
		o.Catalogs = []string{catalog, everyDoorCatalogs[1]}
		o.DatabaseURL = dbURL.String()
		o.TelegramAPI = bot.URL
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	// The conflicting job's turn, to its end.
	_, err = pb.NewAgentServiceClient(e.Conn).Invoke(grpcAs(ctx, e.user), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: e.conflict, Prompt: "What is 1 + 1?"}})
	require.NoError(t, err)
	return e
}

// errProbe provokes one class of error at one door, for real, and
// returns what the door answered.
type errProbe func(e *errEnv, class agent.Code) gateway.DoorError

// TestErrorTableEveryDoor walks the error table (doors.ErrorTable,
// docs/reference/errors.md): each class is provoked at each door through
// the real gateway — a request the door cannot read, no token, a token
// without the user role, a thing that is not there, a job id of another
// request's, the tenant's streams all open (or, where a door holds no
// stream, its bodies in flight), PostgreSQL taken away — and the door's
// answer must be its row's. A door's internal class (a bug) cannot be
// provoked honestly: its renderer is tested in its package
// (TestProblemRows, TestOpenAIErrorRow, TestMCPToolError,
// TestA2AErrorRow), as is the unavailable class of the doors whose
// requests need no PostgreSQL (a turn starts, and is followed, while
// the database is away: it waits for it).
func TestErrorTableEveryDoor(t *testing.T) {
	e := newErrEnv(t)
	probes := errProbes()
	// Every class but internal is provoked at every door that meets it.
	require.Equal(t, agent.CodeInternal, gateway.ErrorClasses()[len(gateway.ErrorClasses())-1])
	// The doors whose unavailable class is tested in their packages.
	unitOnly := map[string]bool{agent.ChannelSSE: true, agent.ChannelWebSocket: true, agent.ChannelAISDK: true}
	rows := doors.ErrorTable()
	for _, r := range rows {
		require.Contains(t, probes, r.Door, "a probe for every door")
	}
	walk := func(classes ...agent.Code) {
		for _, r := range rows {
			for _, class := range classes {
				want := r.Errors[class]
				probe := probes[r.Door][class]
				switch {
				case want == (gateway.DoorError{}):
					require.Nil(t, probe, "%s never meets %s: no probe", r.Door, class)
					continue
				case class == agent.CodeUnavailable && unitOnly[r.Channel]:
					require.Nil(t, probe, "%s: its requests need no PostgreSQL", r.Door)
					continue
				}
				require.NotNil(t, probe, "%s: a probe of %s", r.Door, class)
				t.Run(fmt.Sprintf("%s/%s", r.Door, gateway.ClassName(class)), func(t *testing.T) {
					require.Equal(t, want, probe(e, class), "%s answers %s as its row says", r.Door, gateway.ClassName(class))
				})
			}
		}
	}
	walk(agent.CodeInvalid, agent.CodeUnauthenticated, agent.CodePermissionDenied, agent.CodeNotFound, agent.CodeConflict)

	// The limit: the tenant's streams all held by WebSockets.
	var held []func()
	for range errTabStreams {
		c := e.socket(e.ctx, e.user, "")
		held = append(held, func() { _ = c.CloseNow() })
	}
	walk(agent.CodeRateLimited)
	for _, release := range held {
		release()
	}

	// A dependency down: PostgreSQL taken away, then given back.
	e.pg.Down()
	walk(agent.CodeUnavailable)
	e.pg.Up(t)
}

// doorRow is the row of the door of channel.
func doorRow(channel string) gateway.DoorErrors {
	for _, r := range doors.ErrorTable() {
		if r.Channel == channel {
			return r
		}
	}
	panic("no row of " + channel)
}

// raw sends a request with a token (none when empty) and headers, and
// returns the answer's status, headers and body, whatever they are.
func (e *errEnv) raw(method, path, token, body string, headers map[string]string) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.api+path, strings.NewReader(body))
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, resp.Header, data
}

// problem is an answer that must be problem details: its status.
func (e *errEnv) problem(code int, h http.Header, body []byte) gateway.DoorError {
	e.t.Helper()
	if code >= 400 {
		require.Equal(e.t, gateway.ProblemContentType, h.Get("Content-Type"), "%d %s", code, body)
	}
	if code == http.StatusTooManyRequests {
		require.NotEmpty(e.t, h.Get("Retry-After"), "a limit says when to try again")
	}
	return gateway.DoorError{HTTP: code}
}

// withBodiesInFlight holds request bodies in flight on path (with
// headers), each a declared MaxBodyBytes that never comes, until probe
// is refused for them: the limit of a door that holds no stream. It
// opens as many as one credential may hold, then one more each time the
// probe still passes: a probe that is itself being read when a held
// body's handler begins reserves its few bytes first, and that held
// body is refused in its place, which a slow gateway shows.
func (e *errEnv) withBodiesInFlight(path string, headers map[string]string, probe func() gateway.DoorError) gateway.DoorError {
	e.t.Helper()
	share := int(gateway.DefaultClientInflightBytes / gateway.MaxBodyBytes)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	addr := strings.TrimPrefix(e.api, "http://")
	hold := func() {
		c, err := net.Dial("tcp", addr)
		require.NoError(e.t, err)
		conns = append(conns, c)
		var head strings.Builder
		fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, addr, gateway.MaxBodyBytes)
		for k, v := range headers {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
		head.WriteString("\r\n")
		_, err = io.WriteString(c, head.String())
		require.NoError(e.t, err)
	}
	for range share {
		hold()
	}
	// The bodies are reserved as their handlers begin to read them.
	var got gateway.DoorError
	assert.Eventually(e.t, func() bool {
		if got = probe(); got.HTTP == http.StatusTooManyRequests {
			return true
		}
		if len(conns) < 2*share {
			hold()
		}
		return false
	}, time.Minute, 50*time.Millisecond, "the credential's bodies in flight are its share")
	require.Equal(e.t, http.StatusTooManyRequests, got.HTTP, "the last answer, with %d bodies held", len(conns))
	return got
}
