package a2a

import (
	"bytes"
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
//   - ListTasks is UnsupportedOperationError, push configurations
//     PushNotificationNotSupportedError (-32003), and the extended card
//     ExtendedAgentCardNotConfiguredError (-32007): the card already needs
//     the token.
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

// a2aV1Methods are 1.0's JSON-RPC methods, and 0.3's name of each, where
// it has one.
var a2aV1Methods = map[string]string{
	"SendMessage":                      "message/send",
	"SendStreamingMessage":             "message/stream",
	"GetTask":                          "tasks/get",
	"ListTasks":                        "",
	"CancelTask":                       "tasks/cancel",
	"SubscribeToTask":                  "tasks/resubscribe",
	"CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
	"GetTaskPushNotificationConfig":    "tasks/pushNotificationConfig/get",
	"ListTaskPushNotificationConfigs":  "tasks/pushNotificationConfig/list",
	"DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
	"GetExtendedAgentCard":             "agent/getAuthenticatedExtendedCard",
}

// a2aVersions serves a request of either version: 1.0's here, 0.3's by
// v03 (a2a-go v0.3's handler). The body has been read (a2aLimitBody).
func (a *server) a2aVersions(m *a2aServer, v03 http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeA2AV1Error(w, nil, fmt.Errorf("the body could not be read: %w", a2a.ErrInvalidRequest))
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
				ifNamed(a2aV1Methods[head.Method], "which has no such method", "whose name for it is "), a2a.ErrMethodNotFound))
		case legacy && version == A2AV1ProtocolVersion:
			writeA2AV1Error(w, head.ID, fmt.Errorf("method %s is not an A2A 1.0 method (the request says %s %s)%s: %w", gateway.Clip(head.Method), a2aVersionHeader, version,
				ifNamed(v1NameOf(head.Method), "", "; 1.0's name for it is "), a2a.ErrMethodNotFound))
		case v1 || version == A2AV1ProtocolVersion:
			a.serveA2AV1(w, r, m, body)
		default:
			v03.ServeHTTP(w, r)
		}
	})
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
	for v1, old := range a2aV1Methods {
		if old == legacy {
			return v1
		}
	}
	return ""
}

// a2aRequestVersion is the Major.Minor the request names (header, else
// query parameter): "" (0.3), 0.3 or 1.0; a patch is ignored. Any other
// is errA2AVersionNotSupported.
func a2aRequestVersion(r *http.Request) (string, error) {
	v := strings.TrimSpace(r.Header.Get(a2aVersionHeader))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get(a2aVersionHeader))
	}
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
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || !json.Valid(body) {
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

// serveA2AV1 answers a 1.0 request.
func (a *server) serveA2AV1(w http.ResponseWriter, r *http.Request, m *a2aServer, body []byte) {
	ctx := r.Context()
	call, err := parseA2AV1Call(body)
	if err != nil {
		writeA2AV1Error(w, call.ID, err)
		return
	}
	var result any
	switch call.Method {
	case "SendMessage":
		var params *a2a.MessageSendParams
		if params, err = decodeA2AV1Send(call.Params); err == nil {
			var res a2a.SendMessageResult
			if res, err = m.OnSendMessage(ctx, params); err == nil {
				result = v1EventOf(res)
			}
		}
	case "SendStreamingMessage":
		params, err := decodeA2AV1Send(call.Params)
		if err != nil {
			writeA2AV1Error(w, call.ID, err)
			return
		}
		a.streamA2AV1(w, r, call.ID, untilInterrupted(m.OnSendMessageStream(ctx, params)))
		return
	case "SubscribeToTask":
		params, err := decodeA2AV1TaskID(call.Params)
		if err == nil {
			err = m.subscribable(ctx, params)
		}
		if err != nil {
			writeA2AV1Error(w, call.ID, err)
			return
		}
		a.streamA2AV1(w, r, call.ID, m.OnResubscribeToTask(ctx, params))
		return
	case "GetTask":
		var params *a2a.TaskIDParams
		if params, err = decodeA2AV1TaskID(call.Params); err == nil {
			var t *a2a.Task
			if t, err = m.OnGetTask(ctx, &a2a.TaskQueryParams{ID: params.ID}); err == nil {
				result = v1TaskOf(t)
			}
		}
	case "CancelTask":
		var params *a2a.TaskIDParams
		if params, err = decodeA2AV1TaskID(call.Params); err == nil {
			var t *a2a.Task
			if t, err = m.OnCancelTask(ctx, params); err == nil {
				result = v1TaskOf(t)
			}
		}
	case "ListTasks":
		err = fmt.Errorf("tasks are not listed: read one by its id (GetTask), or list turns over the HTTP API: %w", a2a.ErrUnsupportedOperation)
	case "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		err = fmt.Errorf("push notifications are not sent: stream the task or subscribe to it: %w", a2a.ErrPushNotificationNotSupported)
	case "GetExtendedAgentCard":
		err = fmt.Errorf("the agent card is served to the token's holder already: %w", errA2AExtendedCardNotConfigured)
	default:
		err = fmt.Errorf("method %s is not an A2A %s method: %w", gateway.Clip(call.Method), A2AV1ProtocolVersion, a2a.ErrMethodNotFound)
	}
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

// decodeA2AV1Send reads SendMessage's params (1.0's SendMessageRequest)
// into 0.3's, whose rules (decodeA2AMessage) both versions share.
func decodeA2AV1Send(raw json.RawMessage) (*a2a.MessageSendParams, error) {
	var req struct {
		Tenant        string     `json:"tenant"`
		Message       *v1Message `json:"message"`
		Configuration *struct {
			AcceptedOutputModes []string `json:"acceptedOutputModes"`
			HistoryLength       *int32   `json:"historyLength"`
			ReturnImmediately   bool     `json:"returnImmediately"`
		} `json:"configuration"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decodeA2AV1Params(raw, &req); err != nil {
		return nil, err
	}
	if req.Message == nil {
		return nil, fmt.Errorf("params.message is required: %w", a2a.ErrInvalidParams)
	}
	msg, err := decodeA2AV1Message(req.Message)
	if err != nil {
		return nil, err
	}
	p := &a2a.MessageSendParams{Message: msg, Metadata: req.Metadata}
	if c := req.Configuration; c != nil {
		blocking := !c.ReturnImmediately
		p.Config = &a2a.MessageSendConfig{Blocking: &blocking, AcceptedOutputModes: c.AcceptedOutputModes}
	}
	return p, nil
}

// decodeA2AV1Message reads a 1.0 message into 0.3's: its role must be
// the user's, each part exactly one of text, raw, url and data. A data
// part that is an object stays data; any other JSON value becomes its
// text. Files (raw, url) are kept, for decodeA2AMessage to refuse as 0.3
// does.
func decodeA2AV1Message(in *v1Message) (*a2a.Message, error) {
	if in.MessageID == "" {
		return nil, fmt.Errorf("message.messageId is required: %w", a2a.ErrInvalidParams)
	}
	// ProtoJSON names an enum value, or gives its number.
	var role string
	if json.Unmarshal(in.Role, &role) != nil {
		role = string(in.Role)
	}
	if role != "ROLE_USER" && role != "1" {
		return nil, fmt.Errorf("message.role is %s: want \"ROLE_USER\": %w", gateway.Clip(role), a2a.ErrInvalidParams)
	}
	msg := &a2a.Message{ID: in.MessageID, ContextID: in.ContextID, TaskID: a2a.TaskID(in.TaskID), Role: a2a.MessageRoleUser,
		Metadata: in.Metadata}
	for i, p := range in.Parts {
		n := 0
		for _, set := range []bool{p.Text != nil, p.Raw != nil, p.URL != nil, len(p.Data) > 0} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("message.parts[%d] has %d of text, raw, url and data: want one: %w", i, n, a2a.ErrInvalidParams)
		}
		switch {
		case p.Text != nil:
			msg.Parts = append(msg.Parts, a2a.TextPart{Text: *p.Text})
		case len(p.Data) > 0:
			var obj map[string]any
			if json.Unmarshal(p.Data, &obj) == nil && obj != nil {
				msg.Parts = append(msg.Parts, a2a.DataPart{Data: obj})
				continue
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, p.Data); err != nil {
				return nil, fmt.Errorf("message.parts[%d].data is not JSON: %w", i, a2a.ErrInvalidParams)
			}
			msg.Parts = append(msg.Parts, a2a.TextPart{Text: compact.String()})
		case p.URL != nil:
			msg.Parts = append(msg.Parts, a2a.FilePart{File: a2a.FileURI{URI: *p.URL, FileMeta: a2a.FileMeta{Name: p.Filename, MimeType: p.MediaType}}})
		default:
			msg.Parts = append(msg.Parts, a2a.FilePart{File: a2a.FileBytes{Bytes: *p.Raw, FileMeta: a2a.FileMeta{Name: p.Filename, MimeType: p.MediaType}}})
		}
	}
	return msg, nil
}

// decodeA2AV1TaskID reads the params of GetTask, CancelTask and
// SubscribeToTask: the task's id (and, unused, the tenant, a history
// length, metadata).
func decodeA2AV1TaskID(raw json.RawMessage) (*a2a.TaskIDParams, error) {
	var req struct {
		Tenant        string         `json:"tenant"`
		ID            string         `json:"id"`
		HistoryLength *int32         `json:"historyLength"`
		Metadata      map[string]any `json:"metadata"`
	}
	if err := decodeA2AV1Params(raw, &req); err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, fmt.Errorf("params.id is required: %w", a2a.ErrInvalidParams)
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, fmt.Errorf("params.historyLength is %d: want 0 or more: %w", *req.HistoryLength, a2a.ErrInvalidParams)
	}
	return &a2a.TaskIDParams{ID: a2a.TaskID(req.ID), Metadata: req.Metadata}, nil
}

// decodeA2AV1Params reads params into v: an object, whose fields have
// the types 1.0 gives them (unknown fields are ignored, as ProtoJSON
// readers may). Anything else is ErrInvalidParams.
func decodeA2AV1Params(raw json.RawMessage, v any) error {
	if len(raw) == 0 || raw[0] != '{' {
		return fmt.Errorf("params must be an object: %w", a2a.ErrInvalidParams)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("params.%s: want %s: %w", te.Field, te.Type, a2a.ErrInvalidParams)
		}
		return fmt.Errorf("params are not of 1.0's shape: %w", a2a.ErrInvalidParams)
	}
	return nil
}

// a2aV1Codes are the JSON-RPC codes and ErrorInfo reasons of A2A 1.0's
// errors (specification §5.4 and §9.5).
var a2aV1Codes = []struct {
	kind   error
	code   int
	reason string
}{
	{a2a.ErrParseError, -32700, "PARSE_ERROR"},
	{a2a.ErrInvalidRequest, -32600, "INVALID_REQUEST"},
	{a2a.ErrMethodNotFound, -32601, "METHOD_NOT_FOUND"},
	{a2a.ErrInvalidParams, -32602, "INVALID_PARAMS"},
	{a2a.ErrInternalError, -32603, "INTERNAL_ERROR"},
	{a2a.ErrServerError, -32603, "INTERNAL_ERROR"},
	{a2a.ErrTaskNotFound, -32001, "TASK_NOT_FOUND"},
	{a2a.ErrTaskNotCancelable, -32002, "TASK_NOT_CANCELABLE"},
	{a2a.ErrPushNotificationNotSupported, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
	{a2a.ErrUnsupportedOperation, -32004, "UNSUPPORTED_OPERATION"},
	{a2a.ErrUnsupportedContentType, -32005, "CONTENT_TYPE_NOT_SUPPORTED"},
	{a2a.ErrInvalidAgentResponse, -32006, "INVALID_AGENT_RESPONSE"},
	{errA2AExtendedCardNotConfigured, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"},
	{errA2AVersionNotSupported, -32009, "VERSION_NOT_SUPPORTED"},
}

// a2aV1ErrorOf is err as 1.0's JSON-RPC error object. The door's errors
// carry the message a client may see; one of no known kind is internal.
func a2aV1ErrorOf(err error) map[string]any {
	code, reason, msg := -32603, "INTERNAL_ERROR", "internal error"
	for _, c := range a2aV1Codes {
		if errors.Is(err, c.kind) {
			code, reason, msg = c.code, c.reason, err.Error()
			break
		}
	}
	return map[string]any{"code": code, "message": msg, "data": []map[string]any{{
		"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org"}}}
}

func a2aV1ID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// writeA2AV1Error answers a 1.0 request with an error, HTTP 200 as
// JSON-RPC answers are.
func writeA2AV1Error(w http.ResponseWriter, id json.RawMessage, err error) {
	writeA2AV1ErrorStatus(w, http.StatusOK, id, err)
}

func writeA2AV1ErrorStatus(w http.ResponseWriter, status int, id json.RawMessage, err error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(id), "error": a2aV1ErrorOf(err)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeA2AErrorFor answers a request refused before its call is read (no
// token, a body too large) in the shape of the version it names.
func writeA2AErrorFor(w http.ResponseWriter, r *http.Request, status int, kind error, msg string) {
	if v, _ := a2aRequestVersion(r); v == A2AV1ProtocolVersion {
		writeA2AV1ErrorStatus(w, status, nil, fmt.Errorf("%s: %w", msg, kind))
		return
	}
	writeA2AError(w, status, kind, msg)
}

func writeA2AV1Result(w http.ResponseWriter, id json.RawMessage, result any) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(id), "result": result})
	if err != nil {
		writeA2AV1Error(w, id, fmt.Errorf("the answer could not be written: %w", a2a.ErrInternalError))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// streamA2AV1 answers a streaming method: each event as an SSE data line
// holding a JSON-RPC answer, a keep-alive comment on a quiet stream, an
// error as the last event. An error before the first event is the
// answer itself (JSON), so that a refusal is not a stream. The events are
// read on their own goroutine, which ends before streamA2AV1 returns.
func (a *server) streamA2AV1(w http.ResponseWriter, r *http.Request, id json.RawMessage, events iter.Seq2[a2a.Event, error]) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	type item struct {
		ev  a2a.Event
		err error
	}
	items := make(chan item)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(items)
		for ev, err := range events {
			select {
			case items <- item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()

	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	started := false
	begin := func() {
		if started {
			return
		}
		started = true
		h := w.Header()
		h.Set("Content-Type", sse.ContentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
	}
	write := func(msg map[string]any) error {
		data, err := json.Marshal(msg)
		if err != nil {
			data, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(id),
				"error": a2aV1ErrorOf(fmt.Errorf("an event could not be written: %w", a2a.ErrInternalError))})
		}
		_ = rc.SetWriteDeadline(time.Now().Add(a.SlowClient()))
		begin()
		if err := sse.WriteEvent(w, "", "", data); err != nil {
			return err
		}
		return rc.Flush()
	}
	keepAlive := time.NewTicker(a.KeepAlive())
	defer keepAlive.Stop()
	for {
		select {
		case it, ok := <-items:
			if !ok {
				return
			}
			if it.err != nil {
				if ctx.Err() != nil {
					return
				}
				if !started {
					writeA2AV1Error(w, id, it.err)
					return
				}
				_ = write(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(id), "error": a2aV1ErrorOf(it.err)})
				return
			}
			if err := write(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(id), "result": v1EventOf(it.ev)}); err != nil {
				telemetry.Logger(ctx, a.Logger()).Debug("a2a stream ended by its client", zap.Error(err))
				return
			}
		case <-keepAlive.C:
			_ = rc.SetWriteDeadline(time.Now().Add(a.SlowClient()))
			begin()
			if sse.WriteComment(w, "keep-alive") != nil || rc.Flush() != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
