package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// OpenAI's Responses API over turns: POST /v1/responses answers a
// response whole, streamed (Server-Sent Events of the Responses
// vocabulary, numbered from the turn's log: openai_responses_reply.go),
// or at once with background: true; GET /v1/responses/{id} is the
// response as its turn's log has it now, and with stream=true its stream,
// from the start or after starting_after; POST /v1/responses/{id}/cancel
// cancels the turn.
//
// A response's id is its turn's stream id (turn/<tenant>/<job_id>), the
// id every other door names the turn by, so that a response can be
// followed, approved or cancelled on any of them and a turn started on
// any of them read as a response. OpenAI's clients send it escaped as one
// path segment (turn%2Fdemo%2F…), which is how a path must carry it.
//
// Every turn is durable, so background only says when the create request
// answers: at once (queued), or when the turn ends (whole) or as it runs
// (streamed); a client that goes away never cancels a turn either way.
// A response in a session continues it: the session is named by the
// X-Agentflow-Session header, as for a chat completion, or by
// previous_response_id, whose response's session (a turn's session is
// its Conversation's) the new message goes to; a response without a
// session cannot be continued, since a turn without one keeps no
// history. Tenancy, the tenant's stream slots, the idempotency key and
// errors (OpenAI's error object) are the chat completions' own.

// responsesCancelWait bounds how long a cancel waits for the turn to end,
// to answer with the cancelled response.
const responsesCancelWait = 15 * time.Second

// responses serves the Responses API of an openAI.
type responses struct{ o openAI }

// registerResponses adds the endpoints to mux; another method on their
// paths is answered in OpenAI's error shape.
func (o openAI) registerResponses(mux *http.ServeMux) {
	rs := responses{o: o}
	mux.HandleFunc("POST /v1/responses", rs.create)
	mux.HandleFunc("GET /v1/responses/{id}", rs.get)
	mux.HandleFunc("POST /v1/responses/{id}/cancel", rs.cancel)
	for _, path := range []string{"/v1/responses", "/v1/responses/{id}", "/v1/responses/{id}/cancel"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			o.fail(w, r, gateway.WithHTTPStatus(http.StatusMethodNotAllowed, agent.Errorf(agent.CodeInvalid, "%s does not take %s", r.URL.Path, r.Method)))
		})
	}
}

func (rs responses) create(w http.ResponseWriter, r *http.Request) {
	o := rs.o
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
	req, session, prompt, err := rs.read(r, session)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	resp := newResponseObject("", req.chat.Model, time.Now().Unix())
	resp.Background = &req.Background
	if req.Instructions != "" {
		resp.Instructions = &req.Instructions
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	if req.chat.OutputSchema != nil {
		resp.Text.Format = responseSchemaFormat(req.chat.OutputSchema)
	}
	jobID := r.Header.Get(headerIdempotency)
	if req.Background && !req.chat.Stream {
		id, err := rs.start(ctx, req, session, prompt, jobID)
		if err != nil {
			o.fail(w, r, err)
			return
		}
		resp.ID = id
		w.Header().Set(gateway.HeaderStreamID, id)
		gateway.WriteJSON(w, http.StatusOK, resp)
		return
	}
	// Followed to its end or streamed: the response holds one of the
	// tenant's streams, taken before the turn is started.
	ctx, release, err := o.s.HoldStream(ctx)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	defer release()
	r = r.WithContext(ctx)
	var turn gateway.Turn
	if session == "" {
		turn, err = o.startTurn(ctx, req.chat, prompt, jobID)
	} else {
		turn, err = o.s.SendToSession(ctx, session, req.chat.Model, prompt, jobID)
	}
	if err != nil {
		o.fail(w, r, err)
		return
	}
	resp.ID = turn.StreamID
	call := &responseCall{o: o, w: w, r: r, stream: req.chat.Stream, after: -1, fold: newResponseFold(resp)}
	call.run(turn.Follow)
}

// read reads and checks a create request and its headers: the request,
// the session it continues ("" for none) and the turn's prompt.
func (rs responses) read(r *http.Request, session string) (responseRequest, string, string, error) {
	for _, h := range []string{headerSession, headerIdempotency} {
		if v := r.Header.Get(h); v != "" {
			if err := agent.ValidateID(h, v); err != nil {
				return responseRequest{}, "", "", err
			}
		}
	}
	body, err := gateway.ReadBody(r)
	if err != nil {
		return responseRequest{}, "", "", err
	}
	req, err := decodeResponseRequest(body)
	if err != nil {
		return req, "", "", err
	}
	if req.PreviousResponseID != "" {
		if session != "" {
			return req, "", "", badParam("previous_response_id", "", "previous_response_id and the header %s both name a session: give one", headerSession)
		}
		// Continuing a session is SendMessage's work.
		ctx, err := rs.o.authorize(r, pb.AgentService_SendMessage_FullMethodName)
		if err != nil {
			return req, "", "", err
		}
		if session, err = rs.sessionOf(ctx, req.PreviousResponseID); err != nil {
			return req, "", "", err
		}
	}
	if session != "" && req.chat.OutputSchema != nil {
		return req, "", "", badParam("text.format", codeUnsupportedParameter,
			"text.format json_schema is not supported in a session: a session's messages answer in their agent's format")
	}
	prompt, err := req.prompt(session != "")
	return req, session, prompt, err
}

// sessionOf is the session of the response id names, which a response
// that names it as its previous one continues.
func (rs responses) sessionOf(ctx context.Context, id string) (string, error) {
	t, err := rs.describe(ctx, id)
	if agent.IsCode(err, agent.CodeNotFound) {
		return "", &chatParamError{param: "previous_response_id", err: agent.WithCode(agent.CodeNotFound, err)}
	}
	if err != nil {
		return "", err
	}
	if t.session == "" {
		return "", badParam("previous_response_id", codeUnsupportedValue,
			"response %q was not in a session, and keeps no history to continue: start a conversation in a session (header %s), whose responses can be continued", id, headerSession)
	}
	return t.session, nil
}

// start starts the turn that answers req in the background and returns
// its stream id: a new turn, or the message to the session.
func (rs responses) start(ctx context.Context, req responseRequest, session, prompt, jobID string) (string, error) {
	if session != "" {
		turn, err := rs.o.s.SendToSession(ctx, session, req.chat.Model, prompt, jobID)
		return turn.StreamID, err
	}
	tr, err := rs.o.s.Prepare(ctx, &pb.TurnRequest{AgentId: req.chat.Model, Prompt: prompt, JobId: jobID, OutputSchemaJson: string(req.chat.OutputSchema)})
	if err != nil {
		return "", err
	}
	run, err := rs.o.s.StartPrepared(ctx, tr)
	if err != nil {
		return "", err
	}
	return run.GetID(), nil
}

// turnInfo is what a turn's workflow says of it, beside its log.
type turnInfo struct {
	created        int64
	agent, session string
}

// describe reads the turn of a response id of the caller's tenant;
// another tenant's, or no turn, is not found.
func (rs responses) describe(ctx context.Context, id string) (turnInfo, error) {
	notFound := agent.Errorf(agent.CodeNotFound, "response %q not found", id)
	if err := gateway.OwnStream(ctx, id); err != nil {
		return turnInfo{}, notFound
	}
	d, err := rs.o.s.Client().DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return turnInfo{}, notFound
	case err != nil:
		return turnInfo{}, agent.WithCode(agent.CodeUnavailable, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != contract.AgentTurn {
		return turnInfo{}, notFound
	}
	attrs := info.GetSearchAttributes().GetIndexedFields()
	keyword := func(name string) string {
		var s string
		if p := attrs[name]; p != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
		}
		return s
	}
	if t := keyword(contract.SearchTenant.GetName()); t != "" && t != gateway.TenantOf(ctx) {
		return turnInfo{}, notFound
	}
	return turnInfo{created: info.GetStartTime().AsTime().Unix(), agent: keyword(contract.SearchAgent.GetName()), session: keyword(contract.SearchSession.GetName())}, nil
}

// snapshot folds the turn's log as it is now; done says it has ended.
func (rs responses) snapshot(ctx context.Context, id string, resp responseObject) (*responseFold, bool, error) {
	f := newResponseFold(resp)
	var after int64
	for {
		page, err := turnclient.Events(ctx, rs.o.s.Client(), id, agent.EventsQuery{AfterIndex: after, Limit: gateway.MaxEventsPage})
		if err != nil {
			return nil, false, err
		}
		if page.TenantID != "" && page.TenantID != gateway.TenantOf(ctx) {
			return nil, false, agent.Errorf(agent.CodeNotFound, "response %q not found", id)
		}
		for _, e := range page.Events {
			f.add(e)
			after = e.Index
		}
		if len(page.Events) == 0 || after >= page.Next-1 {
			return f, page.Done, nil
		}
	}
}

func (rs responses) get(w http.ResponseWriter, r *http.Request) {
	o := rs.o
	// Reading a response's log is ListEvents' work, following it
	// Resume's: what the request asks is known once its body, if any, is
	// read, which is once it is authenticated.
	ctx, err := o.authorize(r, pb.AgentService_ListEvents_FullMethodName)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	r = r.WithContext(ctx)
	stream, after, err := readResponseQuery(r)
	if err == nil && stream {
		_, err = o.authorize(r, pb.AgentService_Resume_FullMethodName)
	}
	if err != nil {
		o.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	t, err := rs.describe(ctx, id)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	resp := newResponseObject(id, t.agent, t.created)
	if !stream {
		f, _, err := rs.snapshot(ctx, id, resp)
		if err != nil {
			o.fail(w, r, err)
			return
		}
		gateway.WriteJSON(w, http.StatusOK, f.resp)
		return
	}
	ctx, release, err := o.s.HoldStream(ctx)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	defer release()
	call := &responseCall{o: o, w: w, r: r.WithContext(ctx), stream: true, after: after, fold: newResponseFold(resp)}
	call.run(func(ctx context.Context, send func(agent.Event) error) error {
		return o.s.Events().Follow(ctx, id, 0, send)
	})
}

// readResponseQuery reads what GET /v1/responses/{id} asks: stream, and
// starting_after (only with stream; -1 when not given), from its query;
// stream from its body too (readGetBody). include and
// include_obfuscation are taken and ignored: a response has what it has,
// and its events carry no padding.
func readResponseQuery(r *http.Request) (stream bool, after int64, err error) {
	after = -1
	for k, v := range r.URL.Query() {
		switch k {
		case "stream":
			if stream, err = strconv.ParseBool(v[0]); err != nil || len(v) > 1 {
				return false, 0, badParam(k, "", "stream %q: want true or false", agent.Clip(v[0], 32))
			}
		case "starting_after":
			if after, err = strconv.ParseInt(v[0], 10, 64); err != nil || after < 0 || len(v) > 1 {
				return false, 0, badParam(k, "", "starting_after %q: want the sequence number (0 or more) of the last event read", agent.Clip(v[0], 32))
			}
		case "include", "include[]", "include_obfuscation":
		default:
			return false, 0, badParam(agent.Clip(k, 64), codeUnknownParameter, "unknown query parameter %q: a response is read with stream, starting_after, include and include_obfuscation", agent.Clip(k, 64))
		}
	}
	if !stream {
		if stream, err = readGetBody(r); err != nil {
			return false, 0, err
		}
	}
	if after >= 0 && !stream {
		return false, 0, badParam("starting_after", "", "starting_after is only taken with stream=true")
	}
	return stream, after, nil
}

// readGetBody reads the body a GET may carry: OpenAI's Go client asks
// for a response's stream with {"stream": true} in it rather than in the
// query.
func readGetBody(r *http.Request) (stream bool, err error) {
	body, err := gateway.ReadBody(r)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return false, err
	}
	var b struct {
		Stream bool `json:"stream"`
	}
	if err := readJSON("stream", body, `{"stream": true}, or nothing`, &b); err != nil {
		return false, err
	}
	return b.Stream, nil
}

func (rs responses) cancel(w http.ResponseWriter, r *http.Request) {
	o := rs.o
	ctx, err := o.authorize(r, pb.AgentService_Cancel_FullMethodName)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	r = r.WithContext(ctx)
	id := r.PathValue("id")
	t, err := rs.describe(ctx, id)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	resp := newResponseObject(id, t.agent, t.created)
	f, done, err := rs.snapshot(ctx, id, resp)
	if err == nil && !done {
		req := agent.CancelRequest{Reason: "cancelled through the Responses API", RequestedBy: gateway.CallerOf(ctx).Name}
		err = turnclient.Cancel(ctx, o.s.Client(), id, req)
		if agent.IsCode(err, agent.CodeConflict) {
			err = nil // it has ended meanwhile: the response says how
		}
		if err == nil {
			f, err = rs.waitEnd(ctx, id, resp)
		}
	}
	switch {
	case err != nil:
		o.fail(w, r, err)
	case f.ended && f.resp.Status != respCancelled:
		o.fail(w, r, agent.Errorf(agent.CodeConflict, "response %q has already ended %s: there is nothing to cancel", id, f.resp.Status))
	default:
		gateway.WriteJSON(w, http.StatusOK, f.resp)
	}
}

// waitEnd follows the turn until it ends, or for responsesCancelWait,
// and returns its fold.
func (rs responses) waitEnd(ctx context.Context, id string, resp responseObject) (*responseFold, error) {
	wctx, cancel := context.WithTimeout(ctx, responsesCancelWait)
	defer cancel()
	f := newResponseFold(resp)
	err := rs.o.s.Events().Follow(wctx, id, 0, func(e agent.Event) error {
		f.add(e)
		return nil
	})
	if err != nil && wctx.Err() == nil {
		return nil, err
	}
	return f, nil
}

// responseSchemaFormat is the text format of a response whose answer
// matches schema.
func responseSchemaFormat(schema json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	}{"json_schema", "output", schema, true})
	return b
}
