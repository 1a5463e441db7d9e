package projection

import (
	"cmp"
	"encoding/json"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// QuestionValue is a question a tool call asks (ask_user), as the doors
// that render it as data show it: answer with
// POST /v1/{streamId}/questions/{callId}.
type QuestionValue struct {
	StreamID   string     `json:"streamId"`
	CallID     string     `json:"callId"`
	ToolName   string     `json:"toolName"`
	Question   string     `json:"question,omitempty"`
	Choices    []string   `json:"choices,omitempty"`
	AllowOther bool       `json:"allowOther,omitempty"`
	Role       string     `json:"role,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	Answerer   string     `json:"answerer,omitempty"`
	Via        string     `json:"via,omitempty"`
}

// OrNull is raw, or JSON null when raw is empty.
func OrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// ContentText is the text of a content block ({"type":"text","text":…}),
// "" for a block of another type.
func ContentText(block json.RawMessage) string {
	var b struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(block, &b) != nil || b.Type != "text" {
		return ""
	}
	return b.Text
}

// QuestionOf is the question of a question or question_answered event.
func QuestionOf(e agent.Event) QuestionValue {
	q, t := cmp.Or(e.Question, &agent.QuestionEvent{}), cmp.Or(e.Tool, &agent.ToolEvent{})
	return QuestionValue{StreamID: e.StreamID, CallID: t.CallID, ToolName: t.Name, Question: q.Text, Choices: q.Choices,
		AllowOther: q.AllowOther, Role: q.Role, Deadline: t.Deadline, Outcome: q.Outcome, Answerer: q.Answerer, Via: q.Via}
}
