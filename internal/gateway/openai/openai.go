// Package openai serves the OpenAI-compatible API: chat completions, whole
// and streamed, the Responses API (responses whole, streamed, in the
// background, retrieved, resumed after a sequence number and cancelled:
// openai_responses.go), and the models list, for clients such as
// openai-go and the openai npm package.
//
// A door: it builds on the gateway's core and must not import another door,
// the workflows or the store.
package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The OpenAI-compatible endpoints: the tenant's agents as models
// (GET /v1/models, GET /v1/models/{id}) and a turn as a chat completion
// (POST /v1/chat/completions), so that any client of OpenAI's API talks
// to a durable agent. They are served on the HTTP API's listener with the
// same bearer tokens, checked by the gRPC API's own code (authorize) as
// the method whose work each does: ListAgents for the models, Stream for
// a completion, SendMessage for a completion in a session. A completion
// starts its turn as Stream does (prepare, startPrepared) and reads it
// through the same follower; errors are OpenAI's error object, made from
// the same table as every other error of the gateway.

// Headers of a chat completion.
const (
	// headerSession names the session whose Conversation answers the
	// message: its transcript is the history.
	headerSession = "X-Agentflow-Session"
	// headerIdempotency is the turn's job id: a request repeated with the
	// same key attaches to the turn the first one started.
	headerIdempotency = "Idempotency-Key"
)

// chatKeepAlive is how long a stream may have nothing to send before it
// sends a comment, so that proxies and clients keep it open while a tool
// runs or a call waits for approval.
const chatKeepAlive = 15 * time.Second

// openAI serves the OpenAI-compatible endpoints of a Service.
type openAI struct {
	s      *gateway.Service
	agents Agents
}

// Agents are the agents the door lists and serves (store.Store).
type Agents interface {
	ListAgents(ctx context.Context, tenantID string) ([]agent.Agent, error)
	ActiveAgent(ctx context.Context, tenantID, agentID string) (agent.Agent, error)
}

// register adds the endpoints to mux; another method on their paths is
// answered in OpenAI's error shape.
func (o openAI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/models", o.listModels)
	mux.HandleFunc("GET /v1/models/{id}", o.getModel)
	mux.HandleFunc("POST /v1/chat/completions", o.chatCompletions)
	o.registerResponses(mux)
	for _, path := range []string{"/v1/models", "/v1/models/{id}", "/v1/chat/completions"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			o.fail(w, r, gateway.WithHTTPStatus(http.StatusMethodNotAllowed, agent.Errorf(agent.CodeInvalid, "%s does not take %s", r.URL.Path, r.Method)))
		})
	}
}

// authorize checks the request's bearer token for the gRPC method whose
// work the endpoint does, with the gRPC API's code; the context it
// returns carries the caller.
func (o openAI) authorize(r *http.Request, method string) (context.Context, error) {
	return o.s.Authorize(gateway.WithAuthorization(r.Context(), r.Header.Values("Authorization")), method)
}

// openAIModel is an agent as OpenAI's model object. Created is 0: an
// agent's versions, not the agent, have a time.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (o openAI) listModels(w http.ResponseWriter, r *http.Request) {
	ctx, err := o.authorize(r, pb.AgentService_ListAgents_FullMethodName)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	agents, err := o.agents.ListAgents(ctx, gateway.TenantOf(ctx))
	if err != nil {
		o.fail(w, r.WithContext(ctx), err)
		return
	}
	slices.SortFunc(agents, func(a, b agent.Agent) int { return strings.Compare(a.ID, b.ID) })
	list := struct {
		Object string        `json:"object"`
		Data   []openAIModel `json:"data"`
	}{Object: "list", Data: []openAIModel{}}
	for _, a := range agents {
		list.Data = append(list.Data, openAIModel{ID: a.ID, Object: "model", OwnedBy: a.TenantID})
	}
	gateway.WriteJSON(w, http.StatusOK, list)
}

func (o openAI) getModel(w http.ResponseWriter, r *http.Request) {
	ctx, err := o.authorize(r, pb.AgentService_ListAgents_FullMethodName)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	r = r.WithContext(ctx)
	id := r.PathValue("id")
	if err := agent.ValidateID("model", id); err != nil {
		o.fail(w, r, err)
		return
	}
	a, err := o.agents.ActiveAgent(ctx, gateway.TenantOf(ctx), id)
	if agent.IsCode(err, agent.CodeNotFound) {
		err = agent.WithCode(agent.CodeAgentNotFound, err)
	}
	if err != nil {
		o.fail(w, r, err)
		return
	}
	gateway.WriteJSON(w, http.StatusOK, openAIModel{ID: a.ID, Object: "model", OwnedBy: a.TenantID})
}

func (o openAI) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	o.create(w, r, func(r *http.Request, ask turnAsk) (turnAsk, bool, error) {
		body, err := gateway.ReadBody(r)
		if err == nil {
			req, err = decodeChatRequest(body)
		}
		if err == nil {
			ask.prompt, err = chatPrompt(req.Messages, ask.session != "")
		}
		ask.model, ask.schema, ask.schemaParam = req.Model, req.OutputSchema, "response_format"
		return ask, true, err
	}, func(r *http.Request, turn gateway.Turn) {
		call := &chatCall{answer: answer{o: o, w: w, r: r}, req: req, turn: turn, created: time.Now().Unix()}
		call.run()
	})
}

// openAIError is OpenAI's error object, in {"error": …}.
type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// fail answers err as OpenAI's error object.
func (o openAI) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && !gateway.IsBodyError(err) {
		return // the client has gone: nobody reads an answer
	}
	writeOpenAIError(w, o.problem(r.Context(), err), err)
}

// problem classifies err as every error of the gateway is: a status the
// service's methods made is read as it is, any other error leaves
// through Status.
func (o openAI) problem(ctx context.Context, err error) gateway.Problem {
	st, ok := status.FromError(err)
	if _, typed := gateway.ErrorInfoOf(st); !ok || !typed {
		st = status.Convert(gateway.Status(ctx, o.s.Logger(), err))
	}
	p := gateway.ProblemFromStatus(st)
	if hs, ok := errors.AsType[*gateway.HTTPStatusError](err); ok {
		p.Status = hs.Status
	}
	return p
}

// turnProblem is a turn's failure as a Problem: its message was written
// for the turn's caller, who reads it in the result too.
func turnProblem(e *agent.TurnError) gateway.Problem {
	code, _ := agent.CodeOfType(e.Type)
	class := code.Class()
	return gateway.Problem{Type: gateway.ProblemTypePrefix + class.Type, Title: class.Type, Status: class.HTTP, Detail: e.Message, Retryable: e.Retryable}
}

// toOpenAIError reads a Problem as OpenAI's error object: type is
// OpenAI's kind of error for the status; code is OpenAI's code where it
// has one for the mistake (a parameter's, or model_not_found,
// invalid_api_key), else the error's type in agent's table; param names
// the parameter at fault.
func toOpenAIError(p gateway.Problem, err error) openAIError {
	out := openAIError{Message: p.Detail, Type: openAIErrorType(p.Status), Code: p.Title}
	if pe, ok := errors.AsType[*chatParamError](err); ok {
		out.Param = &pe.param
		if pe.code != "" {
			out.Code = pe.code
		}
	}
	switch p.Title {
	case agent.ErrTypeAgentNotFound:
		out.Code, out.Param = "model_not_found", new("model")
	case agent.ErrTypeUnauthenticated:
		out.Code = "invalid_api_key"
	}
	return out
}

// openAIErrorType is OpenAI's type of an error with an HTTP status.
func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// Errors is how the OpenAI-compatible API (chat completions and
// Responses) answers each class of error: the HTTP status, by which
// OpenAI's clients raise their errors (BadRequestError,
// AuthenticationError, PermissionDeniedError, NotFoundError,
// ConflictError, RateLimitError, InternalServerError), and the error
// object's type.
var Errors = gateway.NewDoorErrors("OpenAI-compatible (chat completions, Responses)", agent.ChannelOpenAI,
	func(class agent.Code) gateway.DoorError {
		status := class.Class().HTTP
		return gateway.DoorError{HTTP: status, Code: openAIErrorType(status)}
	})

// writeOpenAIError answers p. x-should-retry tells OpenAI's clients,
// which retry 409, 429 and 5xx by default, whether the same request may
// succeed later, and Retry-After when to send it again.
func writeOpenAIError(w http.ResponseWriter, p gateway.Problem, err error) {
	h := w.Header()
	h.Set("X-Should-Retry", fmt.Sprint(p.Retryable))
	gateway.SetRetryAfter(h, p.RetryAfter)
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="agentflow"`)
	}
	gateway.WriteJSON(w, p.Status, struct {
		Error openAIError `json:"error"`
	}{toOpenAIError(p, err)})
}

// New is the door that serves the OpenAI-compatible API on the HTTP
// API's listener, for the agents of agents.
func New(agents Agents) gateway.Door {
	return gateway.NewDoor(agent.ChannelOpenAI, func(mux *http.ServeMux, api *gateway.HTTPAPI) {
		openAI{s: api.Service(), agents: agents}.register(mux)
	})
}
