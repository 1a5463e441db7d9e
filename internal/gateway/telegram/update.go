package telegram

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// An update is what the door reads of a Bot API Update: its id, and of a
// message its chat and text. Telegram adds fields over time; they are
// not the door's, and are let through.
type update struct {
	UpdateID *int64   `json:"update_id"`
	Message  *message `json:"message"`
}

type message struct {
	MessageID int64  `json:"message_id"`
	Chat      *chat  `json:"chat"`
	From      *user  `json:"from"`
	Text      string `json:"text"`
}

type chat struct {
	ID int64 `json:"id"`
}

type user struct {
	ID    int64 `json:"id"`
	IsBot bool  `json:"is_bot"`
}

// An incoming is a text message from a person in a chat that an update
// carries: the chat, and the person who sent it (from.id).
type incoming struct {
	UpdateID int64
	ChatID   string
	UserID   string
	Text     string
}

// decodeUpdate reads a webhook's body. An update that is not a JSON
// object with a positive update_id, or whose message is malformed, is an
// error (agent.CodeInvalid). A well-formed update that is not a text
// message from a person in a chat (an edit, a photo, a bot's message, a
// message without a sender, a callback, …) is nil: Telegram is answered
// 200 and nothing starts.
func decodeUpdate(body []byte) (*incoming, error) {
	var u update
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&u); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "update: not a Bot API Update: %s", words.Clip(err.Error(), 200))
	}
	if dec.More() {
		return nil, agent.Errorf(agent.CodeInvalid, "update: more than one JSON value")
	}
	if u.UpdateID == nil || *u.UpdateID <= 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "update: update_id is required and must be positive")
	}
	m := u.Message
	if m == nil || strings.TrimSpace(m.Text) == "" || m.Chat == nil || m.Chat.ID == 0 || m.From == nil || m.From.ID <= 0 || m.From.IsBot {
		return nil, nil
	}
	return &incoming{UpdateID: *u.UpdateID, ChatID: strconv.FormatInt(m.Chat.ID, 10), UserID: strconv.FormatInt(m.From.ID, 10), Text: m.Text}, nil
}
