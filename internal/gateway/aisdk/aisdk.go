// Package aisdk serves the Vercel AI SDK's UI message stream protocol
// (useChat's DefaultChatTransport) at /v1/ui/chat: a chat's messages as
// turns, their events as UI message chunks, approvals answered in the
// next request, and a stream resumed after a reconnect.
//
// A door: it builds on the gateway's core and must not import another door,
// the workflows or the store.
package aisdk

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The Vercel AI SDK's chat endpoint: a React app's useChat, with the
// SDK's default transport pointed here, drives a durable agent. A chat is
// a session: its id names the Conversation that answers its messages, so
// the chat's next message continues it. The request is the transport's
// (aisdk_request.go); the answer is the SDK's UI message stream
// (aisdk_map.go): Server-Sent Events whose data are the chunks of one
// assistant message, whose id is its turn's job id, ending with [DONE].
//
// The path is the SDK's UI protocol's, beside OpenAI's
// /v1/chat/completions: /v1/ui/chat. The transport derives its resume
// route from it ({api}/{chatId}/stream), which GET serves. Both routes
// take one query parameter, which the transport sends with each request
// when its api has it: ai_sdk, the SDK's major version; ai_sdk=7 streams
// text and reasoning token by token, a retried model call as reset-step
// (uiMapper).
//
// A request is authorized as the gRPC calls whose work it does, with the
// gRPC API's code (a.Caller): every answer follows a turn (Resume); a
// message is SendMessage; approval responses are Approve, whose role
// (approver) a user's token lacks. Streams take a slot of the tenant's
// (a.Service().streams) and read the turn through the one follower.
const (
	uiChatPath   = "/v1/ui/chat"
	uiResumePath = "/v1/ui/chat/{id}/stream"
)

// UIMessageStreamHeader marks an answer as the AI SDK's UI message
// stream, in the version the SDK's clients read.
const UIMessageStreamHeader = "X-Vercel-Ai-Ui-Message-Stream"

func (a *server) registerAISDK(mux *http.ServeMux) {
	mux.HandleFunc("POST "+uiChatPath, a.uiChat)
	mux.HandleFunc("GET "+uiResumePath, a.uiResume)
	a.RefuseOtherMethods(mux, uiChatPath, uiResumePath)
}

// uiChat answers a chat request: a user message, or the answers to tool
// calls' approval requests.
func (a *server) uiChat(w http.ResponseWriter, r *http.Request) {
	var req uiChatRequest
	var ask uiAsk
	var mode projection.Mode
	r, release, ok := a.OpenChat(w, r, pb.AgentService_Resume_FullMethodName, func(_ context.Context, body []byte) (err error) {
		mode, err = decodeUIQuery(r.URL.Query())
		if err == nil {
			req, err = decodeUIChat(body)
		}
		if err == nil {
			ask, err = req.ask()
		}
		return err
	})
	if !ok {
		return
	}
	defer release()
	if len(ask.Decisions) > 0 {
		a.uiDecide(w, r, mode, req, ask)
		return
	}
	a.uiSend(w, r, mode, req, ask)
}

// uiSend sends the user's message to the chat's Conversation and streams
// the turn that answers it. A chat still answering its last message
// (running, or waiting for approvals) is a conflict: messages would
// queue behind it unseen.
func (a *server) uiSend(w http.ResponseWriter, r *http.Request, mode projection.Mode, req uiChatRequest, ask uiAsk) {
	r, ok := a.Authorized(w, r, pb.AgentService_SendMessage_FullMethodName)
	if !ok {
		return
	}
	ctx := r.Context()
	err := a.Service().CheckSession(ctx, req.ChatID, req.Agent)
	running := ""
	if err == nil {
		running, err = a.Service().SessionTurn(ctx, req.ChatID)
	}
	if err == nil && running != "" && !a.turnEnded(ctx, running) {
		err = agent.Errorf(agent.CodeConflict, "chat %q is still answering message %q: resume it (GET %s/%s/stream) or answer its approval requests before sending the next message",
			req.ChatID, jobOf(running), uiChatPath, req.ChatID)
	}
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	u := &uiStream{a: a, w: w, r: r, m: newUIMapper(mode)}
	u.serve(func(ctx context.Context, send func(agent.Event) error) error {
		res, err := a.Service().SendMessage(ctx, &pb.SendMessageRequest{SessionId: req.ChatID, AgentId: req.Agent, Prompt: ask.Prompt})
		if err != nil {
			return err
		}
		u.setTurn(res.GetStreamId(), res.GetJobId())
		return a.Service().FollowStarted(ctx, res.GetStreamId(), send)
	})
}

// uiDecide decides the calls the request answers, as Approve does, then
// goes on with the turn's stream where the client's message stopped: at
// the approval requests.
func (a *server) uiDecide(w http.ResponseWriter, r *http.Request, mode projection.Mode, req uiChatRequest, ask uiAsk) {
	r, ok := a.Authorized(w, r, pb.AgentService_Approve_FullMethodName)
	if !ok {
		return
	}
	if !strings.HasPrefix(ask.Answer, req.ChatID+"-") {
		// A chat's answers are its Conversation's turns: <chat id>-<n>.
		a.Refuse(w, r, agent.Errorf(agent.CodeNotFound, "message %s is not an answer in chat %q", ask.Answer, req.ChatID))
		return
	}
	streamID := contract.TurnWorkflowID(gateway.TenantOf(r.Context()), ask.Answer)
	u := &uiStream{a: a, w: w, r: r, m: newUIMapper(mode), streamID: streamID, messageID: ask.Answer, quiet: map[string]bool{}}
	for _, d := range ask.Decisions {
		u.quiet[d.CallID] = true
	}
	u.serve(func(ctx context.Context, send func(agent.Event) error) error {
		for _, d := range ask.Decisions {
			decision := agent.NewApprovalDecision(d.CallID, d.Approved, d.Reason, "")
			decision.ApprovalID = d.ApprovalID
			if _, err := a.Service().Decide(ctx, streamID, decision); err != nil {
				return err
			}
		}
		return a.Service().Events().Follow(ctx, streamID, 0, send)
	})
}

// uiResume re-attaches a reconnecting client to the turn its chat is
// running, from the start of the turn's message (the client rebuilds the
// message from it); 204 when the chat runs none, which is also the
// answer for a chat id no Conversation of the caller's tenant has.
func (a *server) uiResume(w http.ResponseWriter, r *http.Request) {
	r, ok := a.Authorized(w, r, pb.AgentService_Resume_FullMethodName)
	if !ok {
		return
	}
	chatID := r.PathValue("id")
	err := agent.ValidateID("chat id", chatID)
	mode, qerr := decodeUIQuery(r.URL.Query())
	err = gateway.FirstError(err, qerr)
	streamID := ""
	if err == nil {
		streamID, err = a.Service().SessionTurn(r.Context(), chatID)
	}
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	if streamID == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	u := &uiStream{a: a, w: w, r: r, m: newUIMapper(mode), streamID: streamID, messageID: jobOf(streamID)}
	u.serve(func(ctx context.Context, send func(agent.Event) error) error {
		return a.Service().Events().Follow(ctx, streamID, 0, send)
	})
}

// turnEnded: the turn has logged its final status. Its Conversation
// records the turn's end a moment later; a message sent meanwhile waits
// that moment, not for an answer.
func (a *server) turnEnded(ctx context.Context, streamID string) bool {
	v, err := a.Service().Client().QueryWorkflow(ctx, streamID, "", contract.QueryStatus)
	var st agent.TurnStatus
	if err != nil || v.Get(&st) != nil {
		return false
	}
	switch st.Status {
	case agent.StreamCompleted, agent.StreamFailed, agent.StreamCanceled:
		return true
	}
	return false
}

// jobOf is the job id of a turn's stream id (turn/<tenant>/<job>).
func jobOf(streamID string) string {
	return streamID[strings.LastIndexByte(streamID, '/')+1:]
}

// uiStream answers one chat request with a turn's UI message stream.
type uiStream struct {
	a *server
	w http.ResponseWriter
	r *http.Request
	m *uiMapper
	// streamID and messageID are the turn's stream and job ids; a follow
	// that sends the message sets them (setTurn) before its first event.
	mu                  sync.Mutex
	streamID, messageID string
	// quiet, on a stream that goes on after approvals, holds the calls
	// decided: nothing is written until the WAITING_APPROVAL status after
	// their approval requests, where the client's message stopped. The
	// events before it are mapped all the same, so that the parts'
	// state (and ids) are the first reading's.
	quiet map[string]bool

	st      *gateway.EventWriter
	started bool // the start chunk is sent
	ended   bool // [DONE] is sent
}

// serve answers with the chunks of the events follow sends
// (HTTPAPI.ServeChat): a refusal before the first chunk — a turn not
// found, a message refused, a decision refused — is a problem with its
// HTTP status; a failure after it is an error chunk.
func (u *uiStream) serve(follow func(ctx context.Context, send func(agent.Event) error) error) {
	u.st = u.a.NewEventWriter(u.w, u.r)
	u.st.OnBegin = func(h http.Header) {
		h.Set(UIMessageStreamHeader, "v1")
		if streamID, _ := u.turn(); streamID != "" {
			h.Set(gateway.HeaderStreamID, streamID)
		}
	}
	u.a.ServeChat(u.w, u.r, u.st, u, follow)
}

// Event implements gateway.ChatStream.
func (u *uiStream) Event(ctx context.Context, e agent.Event) (bool, error) {
	err := u.event(ctx, e)
	return u.ended, err
}

// event maps one event and writes its chunks; the turn's end, or calls
// left waiting for approval, end the message.
func (u *uiStream) event(ctx context.Context, e agent.Event) error {
	chunks := u.m.add(e)
	waiting := e.Child == nil && e.Kind == agent.EventStatus && e.Status == agent.StreamWaitingApproval
	if u.quiet != nil && !e.Terminal() {
		if waiting && u.requested() {
			u.quiet = nil
		}
		return nil
	}
	u.quiet = nil
	if err := u.write(chunks...); err != nil {
		return err
	}
	switch {
	case e.Terminal():
		return u.end()
	case waiting && len(u.m.waiting) > 0 && u.stillWaiting(ctx):
		if err := u.write(u.m.pause()...); err != nil {
			return err
		}
		return u.end()
	}
	return nil
}

// setTurn names the turn the stream follows.
func (u *uiStream) setTurn(streamID, messageID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.streamID, u.messageID = streamID, messageID
}

// turn is the turn the stream follows ("" until it is known).
func (u *uiStream) turn() (streamID, messageID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.streamID, u.messageID
}

// requested: every call in quiet has asked for approval.
func (u *uiStream) requested() bool {
	for id := range u.quiet {
		if !u.m.requested[id] {
			return false
		}
	}
	return true
}

// stillWaiting asks the turn whether a call the message has requested
// approval for still waits: a stream read after the decision (a resumed
// one) goes on. When the turn cannot say, the message stops there; the
// client can resume.
func (u *uiStream) stillWaiting(ctx context.Context) bool {
	streamID, _ := u.turn()
	pending, err := turnclient.PendingApprovals(ctx, u.a.Service().Client(), streamID)
	if err != nil {
		u.a.Logger().Debug("pending approvals unknown; the message stops at the approval requests", zap.String("stream_id", streamID), zap.Error(err))
		return true
	}
	return slices.ContainsFunc(pending, func(p agent.PendingApproval) bool { return u.m.waiting[p.CallID] })
}

// write writes chunks, after the start chunk that names the message.
func (u *uiStream) write(chunks ...uiChunk) error {
	if len(chunks) == 0 {
		return nil
	}
	if !u.started {
		u.started = true
		_, messageID := u.turn()
		chunks = append([]uiChunk{{Type: "start", MessageID: messageID}}, chunks...)
	}
	return gateway.WriteData(u.st, chunks...)
}

// end writes the stream's last line.
func (u *uiStream) end() error {
	u.ended = true
	_, err := u.w.Write([]byte("data: [DONE]\n\n"))
	return err
}

// Fail answers the follower's outcome when the message has not ended: a
// problem before the stream began, an error chunk after.
func (u *uiStream) Fail(err error) {
	ctx := u.r.Context()
	if ctx.Err() != nil || u.a.Ending().Err() != nil {
		return // the client left, or the gateway is stopping: the client resumes
	}
	if err == nil {
		streamID, _ := u.turn()
		err = agent.Errorf(agent.CodeUnavailable, "stream %q ended without a final status", streamID)
	}
	p, inStream := u.st.Failure(err)
	if !inStream {
		return
	}
	if u.write(uiChunk{Type: "error", ErrorText: p.Detail}) == nil && u.end() == nil {
		_ = u.st.Flush()
	}
	u.a.Logger().Debug("ui message stream ended by a failure", zap.String("type", p.Title))
}

// Door serves the AI SDK's UI message stream on the HTTP API's listener.
var Door = gateway.NewDoor(agent.ChannelAISDK, func(mux *http.ServeMux, api *gateway.HTTPAPI) { (&server{api}).registerAISDK(mux) })

// server is the door on one HTTP API: its handlers are server's methods,
// with the core's helpers and turn service (Service) at hand.
type server struct{ *gateway.HTTPAPI }
