package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/chatpage"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// HTTPOptions configure the HTTP API.
type HTTPOptions struct {
	// CORSOrigins are the browser origins (scheme://host[:port],
	// ParseCORSOrigins) whose pages may call the API. Default: none, and
	// browsers refuse every cross-origin call.
	CORSOrigins []string
	// ServerOptions are the in-process gRPC server's, such as tracing and
	// metrics; never transport credentials (it has no network listener).
	ServerOptions []grpc.ServerOption
	// KeepAlive is how often a quiet event stream or WebSocket gets a
	// keep-alive (an SSE comment, a ping). Default: DefaultKeepAlive.
	KeepAlive time.Duration
	// SlowClient is how long a write to a stream's client may wait: a
	// client that reads nothing for that long is dropped, and resumes
	// from its last index. Default: DefaultSlowClient.
	SlowClient time.Duration
	// MaxUploadBytes is the largest file POST /v1/files takes, 1 to
	// MaxUploadBytesLimit. Default (0): DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// BodyTimeout is how long a request's body, or a WebSocket message,
	// may take to arrive after its headers (its first frame): a client
	// that has not sent it all by then is cut off (408; a socket is
	// closed). Default (0): DefaultBodyTimeout.
	BodyTimeout time.Duration
	// ClientInflightBytes bounds the bytes of one credential's bodies
	// and messages being received at once, at least the largest body or
	// upload, and InflightBytes every client's together, at least
	// ClientInflightBytes; both at most MaxInflightBytes. A body over
	// either is refused (429) before it is read. Default (0):
	// DefaultClientInflightBytes, or the largest upload when more;
	// DefaultInflightBytes, or ClientInflightBytes when more.
	ClientInflightBytes, InflightBytes int64
	// Doors are the protocols served beside the API's own routes
	// (internal/gateway/doors.All for every one agentflow has).
	Doors []Door
	// ChatDevToken, one of the Service's static tokens, is the token the
	// chat page signs in with when its tab holds none (chatpage.Options):
	// anyone who opens the page gets it, so only a local stack sets it.
	// Default: none, and the page asks for a token.
	ChatDevToken string
	// Version is the build the doors say they are to other agents'
	// clients (MCP's serverInfo.version): the worker's build id.
	// Default: the binary's module version (buildVersion).
	Version string
}

// MaxBodyBytes bounds an HTTP request's body: the gRPC API's default
// message limit, so that what one API takes the other takes too.
const MaxBodyBytes = 4 << 20

// OpenAPIPath is where the HTTP API serves its OpenAPI document, to anyone.
const OpenAPIPath = "/openapi.json"

// HTTPAPI is the HTTP/JSON API: grpc-gateway's handlers, generated from
// agentflow.proto and agentflow_http.yaml, turn each request into a call
// of the gRPC API on a server of its own in this process, reached through
// an in-memory connection. That server is NewGRPCServer's, with the same
// services and interceptors: a request is authenticated, authorized
// (methodRoles), scoped to its tenant and answered by exactly the code a
// gRPC call is. It has no transport credentials, as nothing but this
// process can reach it; the bearer token is what it checks.
type HTTPAPI struct {
	grpc    *grpc.Server
	svc     *Service
	ln      *bufconn.Listener
	conn    *grpc.ClientConn
	handler http.Handler
	logger  *zap.Logger
	cors    corsPolicy
	// ending is done once EndStreams is called: event streams and
	// WebSockets end, and their clients resume on another gateway.
	ending     context.Context
	endStreams context.CancelFunc
	keepAlive  time.Duration
	slowClient time.Duration
	maxUpload  int64
	body       bodyBounds
	version    string
	// ownCredential are the path prefixes whose requests carry a
	// credential of their door's protocol instead of a bearer token
	// (OwnCredential); shared by the doors' copies (forChannel).
	ownCredential *[]string
}

// installStrictQuery makes strictQuery grpc-gateway's query parser.
// grpc-gateway keeps it in a package variable: as an option of each mux
// it would be written again by every HTTP API made while another one
// reads it (two in one process, as parallel tests run them).
var installStrictQuery = sync.OnceFunc(func() { runtime.SetQueryParameterParser(strictQuery{})(nil) })

// inProcessBuffer is the in-memory connection's buffer per direction.
const inProcessBuffer = 1 << 20

// NewHTTPAPI returns the HTTP API of s and cat (which may be nil). Serve
// runs its in-process gRPC server; Stop ends it.
func NewHTTPAPI(s *Service, cat *CatalogService, o HTTPOptions) (*HTTPAPI, error) {
	cors, err := newCORS(o.CORSOrigins)
	if err != nil {
		return nil, err
	}
	maxUpload, body, err := o.bounds()
	if err != nil {
		return nil, err
	}
	// The API's own routes reach the in-process server, whose turns are
	// the HTTP API's; each door's are its own (forChannel).
	a := &HTTPAPI{maxUpload: maxUpload, body: body, grpc: NewGRPCServer(s.forChannel(agent.ChannelHTTP), cat, o.ServerOptions...), svc: s,
		ln: bufconn.Listen(inProcessBuffer), logger: s.logger, cors: cors,
		keepAlive: cmp.Or(o.KeepAlive, DefaultKeepAlive), slowClient: cmp.Or(o.SlowClient, DefaultSlowClient), ownCredential: new([]string),
		version: cmp.Or(o.Version, buildVersion())}
	a.ending, a.endStreams = context.WithCancel(context.Background())
	a.conn, err = grpc.NewClient("passthrough:///agentflow-in-process",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return a.ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("http api: connect to the in-process gRPC server: %w", err)
	}
	installStrictQuery()
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, bodyMarshaler()),
		runtime.WithErrorHandler(a.writeError),
		runtime.WithRoutingErrorHandler(a.routingError),
		// A stream id's slashes may come percent-encoded (turn%2Fdemo%2Fj1),
		// as clients made from the OpenAPI document send them.
		runtime.WithUnescapingMode(runtime.UnescapingModeAllCharacters),
		runtime.WithIncomingHeaderMatcher(forwardHeader),
		runtime.WithDisableHTTPMethodOverride(),
	)
	// The handlers keep no context: the one they are given is for
	// registering only.
	if err := pb.RegisterAgentServiceHandler(context.Background(), mux, a.conn); err != nil {
		return nil, fmt.Errorf("http api: %w", err)
	}
	if cat != nil {
		if err := pb.RegisterCatalogServiceHandler(context.Background(), mux, a.conn); err != nil {
			return nil, fmt.Errorf("http api: %w", err)
		}
	}
	if err := pb.RegisterEvalServiceHandler(context.Background(), mux, a.conn); err != nil {
		return nil, fmt.Errorf("http api: %w", err)
	}
	page, err := s.chatPage(o.ChatDevToken)
	if err != nil {
		return nil, err
	}
	root := http.NewServeMux()
	root.HandleFunc("GET "+OpenAPIPath, serveOpenAPI)
	chatpage.Register(root, page)
	a.registerFiles(root)
	s.knowledge.RegisterHTTP(root, apiHTTP{a}, a.maxUpload)
	a.registerMemories(root)
	a.registerRetry(root)
	a.registerTurnList(root)
	a.registerTimeline(root)
	for _, d := range o.Doors {
		d.Register(root, a.forChannel(d.Channel()))
	}
	root.Handle("/", a.LimitBody(mux))
	a.handler = cors.wrap(root, a)
	return a, nil
}

// ServeHTTP implements http.Handler. Every request gets its body reader
// first (admit), whatever door takes it. A path or query that is not
// UTF-8 once unescaped names nothing (ids are text, and protobuf strings
// are UTF-8, so no request message could be made of it): it is refused
// here, saying so, rather than answered with an internal error.
func (a *HTTPAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, end := a.admit(w, r)
	defer end()
	if !utf8.ValidString(r.URL.Path) {
		a.Fail(w, r, agent.Errorf(agent.CodeInvalid, "the path is not valid UTF-8 once unescaped"), http.StatusBadRequest)
		return
	}
	if !utf8Query(r.URL.RawQuery) {
		a.Fail(w, r, agent.Errorf(agent.CodeInvalid, "the query is not valid UTF-8 once unescaped"), http.StatusBadRequest)
		return
	}
	a.handler.ServeHTTP(w, r)
}

// forChannel is the API as the door channel sees it: the same API,
// whose Service starts turns of that channel (Service.forChannel). A
// door's turns are its own whatever its requests say.
func (a *HTTPAPI) forChannel(channel string) *HTTPAPI {
	c := *a
	c.svc = a.svc.forChannel(channel)
	return &c
}

// Serve runs the in-process gRPC server until Stop.
func (a *HTTPAPI) Serve() error {
	if err := a.grpc.Serve(a.ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("http api: serve in-process grpc: %w", err)
	}
	return nil
}

// EndStreams ends the event streams and WebSockets being served, whose
// clients resume from their last index (on another gateway, or this one
// when it is back): http.Server.Shutdown waits for neither, as a stream
// lasts as long as its turn and a WebSocket has left the server's hands.
// Register it with the server's RegisterOnShutdown.
func (a *HTTPAPI) EndStreams() { a.endStreams() }

// Stop ends the in-process gRPC server, waiting up to wait for the calls
// in flight, and the streams (EndStreams). Stop the HTTP server first.
// Stopping again does nothing.
func (a *HTTPAPI) Stop(wait time.Duration) {
	a.endStreams()
	_ = a.conn.Close()
	done := make(chan struct{})
	go func() { a.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		a.grpc.Stop()
		<-done
	}
}

// forwardHeader passes a request's W3C trace context on to the gRPC
// call, so that a caller's trace goes on through the turn; grpc-gateway
// passes Authorization itself. Nothing else a client sends becomes
// metadata.
func forwardHeader(key string) (string, bool) {
	switch http.CanonicalHeaderKey(key) {
	case "Traceparent", "Tracestate":
		return key, true
	}
	return "", false
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(pb.OpenAPI)
}

// utf8Query reports whether a query's names and values, decoded, are
// UTF-8. A query that does not parse is grpc-gateway's to answer.
func utf8Query(raw string) bool {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return true
	}
	for k, vs := range q {
		if !utf8.ValidString(k) {
			return false
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}
