package aisdk

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
	"github.com/agentflow/agentflow/internal/words"
)

// What POST /v1/ui/chat reads: the body the Vercel AI SDK's chat
// transport (HttpChatTransport, which DefaultChatTransport is) sends for
// useChat — {id, messages, trigger, messageId} and the transport's body
// option, where the agent is named. The body and each UIMessage are read
// strictly: an unknown member is refused, as the HTTP API refuses one.
// A message's parts are checked for what the gateway reads of them (a
// text's text, a tool part's call, state and approval) and their type;
// their other members (provider metadata, titles, a tool's input and
// output) are the client's copy of what the server streamed, and are not
// read. What is wrong is said, with where, and nothing is sent.

// Triggers of a chat request, as the transport names them.
const (
	uiTriggerSubmit     = "submit-message"
	uiTriggerRegenerate = "regenerate-message"
)

// uiChatRequest is a chat request as a turn needs it.
type uiChatRequest struct {
	// ChatID is the chat's id: the session whose Conversation answers.
	ChatID string
	// Agent is the agent that answers; empty: the tenant's catalog routes
	// each message.
	Agent    string
	Trigger  string
	Messages []uiMessage
}

// uiMessage is one UIMessage of the request, with the parts read.
type uiMessage struct {
	ID    string
	Role  string
	Parts []uiPart
}

// uiPart is one part of a UIMessage: its type, and what is read of it.
type uiPart struct {
	Type string
	// Text is a text or reasoning part's.
	Text string
	// ToolCallID, State and Approval are a tool part's (tool-<name>,
	// dynamic-tool).
	ToolCallID string
	State      string
	Approval   *uiApproval
}

// uiApproval is a tool part's approval: the request the server streamed
// (id) and, once the user has answered, the answer.
type uiApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Set by the SDK on requests it made itself; read and left.
	IsAutomatic *bool  `json:"isAutomatic,omitempty"`
	Signature   string `json:"signature,omitempty"`
}

// uiDecision is a tool call's approval answered in the request.
type uiDecision struct {
	CallID string
	// ApprovalID is the approval's id, as the server streamed it
	// (uiApprovalID): the turn decides the call only if it is the one
	// waiting with it.
	ApprovalID string
	Approved   bool
	Reason     string
}

// Tool part states (UIToolInvocation's).
const (
	uiStateApprovalResponded = "approval-responded"
)

var uiToolStates = []string{"input-streaming", "input-available", "approval-requested", uiStateApprovalResponded,
	"output-available", "output-error", "output-denied"}

// uiPartTypes are the part types of a UIMessage besides tool-<name> and
// data-<name>.
var uiPartTypes = []string{"text", "reasoning", "step-start", "dynamic-tool", "file", "reasoning-file",
	"source-url", "source-document", "custom", "steering-message"}

// uiChatMembers are the members of a chat request's body.
var uiChatMembers = []string{"agent", "id", "messageId", "messages", "trigger"}

// decodeUIChat reads a chat request's body.
func decodeUIChat(data []byte) (uiChatRequest, error) {
	var req uiChatRequest
	fields, err := gateway.JSONObject("the request body", data, uiChatMembers)
	if err != nil {
		return req, err
	}
	if err := gateway.JSONString(fields, "id", "the request body", &req.ChatID); err != nil {
		return req, err
	}
	if req.ChatID == "" {
		return req, agent.Errorf(agent.CodeInvalid, "id is required: the chat's id, which names its conversation")
	}
	if err := agent.ValidateID("id", req.ChatID); err != nil {
		return req, err
	}
	if err := gateway.JSONString(fields, "agent", "the request body", &req.Agent); err != nil {
		return req, err
	}
	if req.Agent != "" {
		if err := agent.ValidateID("agent", req.Agent); err != nil {
			return req, err
		}
	}
	var messageID string // regenerate's message; the server's transcript decides what is answered
	if err := gateway.JSONString(fields, "messageId", "the request body", &messageID); err != nil {
		return req, err
	}
	if err := gateway.JSONString(fields, "trigger", "the request body", &req.Trigger); err != nil {
		return req, err
	}
	switch req.Trigger {
	case "":
		req.Trigger = uiTriggerSubmit
	case uiTriggerSubmit, uiTriggerRegenerate:
	default:
		return req, agent.Errorf(agent.CodeInvalid, "trigger %q: want %q or %q", words.Clip(req.Trigger, gateway.MaxQuoted), uiTriggerSubmit, uiTriggerRegenerate)
	}
	raw, ok := fields["messages"]
	if !ok || gateway.JSONKind(raw) == 'n' {
		return req, agent.Errorf(agent.CodeInvalid, "messages is required: the chat's UIMessages, the last one the user's")
	}
	var list []json.RawMessage
	if gateway.JSONKind(raw) != '[' || json.Unmarshal(raw, &list) != nil {
		return req, agent.Errorf(agent.CodeInvalid, "messages: want an array of UIMessages")
	}
	if len(list) == 0 {
		return req, agent.Errorf(agent.CodeInvalid, "messages is empty: want the chat's UIMessages, the last one the user's")
	}
	for i, m := range list {
		msg, err := decodeUIMessage(fmt.Sprintf("messages[%d]", i), m)
		if err != nil {
			return req, err
		}
		req.Messages = append(req.Messages, msg)
	}
	return req, nil
}

// uiMessageMembers are the members of a UIMessage.
var uiMessageMembers = []string{"id", "metadata", "parts", "role"}

// decodeUIMessage reads one UIMessage; at says where it is.
func decodeUIMessage(at string, data []byte) (uiMessage, error) {
	var m uiMessage
	fields, err := gateway.JSONObject(at, data, uiMessageMembers)
	if err != nil {
		return m, err
	}
	if err := gateway.JSONString(fields, "id", at, &m.ID); err != nil {
		return m, err
	}
	if err := gateway.JSONString(fields, "role", at, &m.Role); err != nil {
		return m, err
	}
	switch m.Role {
	case "user", "assistant", "system":
	default:
		return m, agent.Errorf(agent.CodeInvalid, "%s.role %q: want user, assistant or system", at, words.Clip(m.Role, gateway.MaxQuoted))
	}
	raw, ok := fields["parts"]
	if !ok || gateway.JSONKind(raw) == 'n' {
		return m, agent.Errorf(agent.CodeInvalid, "%s.parts is required: the message's parts", at)
	}
	var parts []json.RawMessage
	if gateway.JSONKind(raw) != '[' || json.Unmarshal(raw, &parts) != nil {
		return m, agent.Errorf(agent.CodeInvalid, "%s.parts: want an array of parts", at)
	}
	for j, p := range parts {
		part, err := decodeUIPart(fmt.Sprintf("%s.parts[%d]", at, j), p)
		if err != nil {
			return m, err
		}
		m.Parts = append(m.Parts, part)
	}
	return m, nil
}

// decodeUIPart reads one part: its type, and what is read of it.
func decodeUIPart(at string, data []byte) (uiPart, error) {
	var p uiPart
	var fields map[string]json.RawMessage
	if gateway.JSONKind(data) != '{' || json.Unmarshal(data, &fields) != nil {
		return p, agent.Errorf(agent.CodeInvalid, "%s: want a part, a JSON object with a type", at)
	}
	if err := gateway.JSONString(fields, "type", at, &p.Type); err != nil {
		return p, err
	}
	switch {
	case p.Type == "":
		return p, agent.Errorf(agent.CodeInvalid, "%s.type is required", at)
	case p.Type == "text" || p.Type == "reasoning":
		var text *string
		if err := gateway.JSONMember(fields, "text", at, "a string", &text); err != nil {
			return p, err
		}
		if text == nil {
			return p, agent.Errorf(agent.CodeInvalid, "%s.text is required in a %s part", at, p.Type)
		}
		p.Text = *text
	case p.Type == "dynamic-tool" || strings.HasPrefix(p.Type, "tool-") && len(p.Type) > len("tool-"):
		return p, decodeUIToolPart(at, fields, &p)
	case strings.HasPrefix(p.Type, "data-") && len(p.Type) > len("data-"):
	case slices.Contains(uiPartTypes, p.Type):
	default:
		return p, agent.Errorf(agent.CodeInvalid, "%s.type %q is not a part type of a UIMessage (%s, tool-<name>, data-<name>)",
			at, words.Clip(p.Type, gateway.MaxQuoted), strings.Join(uiPartTypes, ", "))
	}
	return p, nil
}

// decodeUIToolPart reads a tool part's call, state and approval.
func decodeUIToolPart(at string, fields map[string]json.RawMessage, p *uiPart) error {
	if err := gateway.JSONString(fields, "toolCallId", at, &p.ToolCallID); err != nil {
		return err
	}
	if p.ToolCallID == "" {
		return agent.Errorf(agent.CodeInvalid, "%s.toolCallId is required in a tool part", at)
	}
	if err := gateway.JSONString(fields, "state", at, &p.State); err != nil {
		return err
	}
	if !slices.Contains(uiToolStates, p.State) {
		return agent.Errorf(agent.CodeInvalid, "%s.state %q: want one of %s", at, words.Clip(p.State, gateway.MaxQuoted), strings.Join(uiToolStates, ", "))
	}
	if err := gateway.JSONMember(fields, "approval", at, "an object {id, approved?, reason?}", &p.Approval); err != nil {
		return err
	}
	a := p.Approval
	switch {
	case a != nil && a.ID == "":
		return agent.Errorf(agent.CodeInvalid, "%s.approval.id is required", at)
	case p.State == uiStateApprovalResponded && (a == nil || a.Approved == nil):
		return agent.Errorf(agent.CodeInvalid, "%s is %s: its approval needs id and approved (true runs the call, false rejects it)", at, p.State)
	}
	return nil
}

// prompt is the text of the request's last message, the user's, which
// the agent answers. A part the agent cannot be given (a file, data) is
// refused rather than dropped.
func (req uiChatRequest) prompt() (string, error) {
	last := len(req.Messages) - 1
	m := req.Messages[last]
	var texts []string
	for j, p := range m.Parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "step-start":
		default:
			return "", agent.Errorf(agent.CodeInvalid, "messages[%d].parts[%d] is a %s part: the agent is given the message's text only", last, j, words.Clip(p.Type, gateway.MaxQuoted))
		}
	}
	text := strings.Join(texts, "\n")
	if strings.TrimSpace(text) == "" {
		return "", agent.Errorf(agent.CodeInvalid, "messages[%d], the user's message to answer, has no text", last)
	}
	return text, nil
}

// decisions are the approvals the request answers: the tool parts of its
// last message, the assistant's, whose state is approval-responded. The
// approval's id is the one the server streamed for the call, which binds
// the answer to it: the turn refuses an answer whose approval id is
// another call's.
func (req uiChatRequest) decisions() ([]uiDecision, error) {
	last := len(req.Messages) - 1
	var out []uiDecision
	for _, p := range req.Messages[last].Parts {
		if p.State != uiStateApprovalResponded {
			continue
		}
		out = append(out, uiDecision{CallID: p.ToolCallID, ApprovalID: p.Approval.ID, Approved: *p.Approval.Approved, Reason: p.Approval.Reason})
	}
	return out, nil
}

// uiAsk is what a checked chat request asks for: a message answered (the
// last message is the user's), or tool calls decided and their turn
// followed on (the last message is the assistant's answer, with approval
// responses).
type uiAsk struct {
	Prompt string
	// Answer is the assistant message whose calls are decided: its id is
	// its turn's job id.
	Answer    string
	Decisions []uiDecision
}

// ask checks what the request asks for.
func (req uiChatRequest) ask() (uiAsk, error) {
	last := len(req.Messages) - 1
	m := req.Messages[last]
	switch m.Role {
	case "user":
		p, err := req.prompt()
		return uiAsk{Prompt: p}, err
	case "assistant":
		if req.Trigger == uiTriggerRegenerate {
			return uiAsk{}, agent.Errorf(agent.CodeInvalid, "messages[%d] is the assistant's: a regenerated answer answers the user's message, which must be last", last)
		}
		d, err := req.decisions()
		if err != nil {
			return uiAsk{}, err
		}
		if len(d) == 0 {
			return uiAsk{}, agent.Errorf(agent.CodeInvalid,
				"messages[%d], the last, is the assistant's and answers no tool approval: send a user message, or answer the approval requests (addToolApprovalResponse)", last)
		}
		if err := agent.ValidateID(fmt.Sprintf("messages[%d].id", last), m.ID); err != nil {
			return uiAsk{}, err
		}
		return uiAsk{Answer: m.ID, Decisions: d}, nil
	}
	return uiAsk{}, agent.Errorf(agent.CodeInvalid, "messages[%d], the last, is the %s's: the agent answers the user's message, which must be last", last, m.Role)
}

// uiSDKParam is the query parameter that says which major version of the
// AI SDK the client runs (?ai_sdk=7), on both chat routes: the transport
// sends its api option's query with every request, the resume's too. The
// SDK sends nothing by which a server could tell its version, so a
// client of AI SDK 7 opts in; without it, the stream is one every
// version from 5 on reads.
const uiSDKParam = "ai_sdk"

// decodeUIQuery reads a chat route's query: how the stream renders a
// model call's text for the client (uiMapper). AI SDK 7 takes a step
// back (reset-step): text and reasoning as they stream, projection.Live.
// AI SDK 5 and 6 refuse a chunk they do not know: projection.Held.
func decodeUIQuery(q url.Values) (projection.Mode, error) {
	for key, vs := range q {
		switch {
		case key != uiSDKParam:
			return 0, agent.Errorf(agent.CodeInvalid, "unknown query parameter %s: the chat routes take only %s (the AI SDK's major version, 5 to 7)",
				gateway.Clip(key), uiSDKParam)
		case len(vs) > 1:
			return 0, agent.Errorf(agent.CodeInvalid, "query parameter %s is given %d times: give it once", uiSDKParam, len(vs))
		}
	}
	switch v := q.Get(uiSDKParam); v {
	case "", "5", "6":
		return projection.Held, nil
	case "7":
		return projection.Live, nil
	default:
		return 0, agent.Errorf(agent.CodeInvalid, "%s=%s: want the AI SDK's major version, 5, 6 or 7", uiSDKParam, gateway.Clip(v))
	}
}
