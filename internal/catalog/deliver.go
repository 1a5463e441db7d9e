package catalog

import (
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/secrets"
)

// deliverDoc is agent.DeliverTarget.
type deliverDoc struct {
	Name          text    `yaml:"name"`
	Kind          text    `yaml:"kind"`
	URL           text    `yaml:"url"`
	Secret        text    `yaml:"secret"`
	BotToken      text    `yaml:"bot_token"`
	ChatID        text    `yaml:"chat_id"`
	WebhookSecret text    `yaml:"webhook_secret"`
	Always        boolean `yaml:"always"`
}

// deliver checks an agent's deliver targets: each well formed
// (agent.DeliverTarget.Validate), named once, and naming only secrets
// the operator granted the tenant. A webhook's host is checked against
// the egress allowlist at every delivery, as a tool's is at every call.
func (l *loader) deliver(t *tenant, d *agentDoc) []agent.DeliverTarget {
	if len(d.Deliver) > agent.MaxDeliverTargets {
		l.addf(d.Deliver[agent.MaxDeliverTargets].Name.pos, "the agent has %d deliver targets; the limit is %d", len(d.Deliver), agent.MaxDeliverTargets)
		return nil
	}
	var out []agent.DeliverTarget
	for i := range d.Deliver {
		doc := &d.Deliver[i]
		if doc.Name.bad || doc.Kind.bad || doc.URL.bad || doc.Secret.bad || doc.BotToken.bad || doc.ChatID.bad || doc.WebhookSecret.bad {
			continue
		}
		tg := agent.DeliverTarget{
			Name: doc.Name.s, Kind: doc.Kind.s, URL: doc.URL.s, Secret: doc.Secret.s,
			BotToken: doc.BotToken.s, ChatID: doc.ChatID.s, WebhookSecret: doc.WebhookSecret.s, Always: doc.Always.v,
		}
		if err := tg.Validate(); err != nil {
			l.addf(doc.Name.pos, "%s", err)
			continue
		}
		if slices.ContainsFunc(out, func(o agent.DeliverTarget) bool { return o.Name == tg.Name }) {
			l.addf(doc.Name.pos, "deliver target %q is listed twice", tg.Name)
			continue
		}
		ok := true
		for _, ref := range []text{doc.Secret, doc.BotToken, doc.WebhookSecret} {
			if ref.s == "" {
				continue
			}
			if err := secrets.ValidateRef(ref.s); err != nil {
				l.addf(ref.pos, "%s", err)
				ok = false
			} else if g := l.kinds.Deps().SecretGrants; g != nil {
				if err := g.Allows(t.id, ref.s); err != nil {
					l.addf(ref.pos, "%s", err)
					ok = false
				}
			}
		}
		if ok {
			out = append(out, tg)
		}
	}
	return out
}
