package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestDeliver: an agent's deliver targets are read with their secrets by
// reference; a malformed one, one named twice or a secret that is not a
// reference is refused where it was written.
func TestDeliver(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n    deliver:\n"
	tests := []struct {
		name string
		src  string
		want []string // problems; nil for a valid catalog
		exp  []agent.DeliverTarget
	}{
		{name: "webhook and telegram",
			src: head + "      - {name: hook, kind: webhook, url: 'https://hooks.example.com/in', secret: 'env:HOOK_KEY', always: true}\n" +
				"      - {name: tg, kind: telegram, bot_token: 'env:TG_TOKEN', webhook_secret: 'env:TG_SECRET'}\n",
			exp: []agent.DeliverTarget{
				{Name: "hook", Kind: "webhook", URL: "https://hooks.example.com/in", Secret: "env:HOOK_KEY", Always: true},
				{Name: "tg", Kind: "telegram", BotToken: "env:TG_TOKEN", WebhookSecret: "env:TG_SECRET"},
			}},
		{name: "webhook without secret",
			src:  head + "      - {name: hook, kind: webhook, url: 'https://hooks.example.com/in'}\n",
			want: []string{`t.yaml:6: agents[0].deliver[0].name: deliver target "hook": secret is required: the reference of the key its deliveries are signed with`}},
		{name: "secret by value",
			src:  head + "      - {name: hook, kind: webhook, url: 'https://hooks.example.com/in', secret: 's3cr3t'}\n",
			want: []string{`t.yaml:6: agents[0].deliver[0].secret: not a secret reference (not shown, in case it is a secret): write scheme:NAME, e.g. env:WEATHER_KEY`}},
		{name: "twice",
			src: head + "      - {name: hook, kind: webhook, url: 'https://a.example.com', secret: 'env:K'}\n" +
				"      - {name: hook, kind: webhook, url: 'https://b.example.com', secret: 'env:K'}\n",
			want: []string{`t.yaml:7: agents[0].deliver[1].name: deliver target "hook" is listed twice`}},
		{name: "unknown kind",
			src:  head + "      - {name: x, kind: sms}\n",
			want: []string{`t.yaml:6: agents[0].deliver[0].name: deliver target "x": kind "sms": want webhook or telegram`}},
		{name: "always not a boolean",
			src:  head + "      - {name: hook, kind: webhook, url: 'https://a.example.com', secret: 'env:K', always: yes please}\n",
			want: []string{`t.yaml:6: agents[0].deliver[0].always: want true or false, not "yes please"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != nil {
				require.Equal(t, tt.want, problems(t, tt.src))
				return
			}
			cat, err := Parse(nil, "t.yaml", []byte(tt.src))
			require.NoError(t, err)
			require.Equal(t, tt.exp, cat.Tenants[0].Agents[0].Deliver)
		})
	}
}
