// Package sse serves a turn's events as Server-Sent Events: follow a
// turn, start one, or send a conversation a message, and read what the
// turn logs, resuming with Last-Event-ID.
//
// A door: it builds on the gateway's core and must not import another door,
// the workflows or the store.
package sse

import (
	"context"
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Server-Sent Events: a turn's events as an event stream. Each event is
// one SSE event whose id is its index, whose type is its kind and whose
// data is its JSON, exactly as the log and the events query hold it
// (agent.Event). A client that reconnects sends Last-Event-ID (or
// after_index) and gets the events after it, none twice and none
// missing. The stream ends after the turn's terminal status.

// Routes of the event streams, beside the HTTP API's own: a turn's events
// are read where its page reads are (/v1/{stream_id}/events), with
// AIP-136's custom-method suffix that /v1/turns:invoke uses too.
const (
	sseFollowPath  = "GET /v1/turn/{tenant}/{job}/events:stream"
	sseStartPath   = "POST /v1/turns:stream"
	sseMessagePath = "POST /v1/conversations/{session_id}/messages:stream"
)

func (a *server) registerSSE(mux *http.ServeMux) {
	mux.HandleFunc(sseFollowPath, a.sseFollow)
	mux.HandleFunc(sseStartPath, a.sseStart)
	mux.HandleFunc(sseMessagePath, a.sseMessage)
}

// sseFollow streams a turn's events after the client's index: gRPC
// Resume.
func (a *server) sseFollow(w http.ResponseWriter, r *http.Request) {
	streamID := "turn/" + r.PathValue("tenant") + "/" + r.PathValue("job")
	r, ok := a.Authorized(w, r, pb.AgentService_Resume_FullMethodName)
	if !ok {
		return
	}
	after, _, err := gateway.ResumeIndex(r.Header.Values("Last-Event-ID"), r.URL.Query())
	if err == nil {
		err = gateway.OwnStream(r.Context(), streamID)
	}
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	a.ServeSSE(w, r, func(ctx context.Context, send func(agent.Event) error) error {
		return a.Service().Events().Follow(ctx, streamID, after, send)
	})
}

// sseStart starts a turn and streams it: gRPC Stream. A client that
// reconnects (Last-Event-ID or after_index) and names the turn's job_id
// resumes that turn's stream instead, and nothing is started: fetch-based
// SSE clients reconnect by sending the same request again.
func (a *server) sseStart(w http.ResponseWriter, r *http.Request) {
	var in pb.TurnRequest
	r, resume, ok := a.open(w, r, pb.AgentService_Stream_FullMethodName, &in, "turn")
	if !ok {
		return
	}
	req, err := a.Service().Prepare(r.Context(), &in)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	streamID := contract.TurnWorkflowID(req.TenantID, req.JobID)
	a.ServeSSE(w, r, func(ctx context.Context, send func(agent.Event) error) error {
		if resume.ok {
			return a.Service().Events().Follow(ctx, streamID, resume.after, send)
		}
		return a.Service().FollowNew(ctx, req, nil, send)
	})
}

// sseMessage sends a message to a session's conversation and streams the
// turn that answers it (SendMessage, then the turn's events). As with
// sseStart, a reconnecting client that names the message's job_id
// resumes its turn's stream, and nothing is sent.
func (a *server) sseMessage(w http.ResponseWriter, r *http.Request) {
	var in pb.SendMessageRequest
	r, resume, ok := a.open(w, r, pb.AgentService_SendMessage_FullMethodName, &in, "message")
	if !ok {
		return
	}
	in.SessionId = r.PathValue("session_id") // the path's, as the message route does
	a.ServeSSE(w, r, func(ctx context.Context, send func(agent.Event) error) error {
		streamID, after := contract.TurnWorkflowID(gateway.TenantOf(ctx), in.GetJobId()), resume.after
		if !resume.ok {
			res, err := a.Service().SendMessage(ctx, &in)
			if err != nil {
				return err
			}
			streamID, after = res.GetStreamId(), 0
		}
		return a.Service().Events().Follow(ctx, streamID, after, send)
	})
}

// resumeAt is where a reconnecting client resumes its stream: after the
// index it sends, when it sends one (ok).
type resumeAt struct {
	after int64
	ok    bool
}

// jobRequest is a request whose turn is named by its job id.
type jobRequest interface {
	proto.Message
	GetJobId() string
}

// open reads a request that streams a turn it starts or sends: r
// authorized as a call of method, its body decoded into in, and where a
// reconnecting client resumes (Last-Event-ID or after_index), which needs
// the job_id of its turn or message (of). A refusal is answered as a
// problem, and ok is false.
func (a *server) open(w http.ResponseWriter, r *http.Request, method string, in jobRequest, of string) (_ *http.Request, _ resumeAt, ok bool) {
	r, ok = a.Authorized(w, r, method)
	if !ok {
		return nil, resumeAt{}, false
	}
	var at resumeAt
	var err error
	at.after, at.ok, err = gateway.ResumeIndex(r.Header.Values("Last-Event-ID"), r.URL.Query())
	if err == nil {
		err = gateway.DecodeBody(r, in)
	}
	if err == nil && at.ok && in.GetJobId() == "" {
		err = agent.Errorf(agent.CodeInvalid, "a stream resumed after an index needs the job_id of its %s", of)
	}
	if err != nil {
		a.Refuse(w, r, err)
		return nil, resumeAt{}, false
	}
	return r, at, true
}

// Door serves Server-Sent Events on the HTTP API's listener.
var Door = gateway.NewDoor(agent.ChannelSSE, func(mux *http.ServeMux, api *gateway.HTTPAPI) { (&server{api}).registerSSE(mux) })

// server is the door on one HTTP API: its handlers are server's methods,
// with the core's helpers and turn service (Service) at hand.
type server struct{ *gateway.HTTPAPI }
