package telegram

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

func TestDecodeUpdate(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       *incoming
		err        string // "" for none
	}{
		{"a text message", `{"update_id":7,"message":{"message_id":1,"date":1,"chat":{"id":-1001234,"type":"group"},"from":{"id":5,"is_bot":false},"text":"hi"}}`,
			&incoming{UpdateID: 7, ChatID: "-1001234", UserID: "5", Text: "hi"}, ""},
		{"fields Telegram adds later", `{"update_id":8,"message":{"chat":{"id":42,"type":"private","new":1},"from":{"id":42,"x":1},"text":"x","entities":[]},"business":{}}`,
			&incoming{UpdateID: 8, ChatID: "42", UserID: "42", Text: "x"}, ""},
		{"an edit", `{"update_id":9,"edited_message":{"chat":{"id":42},"text":"x"}}`, nil, ""},
		{"a photo", `{"update_id":9,"message":{"chat":{"id":42},"photo":[]}}`, nil, ""},
		{"blank text", `{"update_id":9,"message":{"chat":{"id":42},"text":"  \n"}}`, nil, ""},
		{"no chat", `{"update_id":9,"message":{"text":"x"}}`, nil, ""},
		{"a bot's message", `{"update_id":9,"message":{"chat":{"id":42},"from":{"id":1,"is_bot":true},"text":"x"}}`, nil, ""},
		{"no sender", `{"update_id":9,"message":{"chat":{"id":42},"text":"x"}}`, nil, ""},
		{"a sender without an id", `{"update_id":9,"message":{"chat":{"id":42},"from":{"is_bot":false},"text":"x"}}`, nil, ""},
		{"sender id a string", `{"update_id":7,"message":{"chat":{"id":42},"from":{"id":"5"},"text":"x"}}`, nil, "not a Bot API Update"},
		{"not JSON", `update`, nil, "not a Bot API Update"},
		{"an array", `[]`, nil, "not a Bot API Update"},
		{"null", `null`, nil, "update_id is required"},
		{"no update_id", `{"message":{"chat":{"id":42},"text":"x"}}`, nil, "update_id is required"},
		{"update_id zero", `{"update_id":0}`, nil, "update_id is required"},
		{"update_id a string", `{"update_id":"7"}`, nil, "not a Bot API Update"},
		{"update_id a fraction", `{"update_id":7.5}`, nil, "not a Bot API Update"},
		{"chat id a string", `{"update_id":7,"message":{"chat":{"id":"42"},"text":"x"}}`, nil, "not a Bot API Update"},
		{"two values", `{"update_id":7} {"update_id":8}`, nil, "more than one"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeUpdate([]byte(tt.body))
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				require.True(t, agent.IsCode(err, agent.CodeInvalid))
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// FuzzDecodeUpdate: any body is an error of the caller's, nothing to
// answer, or a message with a positive update id, a chat and text; never
// a panic.
func FuzzDecodeUpdate(f *testing.F) {
	f.Add([]byte(`{"update_id":7,"message":{"chat":{"id":42},"from":{"id":5},"text":"hi"}}`))
	f.Add([]byte(`{"update_id":9,"edited_message":{"chat":{"id":42},"text":"x"}}`))
	f.Add([]byte(`{"update_id":-1}`))
	f.Add([]byte(`{"update_id":1e3,"message":{"chat":{"id":1e400}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeUpdate(body)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), err.Error())
			require.Nil(t, in)
			return
		}
		if in == nil {
			return
		}
		require.Positive(t, in.UpdateID)
		require.NotEmpty(t, in.ChatID)
		require.NotEqual(t, "0", in.ChatID)
		require.Regexp(t, `^[1-9][0-9]*$`, in.UserID, "a person's positive id")
		require.NotEmpty(t, in.Text)
	})
}

// TestPeople: each sender in each chat is a caller of their own, with a
// session of their own, and an update's job id is the bot's secret's:
// the same for the same update, another for another update or secret.
func TestPeople(t *testing.T) {
	alice := Person("demo", "assistant", "tg", "-100", "5")
	bob := Person("demo", "assistant", "tg", "-100", "6")
	alone := Person("demo", "assistant", "tg", "5", "5")
	otherBot := Person("demo", "assistant", "tg2", "-100", "5")
	principals := map[string]bool{}
	for _, p := range []gateway.Token{alice, bob, alone, otherBot} {
		require.NoError(t, (&agent.TurnRequest{TenantID: "demo", Prompt: "x", Caller: p.Caller()}).Validate())
		require.Empty(t, p.Roles, "a person holds no role of the API")
		require.False(t, p.Staff())
		principals[p.Caller().Principal()] = true
	}
	require.Len(t, principals, 4, "one identity per sender, chat and bot")
	require.Equal(t, "agentflow:telegram/assistant/tg", alice.Issuer)
	require.Equal(t, "-100/5", alice.Subject)

	require.Equal(t, "af:telegram:assistant:tg:-100:5", SessionID("assistant", "tg", "-100", "5"))
	require.NotEqual(t, SessionID("assistant", "tg", "-100", "5"), SessionID("assistant", "tg", "-100", "6"))
	require.True(t, agent.OfPerson(SessionID("assistant", "tg", "-100", "5")))

	job := JobID("secret-1", "demo", "assistant", "tg", 1001)
	require.Equal(t, job, JobID("secret-1", "demo", "assistant", "tg", 1001))
	require.NotEqual(t, job, JobID("secret-1", "demo", "assistant", "tg", 1002))
	require.NotEqual(t, job, JobID("secret-2", "demo", "assistant", "tg", 1001))
	require.True(t, agent.OfPerson(job))
	require.Error(t, agent.CheckClientID("job_id", job), "no client may name it")
}
