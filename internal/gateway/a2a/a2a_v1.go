package a2a

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/sse"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// A2A 1.0 beside 0.3. Each agent's one endpoint (A2APrefix+id) speaks
// both versions of the JSON-RPC binding, and its one card describes both
// (a2aCardJSON). A request is told apart by its method, whose names the
// versions do not share (1.0's SendMessage, SendStreamingMessage,
// GetTask, CancelTask, SubscribeToTask, …; 0.3's message/send,
// tasks/get, …), and by the A2A-Version header (or query parameter),
// which the specification has clients send: "1.0" asks for 1.0, "0.3"
// or none for 0.3 (a 1.0 method without the header is served as 1.0, as
// its name can mean nothing else). Any other version is refused with
// 1.0's VersionNotSupportedError (-32009); a method of the other version
// than the header's, with MethodNotFound (-32601), saying which name to
// use.
//
// The methods are the 0.3 door's (a2aServer's On* methods: the same
// tasks, read from the same logs, with the same rules for input), with
// 1.0's names, request and answer shapes and error codes:
//
//   - SendMessage blocks until the task ends or needs input, unless
//     configuration.returnImmediately;
//   - SendStreamingMessage streams the task, then its updates, and ends
//     when the task ends or needs input (1.0 streams close at an
//     interrupted state): the client answers with a message for the
//     task, which streams on;
//   - SubscribeToTask streams a task that has not ended until it ends; a
//     task that has ended is UnsupportedOperationError (-32004);
//   - GetTask and CancelTask as 0.3's tasks/get and tasks/cancel;
//   - ListTasks lists the tenant's tasks (a2a_list.go);
//   - push configurations are PushNotificationNotSupportedError
//     (-32003), and the extended card ExtendedAgentCardNotConfiguredError
//     (-32007): the card already needs the token.
//
// Errors carry 1.0's data: a google.rpc.ErrorInfo with the error's
// reason, in the domain a2a-protocol.org.

// A2AV1ProtocolVersion is the A2A protocol version served beside
// A2AProtocolVersion (0.3).
const A2AV1ProtocolVersion = "1.0"

// a2aV03 is 0.3's Major.Minor, as cards and the A2A-Version header name it.
const a2aV03 = "0.3"

// a2aVersionHeader names the version a request speaks.
const a2aVersionHeader = "A2A-Version"

// errA2AVersionNotSupported is 1.0's VersionNotSupportedError.
var errA2AVersionNotSupported = errors.New("this version is not supported")

// errA2AExtendedCardNotConfigured is 1.0's
// ExtendedAgentCardNotConfiguredError.
var errA2AExtendedCardNotConfigured = errors.New("extended agent card not configured")

// a2aV1Method is one of 1.0's JSON-RPC methods: its 0.3 name, where it
// has one, and how it is answered: with a result (call) or a stream of
// events (stream), from its params. The answers are the 0.3 door's
// (a2aServer's methods), rendered the 1.0 way.
type a2aV1Method struct {
	legacy string
	// follows: the method follows a task's log (a blocking send, a
	// stream), holding a slot of the tenant's streams while it runs.
	follows bool
	call    func(m *a2aServer, ctx context.Context, params json.RawMessage) (any, error)
	stream  func(m *a2aServer, ctx context.Context, params json.RawMessage) (iter.Seq2[a2a.Event, error], error)
}

// a2aV1Methods are 1.0's methods, by name.
var a2aV1Methods = map[string]a2aV1Method{
	"SendMessage": {legacy: "message/send", follows: true, call: func(m *a2aServer, ctx context.Context, raw json.RawMessage) (any, error) {
		params, err := decodeA2AV1Send(raw)
		if err != nil {
			return nil, err
		}
		res, err := m.OnSendMessage(ctx, params)
		if err != nil {
			return nil, err
		}
		return v1EventOf(res), nil
	}},
	"SendStreamingMessage": {legacy: "message/stream", follows: true, stream: func(m *a2aServer, ctx context.Context, raw json.RawMessage) (iter.Seq2[a2a.Event, error], error) {
		params, err := decodeA2AV1Send(raw)
		if err != nil {
			return nil, err
		}
		return untilInterrupted(m.OnSendMessageStream(ctx, params)), nil
	}},
	"SubscribeToTask": {legacy: "tasks/resubscribe", follows: true, stream: func(m *a2aServer, ctx context.Context, raw json.RawMessage) (iter.Seq2[a2a.Event, error], error) {
		params, err := decodeA2AV1TaskID(raw)
		if err != nil {
			return nil, err
		}
		if err := m.subscribable(ctx, params); err != nil {
			return nil, err
		}
		return m.OnResubscribeToTask(ctx, params), nil
	}},
	"GetTask": {legacy: "tasks/get", call: taskMethod(func(m *a2aServer, ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
		return m.OnGetTask(ctx, &a2a.TaskQueryParams{ID: p.ID})
	})},
	"CancelTask": {legacy: "tasks/cancel", call: taskMethod((*a2aServer).OnCancelTask)},
	"ListTasks": {call: func(m *a2aServer, ctx context.Context, raw json.RawMessage) (any, error) {
		q, err := decodeA2AV1List(raw)
		if err != nil {
			return nil, err
		}
		return m.listTasks(ctx, q)
	}},
	"CreateTaskPushNotificationConfig": {legacy: "tasks/pushNotificationConfig/set", call: unserved(errA2ANoPush)},
	"GetTaskPushNotificationConfig":    {legacy: "tasks/pushNotificationConfig/get", call: unserved(errA2ANoPush)},
	"ListTaskPushNotificationConfigs":  {legacy: "tasks/pushNotificationConfig/list", call: unserved(errA2ANoPush)},
	"DeleteTaskPushNotificationConfig": {legacy: "tasks/pushNotificationConfig/delete", call: unserved(errA2ANoPush)},
	"GetExtendedAgentCard": {legacy: "agent/getAuthenticatedExtendedCard",
		call: unserved(fmt.Errorf("the agent card is served to the token's holder already: %w", errA2AExtendedCardNotConfigured))},
}

// errA2ANoPush answers the push notification configurations' methods.
var errA2ANoPush = fmt.Errorf("push notifications are not sent: stream the task or subscribe to it: %w", a2a.ErrPushNotificationNotSupported)

// taskMethod answers a method on one task (1.0's GetTask and CancelTask)
// with the task.
func taskMethod(f func(*a2aServer, context.Context, *a2a.TaskIDParams) (*a2a.Task, error)) func(*a2aServer, context.Context, json.RawMessage) (any, error) {
	return func(m *a2aServer, ctx context.Context, raw json.RawMessage) (any, error) {
		params, err := decodeA2AV1TaskID(raw)
		if err != nil {
			return nil, err
		}
		t, err := f(m, ctx, params)
		if err != nil {
			return nil, err
		}
		return v1TaskOf(t), nil
	}
}

// unserved answers a method that is not served with err.
func unserved(err error) func(*a2aServer, context.Context, json.RawMessage) (any, error) {
	return func(*a2aServer, context.Context, json.RawMessage) (any, error) { return nil, err }
}

// a2aVersions serves a request of either version: 1.0's here, 0.3's by
// v03 (a2a-go v0.3's handler). It reads the body first, bounded as every
// door's (gateway.ReadBody), answering a body refused or cut off as a
// JSON-RPC error of the version the request names.
func (a *server) a2aVersions(m *a2aServer, v03 http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := gateway.ReadBody(r)
		if err != nil {
			writeA2AErrorFor(w, r, m.classify(r.Context(), err, nil))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var head struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &head)
		if !validA2AV1ID(head.ID) {
			head.ID = nil
		}
		version, err := a2aRequestVersion(r)
		if err != nil {
			writeA2AV1Error(w, head.ID, err)
			return
		}
		legacy, v1 := false, false
		if _, ok := a2aV1Methods[head.Method]; ok {
			v1 = true
		} else if strings.Contains(head.Method, "/") {
			legacy = true
		}
		switch {
		case v1 && version == a2aV03:
			writeA2AV1Error(w, head.ID, fmt.Errorf("%s is A2A 1.0's method and the request says %s %s, %s: %w", head.Method, a2aVersionHeader, version,
				ifNamed(a2aV1Methods[head.Method].legacy, "which has no such method", "whose name for it is "), a2a.ErrMethodNotFound))
		case legacy && version == A2AV1ProtocolVersion:
			writeA2AV1Error(w, head.ID, fmt.Errorf("method %s is not an A2A 1.0 method (the request says %s %s)%s: %w", gateway.Clip(head.Method), a2aVersionHeader, version,
				ifNamed(v1NameOf(head.Method), "", "; 1.0's name for it is "), a2a.ErrMethodNotFound))
		default:
			v1 = v1 || version == A2AV1ProtocolVersion
			r, release, ok := m.admit(w, r, head.Method, head.ID, v1)
			if !ok {
				return
			}
			defer release()
			if v1 {
				a.serveA2AV1(w, r, m, body)
				return
			}
			// The SDK's handler writes JSON without saying so; a
			// stream's writer sets its own type.
			w.Header().Set("Content-Type", "application/json")
			v03.ServeHTTP(w, r)
		}
	})
}

// admit takes a slot of the tenant's streams for a method that follows a
// task (a2aV1Method.follows), before anything is read or started: a
// request refused for want of one is answered here, in its version's
// shape, with HTTP 429 (a2aClasses), and ok is false. The methods take
// no other slot (gateway.Service.HoldStream).
func (m *a2aServer) admit(w http.ResponseWriter, r *http.Request, method string, id json.RawMessage, v1 bool) (_ *http.Request, release func(), ok bool) {
	name := method
	if !v1 {
		name = v1NameOf(method)
	}
	if !a2aV1Methods[name].follows {
		return r, func() {}, true
	}
	ctx, release, err := m.s.HoldStream(r.Context())
	if err != nil {
		e := m.classify(r.Context(), err, nil)
		if v1 {
			writeA2AV1ErrorStatus(w, e.status, id, e)
		} else {
			writeA2AError(w, e.status, e)
		}
		return nil, nil, false
	}
	return r.WithContext(ctx), release, true
}

// ifNamed is prefix+name, or none when there is no name.
func ifNamed(name, none, prefix string) string {
	if name == "" {
		return none
	}
	return prefix + name
}

// v1NameOf is 1.0's name of a 0.3 method, if it has one.
func v1NameOf(legacy string) string {
	for v1, method := range a2aV1Methods {
		if method.legacy == legacy {
			return v1
		}
	}
	return ""
}

// a2aRequestVersion is the Major.Minor the request names (header, else
// query parameter): "" (0.3), 0.3 or 1.0; a patch is ignored. Any other
// is errA2AVersionNotSupported.
func a2aRequestVersion(r *http.Request) (string, error) {
	v := cmp.Or(strings.TrimSpace(r.Header.Get(a2aVersionHeader)), strings.TrimSpace(r.URL.Query().Get(a2aVersionHeader)))
	if v == "" {
		return "", nil
	}
	parts := strings.Split(v, ".")
	if len(parts) >= 2 && len(parts) <= 3 {
		mm := parts[0] + "." + parts[1]
		if mm == a2aV03 || mm == A2AV1ProtocolVersion {
			return mm, nil
		}
	}
	return "", fmt.Errorf("%s %s is not served: this agent speaks A2A %s and %s: %w",
		a2aVersionHeader, gateway.Clip(v), A2AV1ProtocolVersion, a2aV03, errA2AVersionNotSupported)
}

// a2aV1Call is a 1.0 JSON-RPC request.
type a2aV1Call struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
}

// parseA2AV1Call reads a JSON-RPC 2.0 request: a body that is not JSON
// is ErrParseError, one that is not a request ErrInvalidRequest. The id
// is returned as soon as it is known, for the error's answer.
func parseA2AV1Call(body []byte) (a2aV1Call, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		if _, syntax := errors.AsType[*json.SyntaxError](err); syntax || !json.Valid(body) {
			return a2aV1Call{}, fmt.Errorf("the body is not JSON: %w", a2a.ErrParseError)
		}
		return a2aV1Call{}, fmt.Errorf("the body is not a JSON-RPC request object: %w", a2a.ErrInvalidRequest)
	}
	c := a2aV1Call{ID: raw["id"], Params: raw["params"]}
	if !validA2AV1ID(c.ID) {
		c.ID = nil
		return c, fmt.Errorf("id must be a string, a number or null: %w", a2a.ErrInvalidRequest)
	}
	var version string
	if json.Unmarshal(raw["jsonrpc"], &version) != nil || version != "2.0" {
		return c, fmt.Errorf(`jsonrpc must be "2.0": %w`, a2a.ErrInvalidRequest)
	}
	if json.Unmarshal(raw["method"], &c.Method) != nil || c.Method == "" {
		return c, fmt.Errorf("method must be a non-empty string: %w", a2a.ErrInvalidRequest)
	}
	return c, nil
}

func validA2AV1ID(id json.RawMessage) bool {
	if len(id) == 0 || string(id) == "null" {
		return true
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// serveA2AV1 answers a 1.0 request, by its method's entry in
// a2aV1Methods.
func (a *server) serveA2AV1(w http.ResponseWriter, r *http.Request, m *a2aServer, body []byte) {
	ctx := r.Context()
	call, err := parseA2AV1Call(body)
	if err != nil {
		writeA2AV1Error(w, call.ID, err)
		return
	}
	method, ok := a2aV1Methods[call.Method]
	if !ok {
		writeA2AV1Error(w, call.ID, fmt.Errorf("method %s is not an A2A %s method: %w", gateway.Clip(call.Method), A2AV1ProtocolVersion, a2a.ErrMethodNotFound))
		return
	}
	if method.stream != nil {
		events, err := method.stream(m, ctx, call.Params)
		if err != nil {
			writeA2AV1Error(w, call.ID, err)
			return
		}
		a.streamA2AV1(w, r, call.ID, events)
		return
	}
	result, err := method.call(m, ctx, call.Params)
	if err != nil {
		writeA2AV1Error(w, call.ID, err)
		return
	}
	writeA2AV1Result(w, call.ID, result)
}

// subscribable refuses to subscribe to a task that has ended, as 1.0
// says: there is nothing to follow (read it with GetTask).
func (m *a2aServer) subscribable(ctx context.Context, params *a2a.TaskIDParams) error {
	t, _, done, err := m.read(ctx, params)
	if err != nil {
		return err
	}
	if done {
		return fmt.Errorf("task %s has ended %s: read it with GetTask: %w", params.ID, t.state, a2a.ErrUnsupportedOperation)
	}
	return nil
}

// untilInterrupted ends a stream of a message at the first update after
// its first event that leaves the task waiting for input, or ended: a
// 1.0 stream of a message closes at an interrupted state, and the client
// answers with another message for the task.
func untilInterrupted(events iter.Seq2[a2a.Event, error]) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		first := true
		for ev, err := range events {
			if !yield(ev, err) || err != nil {
				return
			}
			u, ok := ev.(*a2a.TaskStatusUpdateEvent)
			if !first && ok && (u.Status.State == a2a.TaskStateInputRequired || u.Status.State.Terminal()) {
				return
			}
			first = false
		}
	}
}

// streamA2AV1 answers a streaming method: each event as an SSE data line
// holding a JSON-RPC answer, a keep-alive comment on a quiet stream, an
// error as the last event. An error before the first event is the
// answer itself (JSON), so that a refusal is not a stream. The events are
// read on their own goroutine, which ends before streamA2AV1 returns.
func (a *server) streamA2AV1(w http.ResponseWriter, r *http.Request, id json.RawMessage, events iter.Seq2[a2a.Event, error]) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	items, done := readA2AV1Events(ctx, events)
	defer func() { cancel(); <-done }()

	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	out := &a2aV1Stream{EventWriter: a.NewEventWriter(w, r), a: a, w: w, id: id}
	keepAlive := time.NewTicker(a.KeepAlive())
	defer keepAlive.Stop()
	for {
		select {
		case it, ok := <-items:
			if !ok || !out.send(ctx, it) {
				return
			}
		case <-keepAlive.C:
			if out.Comment("keep-alive") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// a2aV1Item is what readA2AV1Events hands on: an event, or the error
// that ends the events.
type a2aV1Item struct {
	ev  a2a.Event
	err error
}

// readA2AV1Events reads events on a goroutine of its own, so that a
// quiet stream still gets its keep-alives: each event, or the error that
// ends them, goes on items until the events or ctx end; done is closed
// once the goroutine has returned.
func readA2AV1Events(ctx context.Context, events iter.Seq2[a2a.Event, error]) (<-chan a2aV1Item, <-chan struct{}) {
	items := make(chan a2aV1Item)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(items)
		for ev, err := range events {
			select {
			case items <- a2aV1Item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return items, done
}

// a2aV1Stream is the answer streamA2AV1 writes, through the core's
// event writer: its head goes out with whatever is written first, and
// every write is bounded by the slow-client deadline.
type a2aV1Stream struct {
	*gateway.EventWriter
	a  *server
	w  http.ResponseWriter
	id json.RawMessage
}

// write sends msg as an SSE data line; a message that cannot be encoded
// is sent as an internal error in its place.
func (s *a2aV1Stream) write(msg map[string]any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		data, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(s.id),
			"error": a2aV1ErrorOf(fmt.Errorf("an event could not be written: %w", a2a.ErrInternalError))})
	}
	s.Deadline()
	s.Begin()
	if err := sse.WriteEvent(s.w, "", "", data); err != nil {
		return err
	}
	return s.Flush()
}

// send writes an item: an event as a JSON-RPC result; an error as the
// last event or, before the first, as the answer itself. It reports
// whether the stream goes on.
func (s *a2aV1Stream) send(ctx context.Context, it a2aV1Item) bool {
	if it.err != nil {
		if ctx.Err() != nil {
			return false
		}
		if !s.Started() {
			writeA2AV1Error(s.w, s.id, it.err)
			return false
		}
		_ = s.write(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(s.id), "error": a2aV1ErrorOf(it.err)})
		return false
	}
	if err := s.write(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(s.id), "result": v1EventOf(it.ev)}); err != nil {
		telemetry.Logger(ctx, s.a.Logger()).Debug("a2a stream ended by its client", zap.Error(err))
		return false
	}
	return true
}
