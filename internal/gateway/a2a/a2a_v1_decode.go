package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/sse"
	"github.com/agentflow/agentflow/internal/telemetry"
	"go.uber.org/zap"
)

// Reading A2A 1.0's requests: a message to send, a task id and their
// params, strictly, each refusal in 1.0's error codes.

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
