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
	"github.com/agentflow/agentflow/internal/words"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// OpenAI's Responses API over turns: POST /v1/responses answers a
// response whole, streamed (Server-Sent Events of the Responses
// vocabulary, numbered from the turn's log: openai_responses_reply.go),
// or at once with background: true; GET /v1/responses/{id} is the
// response as its turn's log has it now, and with stream=true its stream,
// from the start or after starting_after; POST /v1/responses/{id}/cancel
// cancels the turn. POST /v1/responses with mcp_approval_response items
// decides a response's approval requests (openai_responses_approve.go).
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
	var req responseRequest
	var goesOn *responseObject // the response whose turn the decisions go on with
	rs.o.create(w, r, func(r *http.Request, ask turnAsk) (turnAsk, bool, error) {
		var err error
		req, err = rs.read(r, &ask)
		if err == nil && len(req.Approvals) > 0 {
			// Deciding approvals is Approve's work.
			_, err = rs.o.authorize(r, pb.AgentService_Approve_FullMethodName)
			ask.goOn = func(ctx context.Context) (gateway.Turn, error) {
				resp, turn, err := rs.decide(ctx, req)
				goesOn = &resp
				return turn, err
			}
		}
		return ask, !req.Background || req.chat.Stream, err
	}, func(r *http.Request, turn gateway.Turn) {
		resp := goesOn
		if resp == nil {
			resp = req.newResponse(turn.StreamID)
		}
		resp.Background = &req.Background
		var f *responseFold
		var err error
		switch {
		case !req.Background || req.chat.Stream:
			call := &responseCall{answer: answer{o: rs.o, w: w, r: r}, stream: req.chat.Stream, after: -1, fold: newResponseFold(*resp)}
			for _, a := range req.Approvals {
				call.fold.settled[a.RequestID] = true // decided: the log shows it soon
			}
			call.run(turn.Follow)
			return
		case goesOn != nil: // in the background: as it is now
			f, _, err = rs.snapshot(r.Context(), *resp)
		default: // in the background: queued
			f = newResponseFold(*resp)
		}
		if err != nil {
			rs.o.fail(w, r, err)
			return
		}
		w.Header().Set(gateway.HeaderStreamID, turn.StreamID)
		gateway.WriteJSON(w, http.StatusOK, f.resp)
	})
}

// newResponse is the response of the turn streamID that req starts,
// before it has run.
func (req responseRequest) newResponse(streamID string) *responseObject {
	resp := newResponseObject(streamID, req.chat.Model, time.Now().Unix())
	if req.Instructions != "" {
		resp.Instructions = &req.Instructions
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	if req.chat.OutputSchema != nil {
		resp.Text.Format = responseSchemaFormat(req.chat.OutputSchema)
	}
	return &resp
}

// read reads a create request's body into ask: the turn's model, prompt
// and output schema, and the session it continues (the header's, or
// previous_response_id's).
func (rs responses) read(r *http.Request, ask *turnAsk) (responseRequest, error) {
	body, err := gateway.ReadBody(r)
	if err != nil {
		return responseRequest{}, err
	}
	req, err := decodeResponseRequest(body)
	if err != nil {
		return req, err
	}
	ask.model, ask.schema, ask.schemaParam = req.chat.Model, req.chat.OutputSchema, "text.format"
	if len(req.Approvals) > 0 {
		if ask.session != "" {
			return req, badParam("input", "", "mcp_approval_response items go on with the turn of previous_response_id, in a session or not: the header %s names none", headerSession)
		}
		return req, nil
	}
	if req.PreviousResponseID != "" {
		if ask.session != "" {
			return req, badParam("previous_response_id", "", "previous_response_id and the header %s both name a session: give one", headerSession)
		}
		// Continuing a session is SendMessage's work.
		ctx, err := rs.o.authorize(r, pb.AgentService_SendMessage_FullMethodName)
		if err != nil {
			return req, err
		}
		if ask.session, err = rs.sessionOf(ctx, req.PreviousResponseID); err != nil {
			return req, err
		}
	}
	ask.prompt, err = req.prompt(ask.session != "")
	return req, err
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

// open is the response id names, of the caller's tenant, before its
// log is read.
func (rs responses) open(ctx context.Context, id string) (responseObject, error) {
	t, err := rs.describe(ctx, id)
	return newResponseObject(id, t.agent, t.created), err
}

// snapshot folds the turn's log as it is now (Service.Events: at once,
// also during a local model call); done says it has ended.
func (rs responses) snapshot(ctx context.Context, resp responseObject) (*responseFold, bool, error) {
	f := newResponseFold(resp)
	var after int64
	for {
		page, err := rs.o.s.Events().Read(ctx, resp.ID, after, gateway.MaxEventsPage, 0)
		if err != nil {
			return nil, false, err
		}
		if page.TenantID != "" && page.TenantID != gateway.TenantOf(ctx) {
			return nil, false, agent.Errorf(agent.CodeNotFound, "response %q not found", resp.ID)
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

// follow answers resp from its turn's log, which it follows holding one
// of the tenant's streams: whole once the turn ends, or streamed, after
// the sequence number after (-1: from the start).
func (rs responses) follow(w http.ResponseWriter, r *http.Request, resp responseObject, stream bool, after int64) {
	ctx, release, err := rs.o.s.HoldStream(r.Context())
	if err != nil {
		rs.o.fail(w, r, err)
		return
	}
	defer release()
	call := &responseCall{answer: answer{o: rs.o, w: w, r: r.WithContext(ctx)}, stream: stream, after: after, fold: newResponseFold(resp)}
	call.run(func(ctx context.Context, send func(agent.Event) error) error {
		return rs.o.s.Events().Follow(ctx, resp.ID, 0, send)
	})
}

func (rs responses) get(w http.ResponseWriter, r *http.Request) {
	o := rs.o
	// Reading a response's log is ListEvents' work, following it
	// Resume's: what the request asks is known once its body, if any, is
	// read, which is once it is authenticated.
	ctx, err := o.authorize(r, pb.AgentService_ListEvents_FullMethodName)
	var stream bool
	var after int64
	if err == nil {
		r = r.WithContext(ctx)
		stream, after, err = readResponseQuery(r)
	}
	if err == nil && stream {
		_, err = o.authorize(r, pb.AgentService_Resume_FullMethodName)
	}
	var resp responseObject
	if err == nil {
		resp, err = rs.open(ctx, r.PathValue("id"))
	}
	var f *responseFold
	if err == nil && !stream {
		f, _, err = rs.snapshot(ctx, resp)
	}
	switch {
	case err != nil:
		o.fail(w, r, err)
	case stream:
		rs.follow(w, r, resp, true, after)
	default:
		gateway.WriteJSON(w, http.StatusOK, f.resp)
	}
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
				return false, 0, badParam(k, "", "stream %q: want true or false", words.Clip(v[0], 32))
			}
		case "starting_after":
			if after, err = strconv.ParseInt(v[0], 10, 64); err != nil || after < 0 || len(v) > 1 {
				return false, 0, badParam(k, "", "starting_after %q: want the sequence number (0 or more) of the last event read", words.Clip(v[0], 32))
			}
		case "include", "include[]", "include_obfuscation":
		default:
			return false, 0, badParam(words.Clip(k, 64), codeUnknownParameter, "unknown query parameter %q: a response is read with stream, starting_after, include and include_obfuscation", words.Clip(k, 64))
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
	var resp responseObject
	if err == nil {
		r = r.WithContext(ctx)
		resp, err = rs.open(ctx, r.PathValue("id"))
	}
	var f *responseFold
	done := false
	if err == nil {
		f, done, err = rs.snapshot(ctx, resp)
	}
	if err == nil && !done {
		req := agent.CancelRequest{Reason: "cancelled through the Responses API", RequestedBy: gateway.CallerOf(ctx).Name}
		err = o.s.CancelTurn(ctx, resp.ID, req)
		if agent.IsCode(err, agent.CodeConflict) {
			err = nil // it has ended meanwhile: the response says how
		}
		if err == nil {
			f, err = rs.waitEnd(ctx, resp)
		}
	}
	switch {
	case err != nil:
		o.fail(w, r, err)
	case f.ended && f.resp.Status != respCancelled:
		o.fail(w, r, agent.Errorf(agent.CodeConflict, "response %q has already ended %s: there is nothing to cancel", resp.ID, f.resp.Status))
	default:
		gateway.WriteJSON(w, http.StatusOK, f.resp)
	}
}

// waitEnd follows the turn until it ends, or for responsesCancelWait,
// and returns its fold.
func (rs responses) waitEnd(ctx context.Context, resp responseObject) (*responseFold, error) {
	wctx, cancel := context.WithTimeout(ctx, responsesCancelWait)
	defer cancel()
	f := newResponseFold(resp)
	err := rs.o.s.Events().Follow(wctx, resp.ID, 0, func(e agent.Event) error {
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
