package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
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
	// headerStreamID, in the answer, is the turn's stream id, for the
	// rest of the API (events, approvals, cancel).
	headerStreamID = "X-Agentflow-Stream-Id"
)

// chatKeepAlive is how long a stream may have nothing to send before it
// sends a comment, so that proxies and clients keep it open while a tool
// runs or a call waits for approval.
const chatKeepAlive = 15 * time.Second

// openAI serves the OpenAI-compatible endpoints of a Service.
type openAI struct{ s *Service }

// register adds the endpoints to mux; another method on their paths is
// answered in OpenAI's error shape.
func (o openAI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/models", o.listModels)
	mux.HandleFunc("GET /v1/models/{id}", o.getModel)
	mux.HandleFunc("POST /v1/chat/completions", o.chatCompletions)
	for _, path := range []string{"/v1/models", "/v1/models/{id}", "/v1/chat/completions"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			o.fail(w, r, withHTTPStatus(http.StatusMethodNotAllowed, agent.Errorf(agent.CodeInvalid, "%s does not take %s", r.URL.Path, r.Method)))
		})
	}
}

// authorize checks the request's bearer token for the gRPC method whose
// work the endpoint does, with the gRPC API's code; the context it
// returns carries the caller.
func (o openAI) authorize(r *http.Request, method string) (context.Context, error) {
	md := metadata.MD{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		md.Set("authorization", v...)
	}
	return o.s.authorize(metadata.NewIncomingContext(r.Context(), md), method)
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
	agents, err := o.s.store.ListAgents(ctx, tenantOf(ctx))
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
	writeJSON(w, http.StatusOK, list)
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
	a, err := o.s.store.ActiveAgent(ctx, tenantOf(ctx), id)
	if agent.IsCode(err, agent.CodeNotFound) {
		err = agent.WithCode(agent.CodeAgentNotFound, err)
	}
	if err != nil {
		o.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, openAIModel{ID: a.ID, Object: "model", OwnedBy: a.TenantID})
}

// chatTurn is the turn that answers a chat completion, and how to follow
// its events from the first.
type chatTurn struct {
	streamID, jobID string
	follow          func(ctx context.Context, send func(agent.Event) error) error
}

func (o openAI) chatCompletions(w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get(headerSession)
	method := pb.AgentService_Stream_FullMethodName
	if session != "" {
		method = pb.AgentService_SendMessage_FullMethodName
	}
	ctx, err := o.authorize(r, method)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	r = r.WithContext(ctx)
	req, prompt, err := o.readChat(r, session)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	// A completion follows its turn, streamed or not: it holds one of
	// the tenant's streams, taken before the turn is started or the
	// message sent.
	ctx, release, err := o.s.holdStream(ctx)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	defer release()
	r = r.WithContext(ctx)
	jobID := r.Header.Get(headerIdempotency)
	var turn chatTurn
	switch {
	case session == "":
		turn, err = o.startTurn(ctx, req, prompt, jobID)
	case req.OutputSchema != nil:
		err = badParam("response_format", codeUnsupportedParameter,
			"response_format json_schema is not supported with %s: a session's messages answer in their agent's format", headerSession)
	default:
		turn, err = o.sendMessage(ctx, session, req.Model, prompt, jobID)
	}
	if err != nil {
		o.fail(w, r, err)
		return
	}
	call := &chatCall{o: o, w: w, r: r, req: req, turn: turn, created: time.Now().Unix()}
	call.run()
}

// readChat reads and checks a chat completion request and its headers,
// and makes the turn's prompt.
func (o openAI) readChat(r *http.Request, session string) (chatRequest, string, error) {
	for _, h := range []string{headerSession, headerIdempotency} {
		if v := r.Header.Get(h); v != "" {
			if err := agent.ValidateID(h, v); err != nil {
				return chatRequest{}, "", err
			}
		}
	}
	body, err := readBody(r)
	if err != nil {
		return chatRequest{}, "", err
	}
	req, err := decodeChatRequest(body)
	if err != nil {
		return req, "", err
	}
	prompt, err := chatPrompt(req.Messages, session != "")
	return req, prompt, err
}

// startTurn prepares a turn of the chat's model as Stream does, with the
// chat's output schema; following it starts it (or attaches to its job's
// run).
func (o openAI) startTurn(ctx context.Context, chat chatRequest, prompt, jobID string) (chatTurn, error) {
	req, err := o.s.prepare(ctx, &pb.TurnRequest{AgentId: chat.Model, Prompt: prompt, JobId: jobID, OutputSchemaJson: string(chat.OutputSchema)})
	if err != nil {
		return chatTurn{}, err
	}
	streamID := contract.TurnWorkflowID(req.TenantID, req.JobID)
	return chatTurn{streamID: streamID, jobID: req.JobID, follow: func(ctx context.Context, send func(agent.Event) error) error {
		return o.s.events.FollowNew(ctx, streamID, func() (string, error) {
			run, err := o.s.startPrepared(ctx, req)
			if err != nil {
				return "", err
			}
			return run.GetRunID(), nil
		}, send)
	}}, nil
}

// sendMessage sends the message to the session's Conversation as
// SendMessage does, once the session is known to be model's, and returns
// the turn that answers it.
func (o openAI) sendMessage(ctx context.Context, session, model, prompt, jobID string) (chatTurn, error) {
	if err := o.checkSession(ctx, session, model); err != nil {
		return chatTurn{}, err
	}
	res, err := o.s.SendMessage(ctx, &pb.SendMessageRequest{SessionId: session, AgentId: model, Prompt: prompt, JobId: jobID})
	if err != nil {
		return chatTurn{}, err
	}
	streamID := res.GetStreamId()
	return chatTurn{streamID: streamID, jobID: res.GetJobId(), follow: func(ctx context.Context, send func(agent.Event) error) error {
		return o.followStarted(ctx, streamID, send)
	}}, nil
}

// checkSession refuses a message for a session whose Conversation runs
// another agent than model: a Conversation keeps the agent it started
// with, and the answer would not be model's. The agent is read from the
// input of the Conversation's current run; a session without one is
// anyone's.
func (o openAI) checkSession(ctx context.Context, session, model string) error {
	id := contract.ConversationWorkflowID(tenantOf(ctx), session)
	it := o.s.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil
	}
	ev, err := it.Next()
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return nil
	case err != nil:
		return agent.WithCode(agent.CodeUnavailable, fmt.Errorf("read conversation %s: %w", id, err))
	}
	start := ev.GetWorkflowExecutionStartedEventAttributes()
	if start == nil {
		return nil
	}
	var in agent.ConversationInput
	if err := converter.GetDefaultDataConverter().FromPayloads(start.GetInput(), &in); err != nil {
		return fmt.Errorf("decode the input of conversation %s: %w", id, err)
	}
	if in.AgentID != model {
		whose := fmt.Sprintf("agent %q", in.AgentID)
		if in.AgentID == "" {
			whose = "no agent (its messages are routed)"
		}
		return agent.Errorf(agent.CodeConflict, "session %q is a conversation with %s: name that agent as the model, or use another session", session, whose)
	}
	return nil
}

// followStarted follows a turn a Conversation starts. SendMessage returns
// once the turn has started, or when the Conversation rolls over to its
// next run, which starts it: a turn not found yet is looked for again,
// for up to startTimeout.
func (o openAI) followStarted(ctx context.Context, streamID string, send func(agent.Event) error) error {
	sent := false
	deadline := time.Now().Add(startTimeout)
	wait := 100 * time.Millisecond
	for {
		err := o.s.events.Follow(ctx, streamID, 0, func(e agent.Event) error {
			sent = true
			return send(e)
		})
		if sent || !agent.IsCode(err, agent.CodeNotFound) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// openAIError is OpenAI's error object, in {"error": …}.
type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// httpStatusError gives an error another HTTP status than its code's.
type httpStatusError struct {
	status int
	err    error
}

func (e *httpStatusError) Error() string { return e.err.Error() }
func (e *httpStatusError) Unwrap() error { return e.err }

func withHTTPStatus(status int, err error) error { return &httpStatusError{status: status, err: err} }

// fail answers err as OpenAI's error object.
func (o openAI) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && !isBodyError(err) {
		return // the client has gone: nobody reads an answer
	}
	writeOpenAIError(w, o.problem(r.Context(), err), err)
}

// problem classifies err as every error of the gateway is: a status the
// service's methods made is read as it is, any other error leaves
// through Status.
func (o openAI) problem(ctx context.Context, err error) Problem {
	st, ok := status.FromError(err)
	if _, typed := errorInfo(st); !ok || !typed {
		st = status.Convert(Status(ctx, o.s.logger, err))
	}
	p := problemFromStatus(st)
	var hs *httpStatusError
	if errors.As(err, &hs) {
		p.Status = hs.status
	}
	return p
}

// turnProblem is a turn's failure as a Problem: its message was written
// for the turn's caller, who reads it in the result too.
func turnProblem(e *agent.TurnError) Problem {
	code, _ := agent.CodeOfType(e.Type)
	class := code.Class()
	return Problem{Type: ProblemTypePrefix + class.Type, Title: class.Type, Status: class.HTTP, Detail: e.Message, Retryable: e.Retryable}
}

// toOpenAIError reads a Problem as OpenAI's error object: type is
// OpenAI's kind of error for the status; code is OpenAI's code where it
// has one for the mistake (a parameter's, or model_not_found,
// invalid_api_key), else the error's type in agent's table; param names
// the parameter at fault.
func toOpenAIError(p Problem, err error) openAIError {
	out := openAIError{Message: p.Detail, Type: openAIErrorType(p.Status), Code: p.Title}
	var pe *chatParamError
	if errors.As(err, &pe) {
		out.Param = &pe.param
		if pe.code != "" {
			out.Code = pe.code
		}
	}
	switch p.Title {
	case agent.ErrTypeAgentNotFound:
		model := "model"
		out.Code, out.Param = "model_not_found", &model
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

// writeOpenAIError answers p. x-should-retry tells OpenAI's clients,
// which retry 409 and 5xx by default, whether the same request may
// succeed later.
func writeOpenAIError(w http.ResponseWriter, p Problem, err error) {
	h := w.Header()
	h.Set("X-Should-Retry", fmt.Sprint(p.Retryable))
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="agentflow"`)
	}
	writeJSON(w, p.Status, struct {
		Error openAIError `json:"error"`
	}{toOpenAIError(p, err)})
}

// writeJSON answers v as JSON, and a newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
