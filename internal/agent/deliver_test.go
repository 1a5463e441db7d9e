package agent

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeliveries: a turn is pushed to its agent's Always targets and to
// those its request names, each once, with the request's chat; a target
// the agent lacks, or a Telegram one without a chat, is refused.
func TestDeliveries(t *testing.T) {
	targets := []DeliverTarget{
		{Name: "hook", Kind: DeliverWebhook, URL: "https://h.example.com", Secret: "env:K", Always: true},
		{Name: "tg", Kind: DeliverTelegram, BotToken: "env:T"},
		{Name: "other", Kind: DeliverWebhook, URL: "https://o.example.com", Secret: "env:K"},
	}
	const wf = "turn/demo/j1"
	tests := []struct {
		name    string
		deliver []DeliverTo
		want    []string // ids
		chat    string   // of the telegram delivery
		err     string
	}{
		{name: "always only", want: []string{wf + "/hook"}},
		{name: "named too", deliver: []DeliverTo{{Target: "tg", ChatID: "42"}, {Target: "other"}},
			want: []string{wf + "/hook", wf + "/tg", wf + "/other"}, chat: "42"},
		{name: "always named again", deliver: []DeliverTo{{Target: "hook"}}, want: []string{wf + "/hook"}},
		{name: "unknown", deliver: []DeliverTo{{Target: "nope"}}, err: `deliver: agent "a" has no deliver target "nope"; it has [hook, tg, other]`},
		{name: "telegram without chat", deliver: []DeliverTo{{Target: "tg"}}, err: `deliver: telegram target "tg" needs a chat_id`},
		{name: "chat on a webhook", deliver: []DeliverTo{{Target: "other", ChatID: "1"}}, err: `deliver: target "other" is a webhook; chat_id is a telegram target's`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Deliveries(targets, TurnRequest{AgentID: "a", Deliver: tt.deliver}, wf)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				require.True(t, IsCode(err, CodeInvalid))
				return
			}
			require.NoError(t, err)
			var ids []string
			for _, d := range got {
				ids = append(ids, d.ID)
				if d.Target.Kind == DeliverTelegram {
					require.Equal(t, tt.chat, d.Target.ChatID)
				}
			}
			require.Equal(t, tt.want, ids)
		})
	}
	require.Error(t, (&TurnRequest{TenantID: "t", Prompt: "p", Deliver: []DeliverTo{{}}}).Validate())
}

// TestCheckDeliver: the request's targets are checked against the agent
// that answers it, which the message names with the targets it has, even
// when the request was routed and names no agent.
func TestCheckDeliver(t *testing.T) {
	ag := &Agent{ID: "support", Deliver: []DeliverTarget{{Name: "hook", Kind: DeliverWebhook, URL: "https://h.example.com", Secret: "env:K"}}}
	require.NoError(t, ag.CheckDeliver(TurnRequest{}))
	require.NoError(t, ag.CheckDeliver(TurnRequest{Deliver: []DeliverTo{{Target: "hook"}}}))
	err := ag.CheckDeliver(TurnRequest{Deliver: []DeliverTo{{Target: "slack"}}})
	require.EqualError(t, err, `deliver: agent "support" has no deliver target "slack"; it has [hook]`)
	require.True(t, IsCode(err, CodeInvalid))
	err = (&Agent{ID: "plain"}).CheckDeliver(TurnRequest{AgentID: "plain", Deliver: []DeliverTo{{Target: "hook"}}})
	require.EqualError(t, err, `deliver: agent "plain" has no deliver target "hook"; it has none`)
}
