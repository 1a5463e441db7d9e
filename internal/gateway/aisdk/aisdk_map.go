package aisdk

import (
	"cmp"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
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
	Approved        *bool           `json:"approved,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
	FinishReason    string          `json:"finishReason,omitempty"`
	MessageMetadata *uiMetadata     `json:"messageMetadata,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	URL             string          `json:"url,omitempty"`
	MediaType       string          `json:"mediaType,omitempty"`
	Parts           []uiTextPart    `json:"parts,omitempty"`
	// SourceID and Title are a source-document chunk's.
	SourceID string `json:"sourceId,omitempty"`
	Title    string `json:"title,omitempty"`
}

// uiTextPart is a text part of a steering-message chunk's user message.
type uiTextPart struct {
	Type string `json:"type"` // text
	Text string `json:"text"`
}

// uiMetadata is the assistant message's metadata, sent with finish: the
// turn's usage, summed over its model calls.
type uiMetadata struct {
	Usage agent.Usage `json:"usage"`
}

// uiMapper renders a turn's projection (internal/gateway/projection) as
// the chunks of one assistant UIMessage whose id is the turn's job id.
//
// A client of AI SDK 7 (?ai_sdk=7, decodeUIQuery) takes a step back
// (reset-step): it gets every delta as the model streams it
// (projection.Live), and a model call that fails part-way and is retried
// as reset-step. The client then drops every part of the message since
// the step's step-start, which it keeps, and forgets the parts and tool
// inputs that were open: no text-end closes the dropped part and no
// start-step follows (a second would open an empty step); the retry
// starts its parts again, under ids of its own. Earlier clients refuse a
// chunk they do not know, and get a model call's text once the call has
// answered (projection.Held): a client never shows text a retry
// replaces, nor the same text twice.
// A message steered into the running turn is, for AI SDK 7, a
// steering-message part of the answer, where the SDK puts a message it
// steers in itself; earlier clients do not know the chunk, and do not get
// it. What else a turn logs is rendered as it comes (docs/events.md has
// the table).
//
// Part ids are the projection's (the index of the part's first event),
// so that the same log maps to the same chunks every time it is read: a
// stream resumed, or continued after an approval, names its parts as the
// first reading did.
type uiMapper struct {
	p *projection.Projection
	// v7: the client runs AI SDK 7 (projection.Live).
	v7 bool
	// requested are the calls that asked for approval; waiting, those of
	// them not decided yet; approvalIDs, the approvalId each was asked by.
	requested, waiting map[string]bool
	approvalIDs        map[string]string
}

func newUIMapper(mode projection.Mode) *uiMapper {
	return &uiMapper{p: projection.New(mode), v7: mode == projection.Live, requested: map[string]bool{}, waiting: map[string]bool{},
		approvalIDs: map[string]string{}}
}

// add maps the next event of the turn's log.
func (m *uiMapper) add(e agent.Event) []uiChunk {
	return m.render(nil, m.p.Add(e))
}

// render adds the chunks of items to out.
func (m *uiMapper) render(out []uiChunk, items []projection.Item) []uiChunk {
	for _, it := range items {
		out = m.chunk(out, it)
	}
	return out
}

func (m *uiMapper) chunk(out []uiChunk, it projection.Item) []uiChunk {
	e, t := it.Event, it.Tool
	switch it.Kind {
	case projection.StepStart:
		return append(out, uiChunk{Type: "start-step"})
	case projection.StepEnd:
		return append(out, uiChunk{Type: "finish-step"})
	case projection.PartStart:
		return append(out, uiChunk{Type: string(it.Part) + "-start", ID: it.PartID})
	case projection.Delta:
		return append(out, uiChunk{Type: string(it.Part) + "-delta", ID: it.PartID, Delta: it.Text})
	case projection.PartEnd:
		return append(out, uiChunk{Type: string(it.Part) + "-end", ID: it.PartID})
	case projection.ToolOpen:
		return append(out, uiChunk{Type: "tool-input-start", ToolCallID: t.CallID, ToolName: t.Name})
	case projection.ToolArgs:
		return append(out, uiChunk{Type: "tool-input-delta", ToolCallID: t.CallID, InputTextDelta: it.Text})
	case projection.ToolInput:
		return append(out, uiChunk{Type: "tool-input-available", ToolCallID: t.CallID, ToolName: t.Name, Input: projection.OrNull(t.Args)})
	case projection.InputRequired, projection.InputResolved:
		if it.Question != nil {
			// data-question, one part per call (its id), which the outcome
			// replaces: answer with POST /v1/{streamId}/questions/{callId}.
			data, _ := json.Marshal(projection.QuestionOf(e))
			return append(out, uiChunk{Type: "data-question", ID: t.CallID, Data: data})
		}
		if it.Kind == projection.InputResolved {
			return m.decided(out, t.CallID, e.Approval)
		}
		m.requested[t.CallID], m.waiting[t.CallID] = true, true
		m.approvalIDs[t.CallID] = uiApprovalID(t)
		return append(out, uiChunk{Type: "tool-approval-request", ApprovalID: uiApprovalID(t), ToolCallID: t.CallID})
	case projection.ToolProgress:
		data, _ := json.Marshal(struct {
			Name    string `json:"name"`
			Message string `json:"message"`
		}{t.Name, t.Message})
		return append(out, uiChunk{Type: "data-tool-progress", ID: t.CallID, Data: data})
	case projection.ToolResult:
		switch t.Status {
		case agent.ToolOK:
			output, _ := json.Marshal(t.Output)
			return append(out, uiChunk{Type: "tool-output-available", ToolCallID: t.CallID, Output: output})
		case agent.ToolRejected:
			return append(out, uiChunk{Type: "tool-output-denied", ToolCallID: t.CallID})
		}
		text := t.Output
		if strings.TrimSpace(text) == "" {
			text = "the call ended " + t.Status
		}
		return append(out, uiChunk{Type: "tool-output-error", ToolCallID: t.CallID, ErrorText: text})
	case projection.Custom:
		return append(out, uiChunk{Type: "data-" + e.Custom.Name, ID: e.Custom.ID, Data: projection.OrNull(e.Custom.Value)})
	case projection.Answer:
		if f, ok := contentFile(e.Content); ok {
			return append(out, f)
		}
		if s, ok := contentSource(e.Content); ok {
			return append(out, s)
		}
	case projection.Reset:
		return append(out, uiChunk{Type: "reset-step"})
	case projection.Steered:
		if m.v7 {
			return append(out, uiChunk{Type: "steering-message", ID: e.Message.ID, Parts: []uiTextPart{{Type: "text", Text: it.Text}}})
		}
	case projection.End:
		return append(out, m.end(it)...)
	}
	return out
}

// decided is a requested call's decision, wherever it was made (this
// chat, another door, a timeout): the SDK's tool-approval-response, so
// that a client that did not answer the request itself (a chat resumed,
// a decision made over MCP or A2A) shows the call decided, as the one
// that answered does. A decision without a request (a grant) has no part
// to answer; a rejection also shows as the call's tool-output-denied.
func (m *uiMapper) decided(out []uiChunk, callID string, a *agent.ApprovalEvent) []uiChunk {
	delete(m.waiting, callID)
	id, ok := m.approvalIDs[callID]
	if !ok || a == nil {
		return out
	}
	delete(m.approvalIDs, callID)
	return append(out, uiChunk{Type: "tool-approval-response", ApprovalID: id, Approved: new(a.Outcome == agent.ApprovalApproved), Reason: a.Reason})
}

// end is the end of the message: the turn's end.
func (m *uiMapper) end(it projection.Item) []uiChunk {
	usage := &uiMetadata{Usage: it.Total}
	switch it.Status {
	case agent.StreamFailed:
		text := "the turn failed"
		if it.Error != nil && it.Error.Message != "" {
			text = it.Error.Message
		}
		return []uiChunk{{Type: "error", ErrorText: text}, {Type: "finish", FinishReason: "error", MessageMetadata: usage}}
	case agent.StreamCanceled:
		reason := "the turn was canceled"
		if e := it.Event.Error; e != nil && e.Message != "" {
			reason = e.Message
		}
		return []uiChunk{{Type: "abort", Reason: reason}}
	}
	return []uiChunk{{Type: "finish", FinishReason: uiFinishReason(it.FinishReason), MessageMetadata: usage}}
}

// pause ends the message while calls wait for approval: the client
// answers them (addToolApprovalResponse) in a new request, whose stream
// goes on with the same message.
func (m *uiMapper) pause() []uiChunk {
	return append(m.render(nil, m.p.Flush()), uiChunk{Type: "finish", FinishReason: "tool-calls", MessageMetadata: &uiMetadata{Usage: m.p.Total()}})
}

// uiFinishReason is the AI SDK's finish reason of a step's.
func uiFinishReason(r string) string {
	return cmp.Or(uiFinishReasons[r], "other")
}

var uiFinishReasons = map[string]string{
	"":                        "stop",
	agent.FinishStop:          "stop",
	agent.FinishLength:        "length",
	agent.FinishContentFilter: "content-filter",
	agent.FinishToolCalls:     "tool-calls",
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
	return uiChunk{Type: "file", URL: gateway.FilesPath + "/" + url.PathEscape(b.Ref), MediaType: cmp.Or(b.MIMEType, "application/octet-stream")}, true
}

// contentSource is a citation block of the answer as the UI message's
// source-document part: the chunk's id, its document's title (its id when
// it has none).
func contentSource(block json.RawMessage) (uiChunk, bool) {
	var b agent.Block
	if json.Unmarshal(block, &b) != nil {
		return uiChunk{}, false
	}
	c, ok := b.Citation()
	if !ok {
		return uiChunk{}, false
	}
	return uiChunk{Type: "source-document", SourceID: c.ChunkID, MediaType: "text/plain", Title: cmp.Or(c.DocumentTitle, c.DocumentID)}, true
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
