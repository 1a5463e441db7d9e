package gateway

import (
	"cmp"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
)

// uiChunk is one chunk of the AI SDK's UI message stream
// (ui-message-chunks.ts): its type and the members that type has. A
// member the chunk's type requires is never empty when it is sent.
type uiChunk struct {
	Type            string          `json:"type"`
	ID              string          `json:"id,omitempty"`
	Delta           string          `json:"delta,omitempty"`
	MessageID       string          `json:"messageId,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	ToolName        string          `json:"toolName,omitempty"`
	InputTextDelta  string          `json:"inputTextDelta,omitempty"`
	Input           json.RawMessage `json:"input,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
	ErrorText       string          `json:"errorText,omitempty"`
	ApprovalID      string          `json:"approvalId,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
	FinishReason    string          `json:"finishReason,omitempty"`
	MessageMetadata *uiMetadata     `json:"messageMetadata,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	URL             string          `json:"url,omitempty"`
	MediaType       string          `json:"mediaType,omitempty"`
}

// uiMetadata is the assistant message's metadata, sent with finish: the
// turn's usage, summed over its model calls.
type uiMetadata struct {
	Usage agent.Usage `json:"usage"`
}

// uiMapper maps a turn's events, in log order, to the chunks of one
// assistant UIMessage whose id is the turn's job id.
//
// The UI message stream cannot take a chunk back (AI SDK 7's reset-step
// can, but earlier clients refuse a chunk they do not know), and a model
// call that fails part-way is retried and streams its reply again (a
// RETRYING status voids what the failed attempt streamed). So, as the
// OpenAI-compatible stream does (chatReply), a model call's streamed
// events (token, reasoning, tool_args_delta) are held until the call has
// answered — its usage event, after which no attempt of it can run — and
// only those agent.Unvoided keeps are mapped: a client never shows text a
// retry replaces, nor the same text twice. Text therefore arrives a model
// call at a time. What else a turn logs is mapped as it comes (see
// docs/events.md for the table). Events of delegated child turns are not
// this turn's message and are skipped.
//
// Part ids are made from the index of the part's first event, so that
// the same log maps to the same chunks every time it is read: a stream
// resumed, or continued after an approval, names its parts as the first
// reading did.
type uiMapper struct {
	held      []agent.Event
	text      string          // the open text part's id
	reasoning string          // the open reasoning part's id
	started   map[string]bool // calls announced (tool-input-start)
	available map[string]bool // calls whose input was sent (tool-input-available)
	// requested are the calls that asked for approval; waiting, those of
	// them not decided yet.
	requested, waiting map[string]bool
	wroteText          bool
	finish             string
	usage              agent.Usage
	failure            *agent.TurnError
}

func newUIMapper() *uiMapper {
	return &uiMapper{started: map[string]bool{}, available: map[string]bool{}, requested: map[string]bool{}, waiting: map[string]bool{}}
}

// add maps the next event of the turn's log.
func (m *uiMapper) add(e agent.Event) []uiChunk {
	if e.Child != nil {
		return nil
	}
	switch e.Kind {
	case agent.EventToken, agent.EventReasoning, agent.EventToolArgsDelta:
		m.held = append(m.held, e)
		return nil
	case agent.EventUsage:
		if e.Usage != nil {
			m.usage = m.usage.Add(*e.Usage)
		}
		return m.release()
	case agent.EventStepStart:
		return append(m.release(), uiChunk{Type: "start-step"})
	case agent.EventStepFinish:
		m.finish = e.FinishReason
		return append(m.closeParts(m.release()), uiChunk{Type: "finish-step"})
	case agent.EventToolStart, agent.EventApprovalRequired, agent.EventToolEnd, agent.EventToolProgress, agent.EventApprovalDecided:
		return m.tool(e)
	case agent.EventQuestion, agent.EventQuestionAnswered:
		// data-question, one part per call (its id), which the outcome
		// replaces: answer with POST /v1/{streamId}/questions/{callId}.
		if e.Tool == nil {
			return nil
		}
		q := questionOrEmpty(e.Question)
		data, _ := json.Marshal(aguiQuestionValue{StreamID: e.StreamID, CallID: e.Tool.CallID, ToolName: e.Tool.Name, Question: q.Text,
			Choices: q.Choices, AllowOther: q.AllowOther, Role: q.Role, Deadline: e.Tool.Deadline, Outcome: q.Outcome, Answerer: q.Answerer, Via: q.Via})
		return append(m.closeParts(m.release()), uiChunk{Type: "data-question", ID: e.Tool.CallID, Data: data})
	case agent.EventCustom:
		if e.Custom == nil {
			return nil
		}
		return append(m.closeParts(m.release()), uiChunk{Type: "data-" + e.Custom.Name, ID: e.Custom.ID, Data: orNull(e.Custom.Value)})
	case agent.EventContent:
		out := m.release()
		if text := contentText(e.Content); text != "" && !m.wroteText {
			out = m.textDelta(out, "content-"+strconv.FormatInt(e.Index, 10), text)
		}
		if f, ok := contentFile(e.Content); ok {
			out = append(m.closeParts(out), f)
		}
		return out
	case agent.EventError:
		m.failure = e.Error
	case agent.EventStatus:
		return m.status(e)
	}
	return nil
}

// release maps the held events of the model call that has answered.
func (m *uiMapper) release() []uiChunk {
	var out []uiChunk
	for _, h := range m.held {
		id := strconv.FormatInt(h.Index, 10)
		switch h.Kind {
		case agent.EventToken:
			out = m.textDelta(out, "text-"+id, h.Text)
		case agent.EventReasoning:
			if h.Text == "" {
				continue
			}
			if m.text != "" {
				out = append(out, uiChunk{Type: "text-end", ID: m.text})
				m.text = ""
			}
			if m.reasoning == "" {
				m.reasoning = "reasoning-" + id
				out = append(out, uiChunk{Type: "reasoning-start", ID: m.reasoning})
			}
			out = append(out, uiChunk{Type: "reasoning-delta", ID: m.reasoning, Delta: h.Text})
		case agent.EventToolArgsDelta:
			if h.Tool == nil {
				continue
			}
			out = m.announce(m.closeParts(out), h.Tool)
			if h.Tool.ArgsDelta != "" {
				out = append(out, uiChunk{Type: "tool-input-delta", ToolCallID: h.Tool.CallID, InputTextDelta: h.Tool.ArgsDelta})
			}
		}
	}
	m.held = nil
	return out
}

// textDelta adds text to the open text part, opening one (id) if none is.
func (m *uiMapper) textDelta(out []uiChunk, id, text string) []uiChunk {
	if text == "" {
		return out
	}
	if m.reasoning != "" {
		out = append(out, uiChunk{Type: "reasoning-end", ID: m.reasoning})
		m.reasoning = ""
	}
	if m.text == "" {
		m.text = id
		out = append(out, uiChunk{Type: "text-start", ID: m.text})
	}
	m.wroteText = true
	return append(out, uiChunk{Type: "text-delta", ID: m.text, Delta: text})
}

// closeParts ends the open text and reasoning parts: another part follows.
func (m *uiMapper) closeParts(out []uiChunk) []uiChunk {
	if m.text != "" {
		out = append(out, uiChunk{Type: "text-end", ID: m.text})
		m.text = ""
	}
	if m.reasoning != "" {
		out = append(out, uiChunk{Type: "reasoning-end", ID: m.reasoning})
		m.reasoning = ""
	}
	return out
}

// announce opens a call's tool part, once.
func (m *uiMapper) announce(out []uiChunk, t *agent.ToolEvent) []uiChunk {
	if m.started[t.CallID] {
		return out
	}
	m.started[t.CallID] = true
	return append(out, uiChunk{Type: "tool-input-start", ToolCallID: t.CallID, ToolName: t.Name})
}

// input sends a call's complete input, once: at its approval request or
// its start, whichever comes first.
func (m *uiMapper) input(out []uiChunk, t *agent.ToolEvent) []uiChunk {
	out = m.announce(out, t)
	if m.available[t.CallID] {
		return out
	}
	m.available[t.CallID] = true
	return append(out, uiChunk{Type: "tool-input-available", ToolCallID: t.CallID, ToolName: t.Name, Input: orNull(t.Args)})
}

// tool maps a tool call's events. A call's approval id is its call id:
// the answer names the call it decides.
func (m *uiMapper) tool(e agent.Event) []uiChunk {
	t := e.Tool
	if t == nil {
		return nil
	}
	out := m.closeParts(m.release())
	switch e.Kind {
	case agent.EventToolStart:
		out = m.input(out, t)
	case agent.EventApprovalRequired:
		out = m.input(out, t)
		m.requested[t.CallID], m.waiting[t.CallID] = true, true
		out = append(out, uiChunk{Type: "tool-approval-request", ApprovalID: uiApprovalID(t), ToolCallID: t.CallID})
	case agent.EventApprovalDecided:
		delete(m.waiting, t.CallID) // a rejection shows as the call's tool_end
	case agent.EventToolProgress:
		data, _ := json.Marshal(struct {
			Name    string `json:"name"`
			Message string `json:"message"`
		}{t.Name, t.Message})
		out = append(out, uiChunk{Type: "data-tool-progress", ID: t.CallID, Data: data})
	case agent.EventToolEnd:
		out = m.input(out, t)
		switch t.Status {
		case agent.ToolOK:
			output, _ := json.Marshal(t.Output)
			out = append(out, uiChunk{Type: "tool-output-available", ToolCallID: t.CallID, Output: output})
		case agent.ToolRejected:
			out = append(out, uiChunk{Type: "tool-output-denied", ToolCallID: t.CallID})
		default:
			text := t.Output
			if strings.TrimSpace(text) == "" {
				text = "the call ended " + t.Status
			}
			out = append(out, uiChunk{Type: "tool-output-error", ToolCallID: t.CallID, ErrorText: text})
		}
	}
	return out
}

// status maps a status event: the end of the turn ends the message.
func (m *uiMapper) status(e agent.Event) []uiChunk {
	switch e.Status {
	case agent.StreamRetrying:
		// The one rule of what a retry voids: agent.Unvoided.
		m.held = agent.Unvoided(append(m.held, e))
		m.held = m.held[:len(m.held)-1]
		return nil
	case agent.StreamCompleted:
		return append(m.closeParts(m.release()), uiChunk{Type: "finish", FinishReason: uiFinishReason(m.finish), MessageMetadata: &uiMetadata{Usage: m.usage}})
	case agent.StreamFailed:
		failure := e.Error
		if failure == nil {
			failure = m.failure
		}
		text := "the turn failed"
		if failure != nil && failure.Message != "" {
			text = failure.Message
		}
		return append(m.closeParts(m.release()), uiChunk{Type: "error", ErrorText: text},
			uiChunk{Type: "finish", FinishReason: "error", MessageMetadata: &uiMetadata{Usage: m.usage}})
	case agent.StreamCanceled:
		reason := "the turn was canceled"
		if e.Error != nil && e.Error.Message != "" {
			reason = e.Error.Message
		}
		return append(m.closeParts(m.release()), uiChunk{Type: "abort", Reason: reason})
	}
	return nil
}

// pause ends the message while calls wait for approval: the client
// answers them (addToolApprovalResponse) in a new request, whose stream
// goes on with the same message.
func (m *uiMapper) pause() []uiChunk {
	return append(m.closeParts(m.release()), uiChunk{Type: "finish", FinishReason: "tool-calls", MessageMetadata: &uiMetadata{Usage: m.usage}})
}

// uiFinishReason is the AI SDK's finish reason of a step's.
func uiFinishReason(r string) string {
	switch r {
	case "", agent.FinishStop:
		return "stop"
	case agent.FinishLength:
		return "length"
	case agent.FinishContentFilter:
		return "content-filter"
	case agent.FinishToolCalls:
		return "tool-calls"
	}
	return "other"
}

// orNull is raw, or JSON null when raw is empty.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return jsonNull
	}
	return raw
}

// contentFile is an image or file block of the answer as the UI
// message's file part, by the gateway's URL for the tenant's file (GET
// /v1/files/{ref}, relative to the API: the client fetches it with its
// token).
func contentFile(block json.RawMessage) (uiChunk, bool) {
	var b agent.Block
	if json.Unmarshal(block, &b) != nil || (b.Type != agent.BlockImage && b.Type != agent.BlockFile) || b.Ref == "" {
		return uiChunk{}, false
	}
	return uiChunk{Type: "file", URL: filesPath + "/" + url.PathEscape(b.Ref), MediaType: cmp.Or(b.MIMEType, "application/octet-stream")}, true
}

// uiApprovalID is the approvalId of a call's tool-approval-request: its
// approval id, which binds the client's answer to the call (the
// approval's id comes back with it); the call id for a call of a turn
// from before approvals were bound, which has none.
func uiApprovalID(t *agent.ToolEvent) string {
	if t.ApprovalID != "" {
		return t.ApprovalID
	}
	return t.CallID
}
