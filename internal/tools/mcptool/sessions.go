package mcptool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// Sessions keeps sessions with MCP servers open between calls, one per
// tenant and server (its config and, over HTTP, the tenant's egress
// client), so that a call costs one round trip instead of a handshake, a
// call and a goodbye, and a stdio server is started once rather than per
// call. A session unused for the idle timeout is closed; one that breaks
// is dropped, and the next call connects anew. It is safe for concurrent
// use; Close ends every session (and every stdio server) it holds.
type Sessions struct {
	idle   time.Duration
	max    int
	logger *zap.Logger

	mu       sync.Mutex
	sessions map[string]*mcpSession
	closed   bool
	watchers sync.WaitGroup
}

// SessionOptions configure Sessions.
type SessionOptions struct {
	// IdleTimeout closes a session unused this long. Default 1 minute.
	IdleTimeout time.Duration
	// MaxSessions bounds the sessions kept open; past it the least
	// recently used idle one is closed, or, when all are busy, a call
	// connects for itself. Default 64.
	MaxSessions int
	// Logger. Default: a no-op logger.
	Logger *zap.Logger
}

// NewSessions returns an empty set of sessions: give it to the registry
// as kind.Deps.MCPSessions, and Close it when the worker stops.
func NewSessions(opts SessionOptions) *Sessions {
	opts.IdleTimeout = agent.OrDefault(opts.IdleTimeout, time.Minute)
	opts.MaxSessions = agent.OrDefault(opts.MaxSessions, 64)
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Sessions{idle: opts.IdleTimeout, max: opts.MaxSessions, logger: opts.Logger, sessions: map[string]*mcpSession{}}
}

// sessions is the pool d carries: nil (each call connects anew) when it
// carries none or one of another type.
func sessions(d kind.Deps) *Sessions {
	p, _ := d.MCPSessions.(*Sessions)
	return p
}

// Len is the number of sessions open.
func (p *Sessions) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// Close ends every session; later calls connect for themselves.
func (p *Sessions) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	var all []*mcpSession
	for k, s := range p.sessions {
		s.gone = true
		all = append(all, s)
		delete(p.sessions, k)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() {
			<-s.ready
			s.close()
		})
	}
	wg.Wait()
	p.watchers.Wait()
}

// mcpSession is one session with a server, shared by the calls that use
// it at once.
type mcpSession struct {
	key   string
	ready chan struct{} // closed once connected (or failed to)
	cs    *mcp.ClientSession
	err   error

	tokens sync.Map // progress token → func(string), of the calls in flight
	seq    atomic.Uint64
	once   sync.Once

	// Guarded by Sessions.mu.
	inUse int
	gone  bool // out of the pool: closed once unused
	last  time.Time
	timer *time.Timer
}

func newMCPSession(key string) *mcpSession {
	return &mcpSession{key: key, ready: make(chan struct{})}
}

func (s *mcpSession) close() {
	s.once.Do(func() {
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.cs != nil {
			_ = s.cs.Close()
		}
	})
}

// progress passes a server's progress notification to the call it is for.
func (s *mcpSession) progress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	if f, ok := s.tokens.Load(fmt.Sprint(req.Params.ProgressToken)); ok {
		f.(func(string))(progressText(req.Params))
	}
}

func progressText(p *mcp.ProgressNotificationParams) string {
	msg := strings.TrimSpace(p.Message)
	frac := fmt.Sprintf("%g", p.Progress)
	if p.Total > 0 {
		frac = fmt.Sprintf("%g/%g", p.Progress, p.Total)
	}
	switch {
	case msg == "":
		return "progress " + frac
	case p.Total > 0:
		return msg + " (" + frac + ")"
	}
	return msg
}

func (s *mcpSession) callTool(ctx context.Context, params *mcp.CallToolParams, progress func(string)) (*mcp.CallToolResult, error) {
	if progress != nil {
		token := fmt.Sprintf("agentflow-%d", s.seq.Add(1))
		s.tokens.Store(token, progress)
		defer s.tokens.Delete(token)
		params.SetProgressToken(token)
	}
	return s.cs.CallTool(ctx, params)
}

// call makes one tools/call on srv, in a kept session when p is not nil.
// When a kept session fails before the server took the request — the
// server forgot the session, or the request could not be sent on a
// connection it closed while the session was idle (it restarted) — the
// call is made again at once on a new session. Any other failure is the
// caller's to report; the session is dropped unless the server answered.
//
// The call is the write a call's gate (internal/effects) holds: its
// intent is recorded before the tools/call is first sent, and a call an
// earlier attempt may have sent is not sent again. The session's own
// requests are not the write.
func (p *Sessions) call(ctx context.Context, srv mcpServer, params *mcp.CallToolParams, progress func(string)) (*mcp.CallToolResult, error) {
	gate := effects.From(ctx)
	ctx = effects.Without(ctx)
	for attempt := 0; ; attempt++ {
		s, reused, err := p.acquire(ctx, srv)
		if err != nil {
			return nil, err
		}
		if gate != nil && attempt == 0 {
			if err := gate.Begin(ctx, "tools/call "+params.Name+" of "+srv.cfg.describe()); err != nil {
				p.release(s, false)
				return nil, err
			}
		}
		res, err := s.callTool(ctx, params, progress)
		p.release(s, err != nil && !answered(err) && ctx.Err() == nil)
		// A gated call is sent again only when it certainly never
		// reached the server: the server said it forgot the session, or
		// no connection was made. "Rejected by transport" also covers a
		// connection that broke after the request went out.
		unsent := errors.Is(err, mcp.ErrSessionMissing) || effects.NotSent(err)
		if err != nil && reused && attempt == 0 && ctx.Err() == nil && notTaken(err) && (gate == nil || unsent) {
			p.log().Debug("mcp session stale; connecting again", zap.String("server", srv.cfg.describe()), zap.Error(err))
			continue
		}
		if gate != nil {
			switch {
			case err == nil || answered(err):
				gate.Answered(ctx, 0)
			case unsent:
				gate.Unsent(ctx)
			}
		}
		return res, err
	}
}

func (p *Sessions) log() *zap.Logger {
	if p == nil {
		return zap.NewNop()
	}
	return p.logger
}

// answered reports whether err is the server's answer (a JSON-RPC error),
// which leaves the session sound.
func answered(err error) bool {
	return serverError(err) != nil
}

// serverError is the JSON-RPC error the server answered with, if it did.
// The SDK reports a request that never reached the server as a JSON-RPC
// error too ("rejected by transport", wrapping the cause): that one is
// not the server's.
func serverError(err error) *jsonrpc.Error {
	var we *jsonrpc.Error
	if !errors.As(err, &we) || (we.Code == codeRejected && we.Message == "rejected by transport") {
		return nil
	}
	return we
}

// codeRejected is the code of the SDK's "rejected by transport" error.
const codeRejected = -32005

// notTaken reports whether err says the server did not take the request:
// it no longer knows the session, or the request was not delivered (the
// SDK's "rejected by transport", not for a refusal of ours such as the
// egress policy's).
func notTaken(err error) bool {
	if errors.Is(err, mcp.ErrSessionMissing) {
		return true
	}
	var we *jsonrpc.Error
	var ae *agent.Error
	return errors.As(err, &we) && we.Code == codeRejected && we.Message == "rejected by transport" && !errors.As(err, &ae)
}

// acquire returns a connected session for srv, and whether it had served
// calls before. Release it after the call.
func (p *Sessions) acquire(ctx context.Context, srv mcpServer) (s *mcpSession, reused bool, err error) {
	if p == nil {
		return p.own(ctx, srv)
	}
	key := srv.key()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return p.own(ctx, srv)
	}
	if s = p.sessions[key]; s != nil {
		s.inUse++
		if s.timer != nil {
			s.timer.Stop()
		}
		p.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			p.release(s, false)
			return nil, false, ctx.Err()
		}
		if s.err != nil {
			p.release(s, true)
			return nil, false, s.err
		}
		return s, true, nil
	}
	if len(p.sessions) >= p.max && !p.evictLocked() {
		p.mu.Unlock()
		return p.own(ctx, srv)
	}
	s = newMCPSession(key)
	s.inUse = 1
	p.sessions[key] = s
	p.mu.Unlock()

	s.cs, s.err = srv.connect(ctx, s.progress)
	close(s.ready)
	if s.err != nil {
		p.release(s, true)
		return nil, false, s.err
	}
	p.watchers.Go(func() {
		// A session that ends by itself (a stdio server exited, an HTTP
		// connection failed) leaves the pool.
		_ = s.cs.Wait()
		p.mu.Lock()
		p.dropLocked(s)
		idle := s.inUse == 0
		p.mu.Unlock()
		if idle {
			s.close()
		}
	})
	return s, false, nil
}

// own connects a session for one call, outside the pool.
func (p *Sessions) own(ctx context.Context, srv mcpServer) (*mcpSession, bool, error) {
	s := newMCPSession("")
	s.gone, s.inUse = true, 1
	s.cs, s.err = srv.connect(ctx, s.progress)
	close(s.ready)
	if s.err != nil {
		return nil, false, s.err
	}
	return s, false, nil
}

// release ends a call's use of s; broken drops s from the pool. A session
// out of the pool is closed by its last user; an idle one in it, after the
// idle timeout.
func (p *Sessions) release(s *mcpSession, broken bool) {
	if p == nil || s.key == "" {
		s.close()
		return
	}
	p.mu.Lock()
	s.inUse--
	if broken {
		p.dropLocked(s)
	}
	closeNow := s.gone && s.inUse == 0
	if !s.gone && s.inUse == 0 {
		s.last = time.Now()
		s.timer = time.AfterFunc(p.idle, func() { p.expire(s) })
	}
	p.mu.Unlock()
	if closeNow {
		s.close()
	}
}

// expire closes s when it is still idle.
func (p *Sessions) expire(s *mcpSession) {
	p.mu.Lock()
	if s.gone || s.inUse > 0 || time.Since(s.last) < p.idle {
		p.mu.Unlock()
		return
	}
	p.dropLocked(s)
	p.mu.Unlock()
	s.close()
}

func (p *Sessions) dropLocked(s *mcpSession) {
	s.gone = true
	if p.sessions[s.key] == s {
		delete(p.sessions, s.key)
	}
}

// evictLocked closes the least recently used idle session, to make room;
// false when every session is busy.
func (p *Sessions) evictLocked() bool {
	var lru *mcpSession
	for _, s := range p.sessions {
		if s.inUse == 0 && !s.gone && (lru == nil || s.last.Before(lru.last)) {
			lru = s
		}
	}
	if lru == nil {
		return false
	}
	p.dropLocked(lru)
	go lru.close() // a stdio server may take a moment to exit; the caller need not wait
	return true
}

// mcpServer is a server as one tenant reaches it.
type mcpServer struct {
	cfg    mcpConfig
	tenant string
	http   *http.Client // the tenant's egress client
	deps   kind.Deps
}

// key identifies the server for Sessions: the tenant, what the config
// says of the server, and over HTTP the egress client (a new egress
// policy gets new sessions).
func (s mcpServer) key() string {
	raw, _ := json.Marshal(struct { // plain strings: never fails
		URL     string
		Command []string
		Headers []mcpHeader
		Env     []mcpEnv
	}{s.cfg.URL, s.cfg.Command, s.cfg.Headers, s.cfg.Env})
	sum := sha256.Sum256(raw)
	key := s.tenant + "\x00" + hex.EncodeToString(sum[:])
	if s.cfg.URL != "" {
		key += fmt.Sprintf("\x00%p", s.http)
	}
	return key
}

// connect starts a session; progress receives the server's progress
// notifications.
func (s mcpServer) connect(ctx context.Context, progress func(context.Context, *mcp.ProgressNotificationClientRequest)) (*mcp.ClientSession, error) {
	t, err := s.transport(ctx)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentflow-worker", Version: "1"}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: the client only calls tools.
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: progress,
	})
	return client.Connect(ctx, t, nil)
}

func (s mcpServer) transport(ctx context.Context) (mcp.Transport, error) {
	if s.cfg.URL != "" {
		client, err := s.httpClient()
		if err != nil {
			return nil, err
		}
		return &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: client,
			// Progress and results come on the response to each call; the
			// client listens for nothing else.
			DisableStandaloneSSE: true,
		}, nil
	}
	if err := checkMCPCommand(s.cfg.Command, s.deps.MCPCommands); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%v", err)
	}
	// The server gets the worker's few harmless variables and what its
	// config asks for, never the worker's environment (nil Env would
	// inherit it).
	env := append([]string{}, s.deps.MCPEnv...)
	for _, e := range s.cfg.Env {
		v, err := s.deps.Secrets.Resolve(ctx, e.Secret)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Env = env
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

// httpClient is the tenant's egress client without its whole-request time
// limit (a call's own timeout bounds it), with the entry's headers as
// egress credentials: added to the requests to the endpoint's host only,
// their secrets resolved for each request, redirects elsewhere refused and
// answers cleaned of them (egress.Credentials).
func (s mcpServer) httpClient() (*http.Client, error) {
	base := s.http
	if base == nil {
		base = kind.Call{}.WithDefaults().HTTP
	}
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	creds, err := egress.NewCredentials(s.deps.Secrets, s.cfg.credentials())
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "mcp config: headers: %v", err)
	}
	c := creds.Client(&http.Client{
		Transport:     &mcpTransport{next: next, shown: s.cfg.describe()},
		CheckRedirect: base.CheckRedirect,
	})
	c.Timeout = 0
	return c, nil
}

// mcpTransport says plainly what an endpoint's refusal means.
type mcpTransport struct {
	next  http.RoundTripper
	shown string
}

func (t *mcpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		resp.Body.Close()
		return nil, agent.Errorf(agent.CodePermissionDenied, "%s refused the request (HTTP %d): check the entry's headers and their secrets", t.shown, code)
	case code == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") == "":
		// With a session id, 404 means the session is gone (the SDK's
		// ErrSessionMissing); without one, that nothing is there.
		resp.Body.Close()
		return nil, agent.Errorf(agent.CodeInvalid, "%s answered HTTP 404: no MCP endpoint there", t.shown)
	}
	return resp, nil
}

// listTools connects, lists every tool of the server, and says goodbye.
func (s mcpServer) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	cs, err := s.connect(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(out) == mcpMaxTools {
			return nil, agent.Errorf(agent.CodeInvalid, "%s offers more than %d tools: grant some with tools", s.cfg.describe(), mcpMaxTools)
		}
		out = append(out, t)
	}
	return out, nil
}

// callError says what a failure to do what (a call, a listing) means:
//   - ctx done: the caller's cancellation, as it is;
//   - cctx's deadline (the entry's timeout): agent.CodeInvalid, for the
//     model to read, or with timeoutUnavailable agent.CodeUnavailable;
//   - the server's answer to bad arguments or an unknown tool:
//     agent.CodeInvalid; its other errors, a plain error (retried);
//   - refusals on our side (egress, a command not allowed, secrets) keep
//     their code;
//   - anything else — the server cannot be reached, the connection broke:
//     agent.CodeUnavailable, so that the activity is retried.
func (s mcpServer) callError(ctx, cctx context.Context, what string, err error, timeoutUnavailable bool) error {
	where := s.cfg.describe()
	we := serverError(err)
	var ae *agent.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %s: %w", where, what, ctx.Err())
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		code := agent.CodeInvalid
		if timeoutUnavailable {
			code = agent.CodeUnavailable
		}
		return agent.Errorf(code, "%s: %s: no answer within %s (the entry's timeout_sec)", where, what, s.cfg.timeout())
	case errors.As(err, &ae):
		return &agent.Error{Code: ae.Code, Message: fmt.Sprintf("%s: %s: %s", where, what, ae.Error())}
	case we != nil:
		switch we.Code {
		case jsonrpc.CodeInvalidParams, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidRequest:
			return agent.Errorf(agent.CodeInvalid, "%s refused to %s: %s", where, what, we.Message)
		}
		return fmt.Errorf("%s failed to %s: %s (error %d)", where, what, we.Message, we.Code)
	case errors.Is(err, exec.ErrNotFound):
		return agent.Errorf(agent.CodeInvalid, "%s: %s: the executable is not on this worker", where, what)
	}
	return &agent.Error{Code: agent.CodeUnavailable, Message: fmt.Sprintf("%s cannot be reached to %s", where, what), Err: err}
}

// mcpEnvNames are the variables of the worker's environment a stdio MCP
// server gets: what programs need to run, nothing secret.
var mcpEnvNames = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ"}

// EnvFrom picks from an environment (os.Environ()) the variables a
// stdio MCP server gets: PATH, HOME, LANG, LC_ALL, TMPDIR, TZ.
func EnvFrom(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(mcpEnvNames, name) {
			out = append(out, kv)
		}
	}
	return out
}
