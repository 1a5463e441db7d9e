package agent

import (
	"encoding/json"
	"errors"
	"strings"
)

// DecodeEvent decodes an event from JSON and checks it (Validate), for
// readers of logs and payloads they do not write themselves.
func DecodeEvent(data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && typeErr.Field == "" {
			return Event{}, Errorf(CodeInvalid, "an event must be a JSON object, not %s", withArticle(typeErr.Value))
		}
		return Event{}, Errorf(CodeInvalid, "event: %s", describeJSONError(err))
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// eventFields are the payload fields of an Event, as bits.
type eventFields uint16

const (
	fStatus eventFields = 1 << iota
	fVoidFrom
	fAttempt
	fStep
	fText
	fTool
	fUsage
	fFinish
	fApproval
	fMessage
	fCustom
	fContent
	fError
	fModel
	fQuestion
)

var fieldNames = []string{"status", "void_from", "attempt", "step", "text", "tool", "usage", "finish_reason",
	"approval", "message", "custom", "content", "error", "model", "question"}

// eventShape is what a kind may and must set.
type eventShape struct{ allowed, required eventFields }

var eventShapes = map[EventKind]eventShape{
	EventStatus:           {fStatus | fVoidFrom | fAttempt | fStep | fError, fStatus},
	EventToken:            {fText | fStep | fAttempt, 0},
	EventReasoning:        {fText | fStep | fAttempt, fText},
	EventToolArgsDelta:    {fTool | fStep | fAttempt, fTool},
	EventToolStart:        {fTool, fTool},
	EventToolEnd:          {fTool, fTool},
	EventToolProgress:     {fTool, fTool},
	EventApprovalRequired: {fTool, fTool},
	EventApprovalDecided:  {fTool | fApproval, fTool | fApproval},
	EventQuestion:         {fTool | fQuestion, fTool | fQuestion},
	EventQuestionAnswered: {fTool | fQuestion, fTool | fQuestion},
	EventStepStart:        {fStep, fStep},
	EventStepFinish:       {fStep | fUsage | fFinish | fModel, fStep | fUsage | fFinish},
	EventMessageStart:     {fMessage, fMessage},
	EventMessageEnd:       {fMessage, fMessage},
	EventSteered:          {fMessage | fText, fMessage | fText},
	EventContent:          {fContent, fContent},
	EventUsage:            {fUsage | fStep | fModel, fUsage},
	EventCustom:           {fCustom | fTool, fCustom},
	EventError:            {fError, fError},
}

func (e Event) fields() eventFields {
	var f eventFields
	for _, set := range []struct {
		on  bool
		bit eventFields
	}{
		{e.Status != "", fStatus}, {e.VoidFrom != 0, fVoidFrom}, {e.Attempt != 0, fAttempt}, {e.Step != 0, fStep},
		{e.Text != "", fText}, {e.Tool != nil, fTool}, {e.Usage != nil, fUsage}, {e.FinishReason != "", fFinish},
		{e.Approval != nil, fApproval}, {e.Message != nil, fMessage}, {e.Custom != nil, fCustom},
		{len(e.Content) > 0, fContent}, {e.Error != nil, fError}, {e.Model != "", fModel}, {e.Question != nil, fQuestion},
	} {
		if set.on {
			f |= set.bit
		}
	}
	return f
}

// Validate checks that the event has its kind's shape (see the EventKind
// constants): the fields the kind needs, no field of another kind, and
// values in range. It refuses with CodeInvalid and names the field.
func (e Event) Validate() error {
	shape, ok := eventShapes[e.Kind]
	if !ok {
		return Errorf(CodeInvalid, "event kind %q is unknown (known: %s)", e.Kind, kindList())
	}
	have := e.fields()
	for i, name := range fieldNames {
		bit := eventFields(1) << i
		switch {
		case have&bit != 0 && shape.allowed&bit == 0:
			return Errorf(CodeInvalid, "%s event: %s does not belong to it", e.Kind, name)
		case have&bit == 0 && shape.required&bit != 0:
			return Errorf(CodeInvalid, "%s event: %s is required", e.Kind, name)
		}
	}
	switch {
	case e.Index < 0:
		return Errorf(CodeInvalid, "%s event: event_index %d is negative", e.Kind, e.Index)
	case e.Step < 0 || e.Attempt < 0 || e.VoidFrom < 0:
		return Errorf(CodeInvalid, "%s event: step, attempt and void_from must not be negative", e.Kind)
	}
	if c := e.Child; c != nil && (c.CallID == "" || c.StreamID == "" || c.Index < 1) {
		return Errorf(CodeInvalid, "%s event: child needs call_id, stream_id and an event_index from 1", e.Kind)
	}
	if u := e.Usage; u != nil && (u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 || u.CachedTokens < 0 || u.ReasoningTokens < 0) {
		return Errorf(CodeInvalid, "%s event: usage counts must not be negative", e.Kind)
	}
	return e.validatePayload()
}

// validatePayload checks the values of the kind's fields.
func (e Event) validatePayload() error {
	switch e.Kind {
	case EventStatus:
		switch e.Status {
		case StreamRunning, StreamWaitingApproval, StreamWaitingInput, StreamRetrying, StreamCompleted, StreamFailed, StreamCanceled:
		default:
			return Errorf(CodeInvalid, "status event: status %q is unknown", e.Status)
		}
		if e.VoidFrom != 0 && e.Status != StreamRetrying {
			return Errorf(CodeInvalid, "status event: void_from belongs to a RETRYING status only")
		}
		// void_from is an index of the stream that logged the status: a
		// child turn's, for a child event.
		own := e.Index
		if e.Child != nil {
			own = e.Child.Index
		}
		if e.VoidFrom != 0 && own != 0 && e.VoidFrom >= own {
			return Errorf(CodeInvalid, "status event: void_from %d must be before the event's own index %d", e.VoidFrom, own)
		}
	case EventToolArgsDelta, EventToolStart, EventToolEnd, EventToolProgress, EventApprovalRequired, EventApprovalDecided,
		EventQuestion, EventQuestionAnswered:
		if err := e.Tool.validate(e.Kind); err != nil {
			return err
		}
	case EventStepStart, EventStepFinish:
		if e.Step < 1 {
			return Errorf(CodeInvalid, "%s event: step is required", e.Kind)
		}
	}
	switch e.Kind {
	case EventToolArgsDelta:
		if len(e.Tool.Args) > 0 {
			return Errorf(CodeInvalid, "tool_args_delta event: the fragment goes in tool.args_delta, not tool.args")
		}
	case EventApprovalDecided:
		return e.Approval.validate()
	case EventQuestion, EventQuestionAnswered:
		return e.Question.validate(e.Kind)
	case EventStepFinish:
		if len(e.FinishReason) > 64 {
			return Errorf(CodeInvalid, "step_finish event: finish_reason is longer than 64 bytes")
		}
		return validateKey("finish_reason", e.FinishReason)
	case EventMessageStart, EventMessageEnd:
		return e.Message.validate(e.Kind)
	case EventSteered:
		if e.Message.StreamID != "" || e.Message.Status != "" || e.Message.OnBusy != "" {
			return Errorf(CodeInvalid, "steered event: message has an id only")
		}
		if len(e.Text) > MaxPromptBytes {
			return Errorf(CodeInvalid, "steered event: text is longer than %d bytes", MaxPromptBytes)
		}
		return e.Message.validate(e.Kind)
	case EventCustom:
		if err := e.Custom.Validate(); err != nil {
			return err
		}
		if e.Tool != nil {
			return e.Tool.validate(e.Kind)
		}
	case EventContent:
		if !json.Valid(e.Content) {
			return Errorf(CodeInvalid, "content event: content is not valid JSON")
		}
	}
	return nil
}

func (t *ToolEvent) validate(kind EventKind) error {
	if strings.TrimSpace(t.CallID) == "" || strings.TrimSpace(t.Name) == "" {
		return Errorf(CodeInvalid, "%s event: tool.call_id and tool.name are required", kind)
	}
	if len(t.CallID) > MaxKeyLength || len(t.Name) > MaxKeyLength {
		return Errorf(CodeInvalid, "%s event: tool.call_id and tool.name may be at most %d bytes", kind, MaxKeyLength)
	}
	if kind != EventToolArgsDelta && t.ArgsDelta != "" {
		return Errorf(CodeInvalid, "%s event: tool.args_delta belongs to tool_args_delta events only", kind)
	}
	return nil
}

func (a *ApprovalEvent) validate() error {
	switch a.Outcome {
	case ApprovalApproved, ApprovalRejected, ApprovalTimedOut, ApprovalCanceled:
	default:
		return Errorf(CodeInvalid, "approval_decided event: approval.outcome %q: want approved, rejected, timed_out or canceled", a.Outcome)
	}
	switch a.Via {
	case ViaSignal, ViaUpdate, ViaTimeout, ViaCancel, ViaGrant:
	default:
		return Errorf(CodeInvalid, "approval_decided event: approval.via %q: want signal, update, timeout, cancel or grant", a.Via)
	}
	switch {
	case len(a.Approver) > MaxKeyLength:
		return Errorf(CodeInvalid, "approval_decided event: approval.approver is longer than %d bytes", MaxKeyLength)
	case len(a.Reason) > 4096:
		return Errorf(CodeInvalid, "approval_decided event: approval.reason is longer than 4096 bytes")
	case len(a.GrantID) > MaxKeyLength:
		return Errorf(CodeInvalid, "approval_decided event: approval.grant_id is longer than %d bytes", MaxKeyLength)
	}
	return nil
}

func (m *MessageEvent) validate(kind EventKind) error {
	if strings.TrimSpace(m.ID) == "" {
		return Errorf(CodeInvalid, "%s event: message.id is required", kind)
	}
	if err := validateKey("message.id", m.ID); err != nil {
		return err
	}
	if err := validateKey("message.stream_id", m.StreamID); err != nil {
		return err
	}
	if err := validOnBusy(m.OnBusy); err != nil {
		return Errorf(CodeInvalid, "%s event: message.%v", kind, err)
	}
	switch {
	case kind == EventMessageStart && m.Status != "":
		return Errorf(CodeInvalid, "message_start event: message.status belongs to message_end")
	case kind == EventMessageEnd:
		switch m.Status {
		case StatusCompleted, StatusFailed, StatusRejected, StatusCanceled:
		default:
			return Errorf(CodeInvalid, "message_end event: message.status %q: want completed, failed, rejected or canceled", m.Status)
		}
	}
	return nil
}

// Validate checks the name, id and value of a custom event, as a tool
// emits it.
func (c CustomEvent) Validate() error {
	if err := validateCustomName(c.Name); err != nil {
		return err
	}
	if err := validateKey("custom.id", c.ID); err != nil {
		return err
	}
	switch {
	case len(c.Value) == 0:
		return Errorf(CodeInvalid, "custom %q: value is required (any JSON value, null included)", c.Name)
	case len(c.Value) > MaxCustomValueBytes:
		return Errorf(CodeInvalid, "custom %q: value is %d bytes; the limit is %d", c.Name, len(c.Value), MaxCustomValueBytes)
	case !json.Valid(c.Value):
		return Errorf(CodeInvalid, "custom %q: value is not valid JSON", c.Name)
	}
	return nil
}

func validateCustomName(name string) error {
	if name == "" {
		return Errorf(CodeInvalid, "custom.name is required")
	}
	if len(name) > MaxCustomNameLength {
		return Errorf(CodeInvalid, "custom.name is %d bytes; the limit is %d", len(name), MaxCustomNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '_' || c == '-' || c == '.')) {
			return Errorf(CodeInvalid, "custom.name %q: want a letter, then letters, digits, '_', '-' or '.'", name)
		}
	}
	return nil
}
