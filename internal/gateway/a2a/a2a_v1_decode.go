package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/agentflow/agentflow/internal/gateway"
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
		p.Config = &a2a.MessageSendConfig{Blocking: new(!c.ReturnImmediately), AcceptedOutputModes: c.AcceptedOutputModes}
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
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return fmt.Errorf("params.%s: want %s: %w", te.Field, te.Type, a2a.ErrInvalidParams)
		}
		return fmt.Errorf("params are not of 1.0's shape: %w", a2a.ErrInvalidParams)
	}
	return nil
}
