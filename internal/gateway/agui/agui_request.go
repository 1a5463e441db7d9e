package agui

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/words"
)

// What POST /ag-ui/{agent_id} reads: AG-UI's RunAgentInput
// (@ag-ui/core types.ts) — {threadId, runId, parentRunId?, state,
// messages, tools, context, forwardedProps}, as an AG-UI client
// (HttpAgent, CopilotKit) sends it. The members the gateway reads are
// checked for their shape, and what is wrong is said with where:
// threadId and runId (ids), messages (a list of messages, each with a
// role; the last user message's content, a string or text parts, is the
// prompt) and tools (client-side tools are refused: the agent's own run
// on the server), protocolVersion (a client that declares 1.0 is sent
// interrupts) and resume (agui_resume.go: the answers to the interrupts
// of the run this one goes on from; messages then holds no new prompt).
// parentRunId and context are checked for their JSON
// type and not used (the agent's prompt is the user's message); state and
// forwardedProps are the client's and are not read: a turn has no client
// state. Members the protocol adds later are left unread, so that a newer
// client is not refused for what it may send.

// aguiInput is a run's input as a turn needs it.
type aguiInput struct {
	// ThreadID is the session whose Conversation answers; empty: a
	// turn of its own.
	ThreadID string
	// RunID is the turn's job id; empty: a new one.
	RunID string
	// Prompt is the text of the last user message; empty when the run
	// resumes interrupts.
	Prompt string
	// ProtocolVersion is the AG-UI version the client declares ("1.0");
	// empty for a client from before 1.0.
	ProtocolVersion string
	// Resume answers the interrupts of the run this one goes on from.
	Resume []aguiResume
}

// interruptAware reports whether the client speaks AG-UI 1.0's
// interrupt-aware run lifecycle: it declares protocol 1.0 or later, or it
// resumes interrupts. Only such a client is sent RUN_FINISHED with an
// interrupt outcome; an older client reads that as a finished run and
// would never resume it, so its run goes on waiting, as before 1.0.
func (in aguiInput) interruptAware() bool {
	if len(in.Resume) > 0 {
		return true
	}
	major, _, _ := strings.Cut(in.ProtocolVersion, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 1
}

// aguiRoles are the roles of AG-UI's messages.
var aguiRoles = []string{"developer", "system", "assistant", "user", "tool", "activity", "reasoning"}

// aguiMessage is what is read of a message.
type aguiMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// aguiInputContent is one part of a user message's content.
type aguiInputContent struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// decodeAGUIInput reads a run's input.
func decodeAGUIInput(data []byte) (aguiInput, error) {
	var in aguiInput
	fields, err := gateway.BodyObject(data, "the request body is empty: want AG-UI's RunAgentInput, a JSON object",
		"the request body is not a JSON object: want AG-UI's RunAgentInput")
	if err != nil {
		return in, err
	}
	for _, id := range []struct {
		name string
		v    *string
	}{{"threadId", &in.ThreadID}, {"runId", &in.RunID}} {
		if err := gateway.JSONString(fields, id.name, "RunAgentInput", id.v); err != nil {
			return in, err
		}
		if *id.v != "" {
			if err := agent.ValidateID(id.name, *id.v); err != nil {
				return in, err
			}
		}
	}
	for _, m := range []struct {
		name, want string
		kind       byte
	}{{"parentRunId", "a string", '"'}, {"tools", "a list", '['}, {"context", "a list", '['}} {
		if raw, ok := fields[m.name]; ok && gateway.JSONKind(raw) != 'n' && gateway.JSONKind(raw) != m.kind {
			return in, agent.Errorf(agent.CodeInvalid, "RunAgentInput.%s: want %s", m.name, m.want)
		}
	}
	var tools []json.RawMessage
	if err := gateway.JSONMember(fields, "tools", "RunAgentInput", "a list", &tools); err != nil {
		return in, err
	}
	if len(tools) > 0 {
		return in, agent.Errorf(agent.CodeInvalid, "RunAgentInput.tools has %d client-side tools: they are not supported, the agent's tools run on the server (send tools: [])", len(tools))
	}
	if err := gateway.JSONString(fields, "protocolVersion", "RunAgentInput", &in.ProtocolVersion); err != nil {
		return in, err
	}
	if in.Resume, err = aguiResumes(fields["resume"]); err != nil {
		return in, err
	}
	if len(in.Resume) > 0 {
		// The run goes on with the interrupted turn: the messages are the
		// thread's, and none of them is a new prompt.
		if raw := fields["messages"]; gateway.JSONKind(raw) != '[' {
			return in, agent.Errorf(agent.CodeInvalid, "RunAgentInput.messages: want a list of messages")
		}
		return in, nil
	}
	in.Prompt, err = aguiPrompt(fields["messages"])
	return in, err
}

// aguiPrompt is the text of the last user message of messages.
func aguiPrompt(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || gateway.JSONKind(raw) == 'n' {
		return "", agent.Errorf(agent.CodeInvalid, "RunAgentInput.messages is required: a list ending with the user's message")
	}
	var list []json.RawMessage
	if gateway.JSONKind(raw) != '[' || json.Unmarshal(raw, &list) != nil {
		return "", agent.Errorf(agent.CodeInvalid, "RunAgentInput.messages: want a list of messages")
	}
	last := -1
	var user aguiMessage
	for i, r := range list {
		var m aguiMessage
		if gateway.JSONKind(r) != '{' || json.Unmarshal(r, &m) != nil {
			return "", agent.Errorf(agent.CodeInvalid, "messages[%d]: want a message, {id, role, content}", i)
		}
		if !slices.Contains(aguiRoles, m.Role) {
			return "", agent.Errorf(agent.CodeInvalid, "messages[%d].role %q is not a role (roles: %s)", i, words.Clip(m.Role, gateway.MaxQuoted), strings.Join(aguiRoles, ", "))
		}
		if m.Role == "user" {
			last, user = i, m
		}
	}
	if last < 0 {
		return "", agent.Errorf(agent.CodeInvalid, "RunAgentInput.messages has no user message: the agent answers the last one")
	}
	var text string
	switch gateway.JSONKind(user.Content) {
	case '"':
		_ = json.Unmarshal(user.Content, &text)
	case '[':
		var parts []aguiInputContent
		if json.Unmarshal(user.Content, &parts) != nil {
			return "", agent.Errorf(agent.CodeInvalid, "messages[%d].content: want a string or a list of content parts", last)
		}
		var texts []string
		for j, p := range parts {
			switch {
			case p.Type == "text" && p.Text != nil:
				texts = append(texts, *p.Text)
			case p.Type == "text":
				return "", agent.Errorf(agent.CodeInvalid, "messages[%d].content[%d].text is required", last, j)
			default:
				return "", agent.Errorf(agent.CodeInvalid, "messages[%d].content[%d] is a %q part: the agent is given the message's text only", last, j, words.Clip(p.Type, gateway.MaxQuoted))
			}
		}
		text = strings.Join(texts, "\n")
	default:
		return "", agent.Errorf(agent.CodeInvalid, "messages[%d].content: want a string or a list of content parts", last)
	}
	if strings.TrimSpace(text) == "" {
		return "", agent.Errorf(agent.CodeInvalid, "messages[%d], the last user message, has no text", last)
	}
	if len(text) > agent.MaxPromptBytes {
		return "", agent.Errorf(agent.CodeInvalid, "messages[%d], the last user message, is %d bytes; the limit is %d", last, len(text), agent.MaxPromptBytes)
	}
	return text, nil
}
