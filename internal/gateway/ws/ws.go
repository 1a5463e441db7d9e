// Package ws serves the WebSocket door: one socket that starts turns,
// follows them, decides approvals and answers questions, with
// acknowledgements and resumption by index.
//
// A door: it builds on the gateway's core and must not import another door,
// the workflows or the store.
package ws

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/intake"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// WebSocket: a turn's events on a socket, one JSON text message per event
// (agent.Event's JSON, as SSE's data carries it), and the client's
// commands the other way: start a turn, send a conversation message,
// follow (resume) a stream, decide an approval, cancel a turn. Each
// command is a JSON object of its type, an optional id and the fields of
// the gRPC request it is (SocketCommand*), answered by an ack or an error
// message (SocketReply) with the same id. A socket follows one stream at
// a time; a start, message or follow replaces the stream it follows (the
// turn it leaves runs on). Any token opens a socket, and each command is
// authorized as the gRPC call it is (approve needs the approver role).
// A socket holds one of its tenant's streams
// (Options.MaxStreamsPerTenant) for as long as it is open.

// Route and subprotocols of the WebSocket.
const (
	socketPath = "GET /v1/socket"
	// SocketProtocol is the socket's subprotocol, selected when the
	// client offers it; a browser that sends its token as a subprotocol
	// must offer it too, as browsers fail a handshake that selects none
	// of the protocols offered.
	SocketProtocol = "agentflow.v1"
	// SocketBearerPrefix, followed by the token in unpadded base64url, is
	// how a browser sends its token: its WebSocket API can set no header
	// but Sec-WebSocket-Protocol. The server never selects it, so it is
	// not echoed back.
	SocketBearerPrefix = "agentflow.bearer."
)

// Commands a client sends (SocketReply.Command names them back).
const (
	SocketCommandStart   = "start"   // fields of a TurnRequest: start a turn and follow it (Stream)
	SocketCommandMessage = "message" // fields of a SendMessageRequest: send and follow its turn
	SocketCommandFollow  = "follow"  // stream_id, after_index: follow a turn (Resume)
	SocketCommandApprove = "approve" // stream_id, call_id, approved, reason (Approve; role approver)
	SocketCommandCancel  = "cancel"  // stream_id, reason (Cancel)
)

// Types of the messages a socket sends beside events.
const (
	SocketAck   = "ack"
	SocketError = "error"
)

// SocketReply is a message of the socket that is not an event: events
// have a kind, replies a type.
type SocketReply struct {
	// Type is SocketAck or SocketError.
	Type string `json:"type"`
	// ID is the command's id, when it had one.
	ID string `json:"id,omitempty"`
	// Command is the command's type ("" for a failure of no command, such
	// as the stream the socket was opened to follow).
	Command string `json:"command,omitempty"`
	// StreamID is the stream a failed follow was following.
	StreamID string `json:"stream_id,omitempty"`
	// Result, on an ack, is the gRPC call's answer (its JSON, as the HTTP
	// API answers it).
	Result json.RawMessage `json:"result,omitempty"`
	// Problem, on an error, is what went wrong, as the HTTP API says it.
	Problem *gateway.Problem `json:"problem,omitempty"`
}

const (
	// maxCommandID bounds a command's id.
	maxCommandID = 64
	// maxSocketCommands bounds a socket's commands in flight: a message
	// to a busy conversation waits for its turn to start, and the socket
	// still takes approvals and cancels meanwhile.
	maxSocketCommands = 8
	// socketSendBuffer is the kernel's send buffer of a socket's
	// connection. Left to the kernel it grows to megabytes; bounded, a
	// client that stops reading holds at most this and StreamBuffer
	// events of the gateway's memory before it is dropped.
	socketSendBuffer = 64 << 10
)

func (a *server) registerSocket(mux *http.ServeMux) { mux.HandleFunc(socketPath, a.serveSocket) }

// serveSocket checks the upgrade request — the token, the page's origin,
// the stream it names — and takes a stream slot before it upgrades, so
// that a refusal is an HTTP problem with its status.
func (a *server) serveSocket(w http.ResponseWriter, r *http.Request) {
	authz, err := socketAuthorization(r)
	var ctx context.Context
	if err == nil {
		// Any token opens a socket; each command needs its call's role.
		ctx, err = a.authenticated(r, authz)
	}
	if err != nil {
		a.Fail(w, r, err, 0)
		return
	}
	r = r.WithContext(ctx)
	streamID, after, err := socketQuery(r.URL.Query())
	if err == nil {
		err = a.socketOrigin(r)
	}
	if err == nil && streamID != "" {
		// The stream it opens to follow: as a Resume call.
		if _, err = a.Caller(r, authz, pb.AgentService_Resume_FullMethodName); err == nil {
			err = gateway.OwnStream(ctx, streamID)
		}
	}
	if err != nil {
		a.Fail(w, r, err, 0)
		return
	}
	// The socket's slot, which its follows share.
	ctx, release, err := a.Service().HoldStream(ctx)
	if err != nil {
		a.Fail(w, r, err, 0)
		return
	}
	defer release()
	// The origin is checked above, against AGENTFLOW_CORS_ORIGINS as
	// well as the API's own host.
	c, err := websocket.Accept(boundedSend{w}, r, &websocket.AcceptOptions{Subprotocols: []string{SocketProtocol}, InsecureSkipVerify: true})
	if err != nil {
		return // Accept answered
	}
	c.SetReadLimit(gateway.MaxBodyBytes)
	// The request's context is not the socket's after the upgrade; its
	// values (the caller) are.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &socket{a: a, c: c, ctx: sctx, cancel: cancel, authz: authz, out: make(chan []byte, gateway.StreamBuffer),
		cmds: make(chan struct{}, maxSocketCommands)}
	s.run(streamID, after)
}

// authenticated is the request's context with its token's caller.
func (a *server) authenticated(r *http.Request, authorization []string) (context.Context, error) {
	caller, err := a.Service().Authenticate(gateway.WithAuthorization(r.Context(), authorization))
	if err != nil {
		return nil, err
	}
	return context.WithValue(r.Context(), gateway.CallerKey{}, caller), nil
}

// socketAuthorization is the upgrade request's Authorization header, or
// the bearer token a browser offers as a subprotocol.
func socketAuthorization(r *http.Request) ([]string, error) {
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		return v, nil
	}
	var token string
	offered := false
	for _, line := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(line, ",") {
			p = strings.TrimSpace(p)
			if enc, ok := strings.CutPrefix(p, SocketBearerPrefix); ok {
				dec, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "="))
				if err != nil || len(dec) == 0 {
					return nil, agent.Errorf(agent.CodeUnauthenticated, "malformed subprotocol %s…: want the token in base64url after it", SocketBearerPrefix)
				}
				token = string(dec)
			}
			offered = offered || p == SocketProtocol
		}
	}
	switch {
	case token == "":
		return nil, agent.Errorf(agent.CodeUnauthenticated,
			"missing bearer token: send \"Authorization: Bearer <token>\", or from a browser the subprotocols %s and %s<token in base64url>", SocketProtocol, SocketBearerPrefix)
	case !offered:
		return nil, agent.Errorf(agent.CodeInvalid, "a token sent as a subprotocol needs the subprotocol %s offered beside it", SocketProtocol)
	}
	return []string{"Bearer " + token}, nil
}

// socketQuery reads the stream a socket follows when it opens, if any:
// stream_id, and after_index (default 0).
func socketQuery(q url.Values) (streamID string, after int64, err error) {
	for key, vals := range q {
		switch {
		case key != "stream_id" && key != "after_index":
			return "", 0, agent.Errorf(agent.CodeInvalid, "unknown query parameter %s: a socket takes stream_id and after_index", gateway.Clip(key))
		case len(vals) != 1:
			return "", 0, agent.Errorf(agent.CodeInvalid, "%s is given %d times: give it once", key, len(vals))
		}
	}
	streamID = q.Get("stream_id")
	if v, ok := q["after_index"]; ok {
		if streamID == "" {
			return "", 0, agent.Errorf(agent.CodeInvalid, "after_index needs the stream_id it is an index of")
		}
		after, err = gateway.ParseIndex("after_index", v[0])
	}
	return streamID, after, err
}

// socketOrigin lets a page open a socket from the API's own origin or one
// of AGENTFLOW_CORS_ORIGINS; a client that sends no Origin is no browser.
// (Browsers do not apply CORS to WebSockets: the server must.) Origins are
// compared whole, as browsers compare them: scheme, host and port, a
// scheme's default port written or not. The API's own scheme is https
// when the request came over TLS, or through a proxy that ended TLS and
// says so in X-Forwarded-Proto (which no page can set on a socket).
func (a *server) socketOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	if page, err := gateway.CORSOrigin(origin); err == nil {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if p := strings.ToLower(strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")[0])); p == "http" || p == "https" {
			scheme = p
		}
		page = sameOriginForm(page)
		if page == sameOriginForm(strings.ToLower(scheme+"://"+r.Host)) ||
			slices.ContainsFunc(a.CORSOrigins(), func(o string) bool { return sameOriginForm(o) == page }) {
			return nil
		}
	}
	return agent.Errorf(agent.CodePermissionDenied, "origin %s may not open a WebSocket (AGENTFLOW_CORS_ORIGINS)", gateway.Clip(origin))
}

// sameOriginForm is a lower-case scheme://host[:port] origin without its
// scheme's default port, so that two forms of one origin are equal.
func sameOriginForm(origin string) string {
	switch {
	case strings.HasPrefix(origin, "http://") && strings.HasSuffix(origin, ":80"):
		return strings.TrimSuffix(origin, ":80")
	case strings.HasPrefix(origin, "https://") && strings.HasSuffix(origin, ":443"):
		return strings.TrimSuffix(origin, ":443")
	}
	return origin
}

// boundedSend gives the hijacked connection a small kernel send buffer
// (socketSendBuffer).
type boundedSend struct{ http.ResponseWriter }

func (w boundedSend) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		if tc, ok := c.(interface{ SetWriteBuffer(int) error }); ok {
			_ = tc.SetWriteBuffer(socketSendBuffer)
		}
	}
	return c, rw, err
}

func (w boundedSend) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// socket is one open WebSocket.
type socket struct {
	a      *server
	c      *websocket.Conn
	ctx    context.Context // ends when the socket does
	cancel context.CancelFunc
	authz  []string      // the Authorization it opened with, for its commands
	out    chan []byte   // messages to send, bounded (gateway.StreamBuffer)
	cmds   chan struct{} // a slot per command in flight
	wg     sync.WaitGroup

	mu        sync.Mutex
	following *socketFollow
	closing   sync.Once
}

// socketFollow is the stream a socket follows.
type socketFollow struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// errSlowClient ends a follower whose client does not read.
var errSlowClient = errors.New("the client reads too slowly")

// run serves the socket until it closes: a writer, the stream it was
// opened to follow, and its commands as they come.
func (s *socket) run(streamID string, after int64) {
	defer s.wg.Wait()
	defer s.cancel()
	defer func() { _ = s.c.CloseNow() }()
	s.wg.Go(s.write)
	stop := context.AfterFunc(s.a.Ending(), func() {
		s.close(websocket.StatusGoingAway, "the gateway is stopping: reconnect, and resume after your last index")
	})
	defer stop()
	if streamID != "" {
		s.follow(socketCommand{}, streamID, func(ctx context.Context, send func(agent.Event) error) error {
			return s.a.Service().Events().Follow(ctx, streamID, after, send)
		})
	}
	for {
		typ, data, err := s.readMessage()
		if err != nil {
			return // the client closed, or the socket was
		}
		cmd, err := decodeCommand(data)
		if err == nil && typ != websocket.MessageText {
			err = agent.Errorf(agent.CodeInvalid, "a command is a JSON text message, not binary")
		}
		if err != nil {
			s.fail(cmd, "", err)
			continue
		}
		select {
		case s.cmds <- struct{}{}:
		default:
			s.fail(cmd, "", agent.Errorf(agent.CodeRateLimited, "%d commands are in flight on this socket: wait for an answer", maxSocketCommands))
			continue
		}
		s.wg.Go(func() {
			defer func() { <-s.cmds }()
			s.do(cmd)
		})
	}
}

// readMessage reads the client's next message through the body reader
// every request body goes through (admit): at most MaxBodyBytes, its
// bytes counted against the caller's share while they arrive, and all
// of it within the body timeout of its first frame. A message refused or
// cut off closes the socket, saying why: the rest of it cannot be skipped.
func (s *socket) readMessage() (websocket.MessageType, []byte, error) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	typ, r, err := s.c.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	deadline := time.Now().Add(s.a.BodyTimeout())
	cut := time.AfterFunc(s.a.BodyTimeout(), cancel)
	defer cut.Stop()
	caller := gateway.CallerOf(s.ctx)
	b := &intake.Body{Src: r, Budget: s.a.BodyBudget(), Client: caller.Tenant + "/" + caller.Name, Max: gateway.MaxBodyBytes, Length: -1, Deadline: deadline}
	defer func() { _ = b.Close() }()
	data, err := b.ReadAll()
	if refused, ok := errors.AsType[*intake.Error](err); ok {
		code := websocket.StatusPolicyViolation
		switch refused.Status {
		case http.StatusRequestEntityTooLarge:
			code = websocket.StatusMessageTooBig
		case http.StatusTooManyRequests:
			code = websocket.StatusTryAgainLater
		}
		s.close(code, socketCloseReason(refused.Status))
	}
	return typ, data, err
}

// socketCloseReason says why a message closed its socket, in the few
// bytes a close frame has.
func socketCloseReason(status int) string {
	return cmp.Or(socketCloseReasons[status], "a message could not be read")
}

var socketCloseReasons = map[int]string{
	http.StatusRequestEntityTooLarge: "a message is larger than the gateway takes",
	http.StatusTooManyRequests:       "too many bytes in flight: try again later",
	http.StatusRequestTimeout:        "a message did not arrive in time",
}

// write sends the queued messages, and a ping when the socket is quiet.
// A client that takes neither within SlowClient is dropped.
func (s *socket) write() {
	ping := time.NewTicker(s.a.KeepAlive())
	defer ping.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case m := <-s.out:
			ctx, cancel := context.WithTimeout(s.ctx, s.a.SlowClient())
			err := s.c.Write(ctx, websocket.MessageText, m)
			cancel()
			if err != nil {
				s.writeFailed(ctx)
				return
			}
			ping.Reset(s.a.KeepAlive())
		case <-ping.C:
			ctx, cancel := context.WithTimeout(s.ctx, s.a.SlowClient())
			err := s.c.Ping(ctx)
			cancel()
			if err != nil {
				s.writeFailed(ctx)
				return
			}
		}
	}
}

func (s *socket) writeFailed(ctx context.Context) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		s.close(websocket.StatusPolicyViolation, "too slow: nothing read for "+s.a.SlowClient().String()+"; resume after your last index")
		return
	}
	s.cancel()
}

// close closes the socket with a reason, once, and logs why.
func (s *socket) close(code websocket.StatusCode, reason string) {
	s.closing.Do(func() {
		s.a.Logger().Warn("websocket closed by the gateway", zap.String("tenant", gateway.TenantOf(s.ctx)), zap.Int("code", int(code)), zap.String("reason", reason))
		// The close frame waits behind what the client has not read; a
		// client that reads nothing never gets it, and Close gives up.
		_ = s.c.Close(code, reason)
		s.cancel()
	})
}

// send queues a message, unless ctx (the socket's, or a follow's) ends
// first. A full queue waits for the writer; one still full after
// SlowClient drops the client.
func (s *socket) send(ctx context.Context, msg []byte) error {
	select {
	case s.out <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	t := time.NewTimer(s.a.SlowClient())
	defer t.Stop()
	select {
	case s.out <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		s.close(websocket.StatusPolicyViolation, "too slow: the send buffer is full; resume after your last index")
		return errSlowClient
	}
}

// reply sends a reply.
func (s *socket) reply(r SocketReply) {
	data, err := json.Marshal(r)
	if err == nil {
		_ = s.send(s.ctx, data)
	}
}

// ack answers cmd with the call's answer.
func (s *socket) ack(cmd socketCommand, result proto.Message) error {
	data, err := gateway.MarshalMessage(result)
	if err != nil {
		return err
	}
	data, err = json.Marshal(SocketReply{Type: SocketAck, ID: cmd.ID, Command: cmd.Type, Result: data})
	if err != nil {
		return err
	}
	return s.send(s.ctx, data)
}

// fail answers cmd (or the socket's opening follow) with err.
func (s *socket) fail(cmd socketCommand, streamID string, err error) {
	s.reply(SocketReply{Type: SocketError, ID: cmd.ID, Command: cmd.Type, StreamID: streamID, Problem: new(s.a.ProblemOf(s.ctx, err))})
}

// authorized is the context of a call of method with the socket's token,
// checked as the interceptors check a gRPC call: each command needs its
// method's role.
func (s *socket) authorized(method string) (context.Context, error) {
	return s.a.Service().Authorize(gateway.WithAuthorization(s.ctx, s.authz), method)
}

// Door serves the WebSocket on the HTTP API's listener.
var Door = gateway.NewDoor(agent.ChannelWebSocket, func(mux *http.ServeMux, api *gateway.HTTPAPI) { (&server{api}).registerSocket(mux) })

// server is the door on one HTTP API: its handlers are server's methods,
// with the core's helpers and turn service (Service) at hand.
type server struct{ *gateway.HTTPAPI }
