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

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentflow/agentflow/internal/gateway"
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
