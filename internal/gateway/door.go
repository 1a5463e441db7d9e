package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime/debug"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway/intake"
	"github.com/agentflow/agentflow/internal/secrets"
)

// A Door is one protocol served on the HTTP API's listener (the packages
// under internal/gateway: aisdk, agui, a2a, mcp, openai, sse, telegram, ws). It
// adds its routes to the API's mux and serves them with what the core
// offers: the caller's identity and tenant (Caller), the turn API of the
// Service (Prepare, StartPrepared, FollowNew, Decide, AnswerQuestion),
// bounded bodies (ReadBody), errors as problems (Fail, Refuse), event
// streams with keep-alives and a slot per tenant (ServeEvents; for the
// chat doors OpenChat and ServeChat), and the
// projection of a turn's events every door renders (internal/gateway/
// projection). A door imports no other door.
//
// A door's turns carry its channel (agent.TurnRequest.Channel): the api
// a door registers with starts turns and sends messages of that channel,
// and no request it serves can name another.
type Door interface {
	// Channel is the door's, one of agent.Channels.
	Channel() string
	// Register adds the door's routes to mux.
	Register(mux *http.ServeMux, api *HTTPAPI)
}

// NewDoor is the Door of channel that register's routes serve.
func NewDoor(channel string, register func(mux *http.ServeMux, api *HTTPAPI)) Door {
	return door{channel: channel, register: register}
}

type door struct {
	channel  string
	register func(mux *http.ServeMux, api *HTTPAPI)
}

func (d door) Channel() string                           { return d.channel }
func (d door) Register(mux *http.ServeMux, api *HTTPAPI) { d.register(mux, api) }

// Service is the API's turn service, which doors start, follow and steer
// turns through.
func (a *HTTPAPI) Service() *Service { return a.svc }

// Logger is the gateway's logger.
func (a *HTTPAPI) Logger() *zap.Logger { return a.logger }

// Ending is done once EndStreams is called: a door's long answers end
// then, and their clients resume on another gateway.
func (a *HTTPAPI) Ending() context.Context { return a.ending }

// KeepAlive is how often a quiet stream gets a keep-alive.
func (a *HTTPAPI) KeepAlive() time.Duration { return a.keepAlive }

// SlowClient is how long a write to a stream's client may wait.
func (a *HTTPAPI) SlowClient() time.Duration { return a.slowClient }

// Version is the build the doors say they are (HTTPOptions.Version).
func (a *HTTPAPI) Version() string { return a.version }

// buildVersion is the binary's version when none is configured: its
// module's version (a tag when built by `go install …@v…`), else its
// commit when the build recorded one, else "devel".
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			return "devel+" + s.Value[:min(12, len(s.Value))]
		}
	}
	return "devel"
}

// Events is the follower of turns' event logs.
func (s *Service) Events() EventSource { return s.events }

// Secrets resolves the secrets a door checks requests with, for the
// tenant of the context (secrets.WithTenant); nil: none.
func (s *Service) Secrets() secrets.Resolver { return s.secrets }

// Client is the gateway's Temporal client.
func (s *Service) Client() client.Client { return s.client }

// Logger is the service's logger.
func (s *Service) Logger() *zap.Logger { return s.logger }

// ClientMessage is what a client may read of err: its message once
// classified by Status (a reference for an internal error).
func (s *Service) ClientMessage(ctx context.Context, err error) string {
	return status.Convert(s.StatusOf(ctx, err)).Message()
}

// RefuseOtherMethods answers 405 on paths for the methods their routes
// do not take.
func (a *HTTPAPI) RefuseOtherMethods(mux *http.ServeMux, paths ...string) {
	for _, path := range paths {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			a.Fail(w, r, agent.Errorf(agent.CodeInvalid, "%s does not take %s", r.URL.Path, r.Method), http.StatusMethodNotAllowed)
		})
	}
}

// Refuse answers err as a problem: an error of the service's methods (a
// status) as it is, any other through Status.
func (a *HTTPAPI) Refuse(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && !IsBodyError(err) {
		return // the client has gone
	}
	p := a.ProblemOf(r.Context(), err)
	if hs, ok := errors.AsType[*HTTPStatusError](err); ok {
		p.Status = hs.Status
	}
	WriteProblem(w, p)
}

// HTTPStatusError gives an error another HTTP status than its code's.
type HTTPStatusError struct {
	Status int
	Err    error
}

func (e *HTTPStatusError) Error() string { return e.Err.Error() }
func (e *HTTPStatusError) Unwrap() error { return e.Err }

func WithHTTPStatus(status int, err error) error { return &HTTPStatusError{Status: status, Err: err} }

// FirstError is err, or next when err is nil.
func FirstError(err, next error) error {
	if err != nil {
		return err
	}
	return next
}

// WriteJSON answers v as JSON, and a newline.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// HeaderStreamID, in a door's answer, is the turn's stream id, for the
// rest of the API (events, approvals, cancel).
const HeaderStreamID = "X-Agentflow-Stream-Id"

// ServerName is what the gateway calls itself to other agents' clients
// (MCP's server info, A2A's skill tags): the product's name.
const ServerName = contract.Product

// CORSOrigins are the browser origins whose pages may call the API.
func (a *HTTPAPI) CORSOrigins() []string { return slices.Clone(a.cors.origins) }

// BodyTimeout is how long a body, or a socket's message, may take to
// arrive once begun.
func (a *HTTPAPI) BodyTimeout() time.Duration { return a.body.timeout }

// BodyBudget bounds the bytes of bodies and messages in flight, per
// credential and in total.
func (a *HTTPAPI) BodyBudget() *intake.Budget { return a.body.budget }

// MarshalMessage is msg as the HTTP API writes its bodies (protojson,
// with the API's options).
func MarshalMessage(msg proto.Message) ([]byte, error) { return bodyMarshaler().Marshal(msg) }

// UnmarshalMessage reads data into msg as the HTTP API reads its bodies:
// strictly, one JSON value, unknown fields refused.
func UnmarshalMessage(data []byte, msg proto.Message) error {
	return bodyMarshaler().(strictJSON).decode(data, msg)
}
