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
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/sse"
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

// StreamBuffer is how many events a stream holds between its follower
// and its client's connection. The follower waits while it is full (a
// slow client slows its own follower, nobody else's: the live path's
// fan-out never waits on a follower).
const StreamBuffer = 256

// Caller authenticates a request's bearer token as the gRPC interceptors
// do a call of method (a stream is authorized as the gRPC call it is), and
// returns the call's context.
func (a *HTTPAPI) Caller(r *http.Request, authorization []string, method string) (context.Context, error) {
	return a.svc.Authorize(WithAuthorization(r.Context(), authorization), method)
}

// Authorized is r with the context of a call of method by r's bearer
// token (Caller). A token that may not make the call is refused with a
// problem, and ok is false.
func (a *HTTPAPI) Authorized(w http.ResponseWriter, r *http.Request, method string) (_ *http.Request, ok bool) {
	ctx, err := a.Caller(r, r.Header.Values("Authorization"), method)
	if err != nil {
		a.Refuse(w, r, err)
		return nil, false
	}
	return r.WithContext(ctx), true
}

// DecodeBody reads a request's body, bounded as every body is (ReadBody),
// and decodes it as the HTTP API decodes its routes' bodies (strictJSON);
// an empty body is an empty message.
func DecodeBody(r *http.Request, msg proto.Message) error {
	data, err := ReadBody(r)
	if err != nil {
		return err
	}
	if err := bodyMarshaler().(strictJSON).decode(data, msg); err != nil && !errors.Is(err, io.EOF) {
		return agent.Errorf(agent.CodeInvalid, "%s", err.Error())
	}
	return nil
}

// ServeSSE takes a slot of the caller's tenant's streams, then answers
// the events follow sends as an event stream. Until the first event (or
// keep-alive) the answer is not begun, so that a refusal — an index
// beyond the log, a turn that is not found, a start that fails — is a
// problem with its HTTP status; a failure after it is a last event of
// type SSEProblemEvent. Events are written as they come and flushed when
// no more are waiting: once per batch the follower hands on.
func (a *HTTPAPI) ServeSSE(w http.ResponseWriter, r *http.Request, follow func(ctx context.Context, send func(agent.Event) error) error) {
	st := a.NewEventWriter(w, r)
	a.ServeEvents(w, r, st, plainAnswer{st}, follow)
}

// plainAnswer is the API's own event stream as an EventAnswer: every
// event as the log holds it, to the turn's end.
type plainAnswer struct{ st *EventWriter }

func (p plainAnswer) Events(_ context.Context, e agent.Event, more <-chan agent.Event) error {
	return p.st.events(e, more)
}
func (p plainAnswer) Comment(text string) error { return p.st.Comment(text) }
func (p plainAnswer) Fail(err error)            { p.st.end(err) }
func (p plainAnswer) Done() bool                { return false }

// NewEventWriter is an event stream answering r through w, begun by its
// first write.
func (a *HTTPAPI) NewEventWriter(w http.ResponseWriter, r *http.Request) *EventWriter {
	return &EventWriter{a: a, w: w, r: r, rc: http.NewResponseController(w)}
}

// Started reports whether the answer's head has been written.
func (st *EventWriter) Started() bool { return st.started }

// Flush sends what has been written to the client.
func (st *EventWriter) Flush() error { return st.rc.Flush() }

// EventWriter writes one event stream.
type EventWriter struct {
	// OnBegin, when set, adds a door's headers to the answer's, before
	// its head is written.
	OnBegin func(http.Header)
	a       *HTTPAPI
	w       http.ResponseWriter
	r       *http.Request
	rc      *http.ResponseController
	started bool
}

// Begin writes the answer's head, once.
func (st *EventWriter) Begin() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	if st.OnBegin != nil {
		st.OnBegin(h)
	}
	h.Set("Content-Type", sse.ContentType)
	h.Set("Cache-Control", "no-cache")
	// nginx buffers answers unless told not to; so may others that read it.
	h.Set("X-Accel-Buffering", "no")
	st.w.WriteHeader(http.StatusOK)
}

// events writes e and every event waiting behind it, then flushes.
func (st *EventWriter) events(e agent.Event, more <-chan agent.Event) error {
	st.Deadline()
	st.Begin()
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

func (st *EventWriter) event(e agent.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return sse.WriteEvent(st.w, strconv.FormatInt(e.Index, 10), string(e.Kind), data)
}

// Comment writes an SSE comment (a keep-alive) and flushes.
func (st *EventWriter) Comment(text string) error {
	st.Deadline()
	st.Begin()
	if err := sse.WriteComment(st.w, text); err != nil {
		return err
	}
	return st.rc.Flush()
}

// Deadline gives the next writes a.slowClient to reach the client: a
// client that reads nothing for that long is dropped.
func (st *EventWriter) Deadline() {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.a.slowClient))
}

// end answers the follower's outcome: nothing more after the terminal
// event; otherwise the problem, as the answer or as its last event.
func (st *EventWriter) end(err error) {
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
	p := st.a.ProblemOf(ctx, err)
	if !st.started {
		WriteProblem(st.w, p)
		return
	}
	data, merr := json.Marshal(p)
	if merr != nil {
		return
	}
	st.Deadline()
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
func (st *EventWriter) goingAway() {
	st.Deadline()
	st.Begin()
	if sse.WriteComment(st.w, "the gateway is shutting down: reconnect with Last-Event-ID") == nil &&
		sse.WriteRetry(st.w, ReconnectDelay) == nil {
		_ = st.rc.Flush()
	}
}

// ProblemOf is err as a Problem: a status the service made is read as
// it is, any other error goes through Status first.
func (a *HTTPAPI) ProblemOf(ctx context.Context, err error) Problem {
	if st, ok := status.FromError(err); ok {
		if _, typed := ErrorInfoOf(st); typed {
			return ProblemFromStatus(st)
		}
	}
	return ProblemFromStatus(status.Convert(Status(ctx, a.logger, err)))
}

// EventAnswer is an answer that streams one turn's events as Server-Sent
// Events in another protocol's shape: a chat door's ChatStream (the AI
// SDK's chunks, AG-UI's events) served through ServeChat.
type EventAnswer interface {
	// Events writes the answer's part of e and of every event waiting
	// behind it in more, then flushes.
	Events(ctx context.Context, e agent.Event, more <-chan agent.Event) error
	// Comment writes an SSE comment (a keep-alive).
	Comment(text string) error
	// Fail ends, with err, an answer whose events ended before its end.
	Fail(err error)
	// Done reports whether the answer has ended.
	Done() bool
}

// ServeEvents takes a slot of the caller's tenant's streams, then answers
// with what ans makes of the events follow sends, through st: events are
// flushed when no more are waiting, a keep-alive comment goes out when
// none come, and the answer ends when ans says so, when follow ends, or
// when the gateway ends its streams. A client gone or too slow ends the
// follower.
func (a *HTTPAPI) ServeEvents(w http.ResponseWriter, r *http.Request, st *EventWriter, ans EventAnswer,
	follow func(ctx context.Context, send func(agent.Event) error) error) {
	hctx, release, err := a.svc.HoldStream(r.Context())
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	defer release()
	r = r.WithContext(hctx)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.ending, cancel)()

	events, done := FollowInto(ctx, follow)
	defer func() { _ = st.rc.SetWriteDeadline(time.Time{}) }()
	keepAlive := time.NewTicker(a.keepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case e := <-events:
			err = ans.Events(ctx, e, events)
		case <-keepAlive.C:
			err = ans.Comment("keep-alive")
		case ferr := <-done:
			for len(events) > 0 && err == nil && !ans.Done() {
				err = ans.Events(ctx, <-events, events)
			}
			if err == nil && !ans.Done() {
				ans.Fail(ferr)
			}
			return
		}
		if err != nil || ans.Done() {
			cancel()
			<-done
			return
		}
	}
}

// FollowInto runs follow on a goroutine of its own, handing its events
// over a buffered channel, so that a slow client never holds the
// follower; done receives follow's outcome.
func FollowInto(ctx context.Context, follow func(ctx context.Context, send func(agent.Event) error) error) (<-chan agent.Event, <-chan error) {
	events := make(chan agent.Event, StreamBuffer)
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

// WriteData writes each value as the JSON data of an unnamed event, the
// answer's head first: the shape of the streams of the doors whose
// events carry their own type (the AI SDK's, AG-UI's).
func WriteData[T any](st *EventWriter, values ...T) error {
	if len(values) == 0 {
		return nil
	}
	st.Begin()
	for _, v := range values {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := sse.WriteEvent(st.w, "", "", data); err != nil {
			return err
		}
	}
	return nil
}

// Failure classifies err, which ends an answer before its end. Before
// the stream began it is answered as a problem, with its HTTP status,
// and Failure reports false; after, the writes get their deadline and
// the door ends the stream with the problem in its protocol's shape.
func (st *EventWriter) Failure(err error) (Problem, bool) {
	p := st.a.ProblemOf(st.r.Context(), err)
	if !st.started {
		WriteProblem(st.w, p)
		return p, false
	}
	st.Deadline()
	return p, true
}
