package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/sse"
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

// SSEProblemEvent is the type of the event that ends a stream which
// failed after it began: its data is the Problem. (Not "error": that is
// an event kind, the turn's own failure.)
const SSEProblemEvent = "problem"

// Defaults of HTTPOptions.
const (
	// DefaultKeepAlive: a comment line this often on a quiet stream,
	// well inside the idle timeouts of proxies and load balancers
	// (commonly 30 to 60 s).
	DefaultKeepAlive = 15 * time.Second
	// DefaultSlowClient: how long a write to a stream's client may wait
	// before the client counts as gone.
	DefaultSlowClient = 10 * time.Second
)

// streamBuffer is how many events a stream holds between its follower
// and its client's connection. The follower waits while it is full (a
// slow client slows its own follower, nobody else's: the live path's
// fan-out never waits on a follower).
const streamBuffer = 256

func (a *HTTPAPI) registerSSE(mux *http.ServeMux) {
	mux.HandleFunc(sseFollowPath, a.sseFollow)
	mux.HandleFunc(sseStartPath, a.sseStart)
	mux.HandleFunc(sseMessagePath, a.sseMessage)
}

// caller authenticates a request's bearer token as the gRPC interceptors
// do a call of method (a stream is authorized as the gRPC call it is), and
// returns the call's context.
func (a *HTTPAPI) caller(r *http.Request, authorization []string, method string) (context.Context, error) {
	md := metadata.MD{}
	if len(authorization) > 0 {
		md.Set("authorization", authorization...)
	}
	return a.svc.authorize(metadata.NewIncomingContext(r.Context(), md), method)
}

// sseFollow streams a turn's events after the client's index: gRPC
// Resume.
func (a *HTTPAPI) sseFollow(w http.ResponseWriter, r *http.Request) {
	streamID := "turn/" + r.PathValue("tenant") + "/" + r.PathValue("job")
	ctx, err := a.caller(r, r.Header.Values("Authorization"), pb.AgentService_Resume_FullMethodName)
	if err != nil {
		a.fail(w, r, err, 0)
		return
	}
	r = r.WithContext(ctx)
	after, _, err := resumeIndex(r.Header.Values("Last-Event-ID"), r.URL.Query())
	if err == nil {
		err = ownStream(ctx, streamID)
	}
	if err != nil {
		a.fail(w, r, err, 0)
		return
	}
	a.serveSSE(w, r, func(ctx context.Context, send func(agent.Event) error) error {
		return a.svc.events.Follow(ctx, streamID, after, send)
	})
}

// sseStart starts a turn and streams it: gRPC Stream. A client that
// reconnects (Last-Event-ID or after_index) and names the turn's job_id
// resumes that turn's stream instead, and nothing is started: fetch-based
// SSE clients reconnect by sending the same request again.
func (a *HTTPAPI) sseStart(w http.ResponseWriter, r *http.Request) {
	ctx, err := a.caller(r, r.Header.Values("Authorization"), pb.AgentService_Stream_FullMethodName)
	if err != nil {
		a.fail(w, r, err, 0)
		return
	}
	r = r.WithContext(ctx)
	var in pb.TurnRequest
	after, resumed, err := resumeIndex(r.Header.Values("Last-Event-ID"), r.URL.Query())
	if err == nil {
		err = decodeBody(r, &in)
	}
	if err == nil && resumed && in.GetJobId() == "" {
		err = agent.Errorf(agent.CodeInvalid, "a stream resumed after an index needs the job_id of its turn")
	}
	var req agent.TurnRequest
	if err == nil {
		req, err = a.svc.prepare(ctx, &in)
	}
	if err != nil {
		a.fail(w, r, err, 0)
		return
	}
	streamID := contract.TurnWorkflowID(req.TenantID, req.JobID)
	a.serveSSE(w, r, func(ctx context.Context, send func(agent.Event) error) error {
		if resumed {
			return a.svc.events.Follow(ctx, streamID, after, send)
		}
		return a.svc.followNew(ctx, req, nil, send)
	})
}

// sseMessage sends a message to a session's conversation and streams the
// turn that answers it (SendMessage, then the turn's events). As with
// sseStart, a reconnecting client that names the message's job_id
// resumes its turn's stream, and nothing is sent.
func (a *HTTPAPI) sseMessage(w http.ResponseWriter, r *http.Request) {
	ctx, err := a.caller(r, r.Header.Values("Authorization"), pb.AgentService_SendMessage_FullMethodName)
	if err != nil {
		a.fail(w, r, err, 0)
		return
	}
	r = r.WithContext(ctx)
	var in pb.SendMessageRequest
	after, resumed, err := resumeIndex(r.Header.Values("Last-Event-ID"), r.URL.Query())
	if err == nil {
		err = decodeBody(r, &in)
	}
	in.SessionId = r.PathValue("session_id") // the path's, as the message route does
	if err == nil && resumed && in.GetJobId() == "" {
		err = agent.Errorf(agent.CodeInvalid, "a stream resumed after an index needs the job_id of its message")
	}
	if err != nil {
		a.fail(w, r, err, 0)
		return
	}
	a.serveSSE(w, r, func(ctx context.Context, send func(agent.Event) error) error {
		streamID := contract.TurnWorkflowID(tenantOf(ctx), in.GetJobId())
		if !resumed {
			res, err := a.svc.SendMessage(ctx, &in)
			if err != nil {
				return err
			}
			streamID, after = res.GetStreamId(), 0
		}
		return a.svc.events.Follow(ctx, streamID, after, send)
	})
}

// decodeBody reads a request's body, bounded as every body is (readBody),
// and decodes it as the HTTP API decodes its routes' bodies (strictJSON);
// an empty body is an empty message.
func decodeBody(r *http.Request, msg proto.Message) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	if err := bodyMarshaler().(strictJSON).decode(data, msg); err != nil && !errors.Is(err, io.EOF) {
		return agent.Errorf(agent.CodeInvalid, "%s", err.Error())
	}
	return nil
}

// serveSSE takes a slot of the caller's tenant's streams, then answers
// the events follow sends as an event stream. Until the first event (or
// keep-alive) the answer is not begun, so that a refusal — an index
// beyond the log, a turn that is not found, a start that fails — is a
// problem with its HTTP status; a failure after it is a last event of
// type SSEProblemEvent. Events are written as they come and flushed when
// no more are waiting: once per batch the follower hands on.
func (a *HTTPAPI) serveSSE(w http.ResponseWriter, r *http.Request, follow func(ctx context.Context, send func(agent.Event) error) error) {
	hctx, release, err := a.svc.holdStream(r.Context())
	if err != nil {
		a.fail(w, r, err, 0)
		return
	}
	defer release()
	r = r.WithContext(hctx)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The gateway's shutdown ends the stream; the client resumes elsewhere.
	defer context.AfterFunc(a.ending, cancel)()

	events, done := followInto(ctx, follow)
	st := &sseWriter{a: a, w: w, r: r, rc: http.NewResponseController(w)}
	// The deadlines are this answer's; the connection may serve others.
	defer func() { _ = st.rc.SetWriteDeadline(time.Time{}) }()
	keepAlive := time.NewTicker(a.keepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case e := <-events:
			err = st.events(e, events)
		case <-keepAlive.C:
			err = st.comment("keep-alive")
		case ferr := <-done:
			// What the follower sent before it returned is all queued.
			if len(events) > 0 {
				err = st.events(<-events, events)
			}
			if err == nil {
				st.end(ferr)
			}
			return
		}
		if err != nil {
			// The client is gone or too slow: end the follower and go.
			cancel()
			<-done
			return
		}
	}
}

// sseWriter writes one event stream.
type sseWriter struct {
	a       *HTTPAPI
	w       http.ResponseWriter
	r       *http.Request
	rc      *http.ResponseController
	started bool
}

// begin writes the answer's head, once.
func (st *sseWriter) begin() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	h.Set("Content-Type", sse.ContentType)
	h.Set("Cache-Control", "no-cache")
	// nginx buffers answers unless told not to; so may others that read it.
	h.Set("X-Accel-Buffering", "no")
	st.w.WriteHeader(http.StatusOK)
}

// events writes e and every event waiting behind it, then flushes.
func (st *sseWriter) events(e agent.Event, more <-chan agent.Event) error {
	st.deadline()
	st.begin()
	if err := st.event(e); err != nil {
		return err
	}
	for {
		select {
		case e := <-more:
			if err := st.event(e); err != nil {
				return err
			}
		default:
			return st.rc.Flush()
		}
	}
}

func (st *sseWriter) event(e agent.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return sse.WriteEvent(st.w, strconv.FormatInt(e.Index, 10), string(e.Kind), data)
}

func (st *sseWriter) comment(text string) error {
	st.deadline()
	st.begin()
	if err := sse.WriteComment(st.w, text); err != nil {
		return err
	}
	return st.rc.Flush()
}

// deadline gives the next writes a.slowClient to reach the client: a
// client that reads nothing for that long is dropped.
func (st *sseWriter) deadline() {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.a.slowClient))
}

// end answers the follower's outcome: nothing more after the terminal
// event; otherwise the problem, as the answer or as its last event.
func (st *sseWriter) end(err error) {
	ctx := st.r.Context()
	switch {
	case err == nil:
		return
	case ctx.Err() != nil:
		return // the client left
	case st.a.ending.Err() != nil:
		st.goingAway()
		return
	}
	p := st.a.problemOf(ctx, err)
	if !st.started {
		writeProblem(st.w, p)
		return
	}
	data, merr := json.Marshal(p)
	if merr != nil {
		return
	}
	st.deadline()
	if werr := sse.WriteEvent(st.w, "", SSEProblemEvent, data); werr == nil {
		_ = st.rc.Flush()
	}
	st.a.logger.Debug("event stream ended by a failure", zap.String("type", p.Title))
}

// goingAway ends the stream of a gateway that is shutting down: a
// comment that says so, and the reconnection time, after which an
// EventSource reconnects with Last-Event-ID (the last event it got) and
// a fetch-based client sends its request again. Either resumes where
// it was, on another gateway or this one once it is back.
func (st *sseWriter) goingAway() {
	st.deadline()
	st.begin()
	if sse.WriteComment(st.w, "the gateway is shutting down: reconnect with Last-Event-ID") == nil &&
		sse.WriteRetry(st.w, ReconnectDelay) == nil {
		_ = st.rc.Flush()
	}
}

// problemOf is err as a Problem: a status the service made is read as
// it is, any other error goes through Status first.
func (a *HTTPAPI) problemOf(ctx context.Context, err error) Problem {
	if st, ok := status.FromError(err); ok {
		if _, typed := errorInfo(st); typed {
			return problemFromStatus(st)
		}
	}
	return problemFromStatus(status.Convert(Status(ctx, a.logger, err)))
}

// eventAnswer is an answer that streams one turn's events as Server-Sent
// Events in another protocol's shape: the AI SDK's chunks (uiStream),
// AG-UI's events (aguiStream).
type eventAnswer interface {
	// events writes the answer's part of e and of every event waiting
	// behind it in more, then flushes.
	events(ctx context.Context, e agent.Event, more <-chan agent.Event) error
	// comment writes an SSE comment (a keep-alive).
	comment(text string) error
	// fail ends, with err, an answer whose events ended before its end.
	fail(err error)
	// done reports whether the answer has ended.
	done() bool
}

// serveEvents takes a slot of the caller's tenant's streams, then answers
// with what ans makes of the events follow sends, through st: events are
// flushed when no more are waiting, a keep-alive comment goes out when
// none come, and the answer ends when ans says so, when follow ends, or
// when the gateway ends its streams. A client gone or too slow ends the
// follower.
func (a *HTTPAPI) serveEvents(w http.ResponseWriter, r *http.Request, st *sseWriter, ans eventAnswer,
	follow func(ctx context.Context, send func(agent.Event) error) error) {
	hctx, release, err := a.svc.holdStream(r.Context())
	if err != nil {
		a.refuse(w, r, err)
		return
	}
	defer release()
	r = r.WithContext(hctx)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.ending, cancel)()

	events, done := followInto(ctx, follow)
	defer func() { _ = st.rc.SetWriteDeadline(time.Time{}) }()
	keepAlive := time.NewTicker(a.keepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case e := <-events:
			err = ans.events(ctx, e, events)
		case <-keepAlive.C:
			err = ans.comment("keep-alive")
		case ferr := <-done:
			for len(events) > 0 && err == nil && !ans.done() {
				err = ans.events(ctx, <-events, events)
			}
			if err == nil && !ans.done() {
				ans.fail(ferr)
			}
			return
		}
		if err != nil || ans.done() {
			cancel()
			<-done
			return
		}
	}
}

// followInto runs follow on a goroutine of its own, handing its events
// over a buffered channel, so that a slow client never holds the
// follower; done receives follow's outcome.
func followInto(ctx context.Context, follow func(ctx context.Context, send func(agent.Event) error) error) (<-chan agent.Event, <-chan error) {
	events := make(chan agent.Event, streamBuffer)
	done := make(chan error, 1)
	go func() {
		done <- follow(ctx, func(e agent.Event) error {
			select {
			case events <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return events, done
}
