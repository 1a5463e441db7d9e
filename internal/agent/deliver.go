package agent

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/words"
)

// Kinds of DeliverTarget.
const (
	DeliverWebhook  = "webhook"
	DeliverTelegram = "telegram"
)

// MaxDeliverTargets bounds an agent's deliver targets and a request's.
const MaxDeliverTargets = 8

// DeliverTarget is a place an agent's answers are pushed to when a turn
// ends (completed, failed or canceled): a webhook or a Telegram chat. It
// is not TurnRequest.Notify, which names a workflow that receives the
// turn's token batches while it runs; a deliver target gets one message,
// the result, after it ends, outside Temporal.
//
// Secrets are named by reference (env:NAME, file:/path), resolved only in
// the activity that delivers, for the agent's tenant.
type DeliverTarget struct {
	// Name is what a request names the target by (DeliverTo.Target).
	Name string `json:"name"`
	Kind string `json:"kind"` // DeliverWebhook or DeliverTelegram
	// URL is a webhook's: http or https, checked against the tenant's
	// egress allowlist at every delivery.
	URL string `json:"url,omitempty"`
	// Secret is a webhook's signing key (HMAC-SHA256 over the body).
	Secret string `json:"secret,omitempty"`
	// BotToken is a Telegram bot's token; ChatID the chat its answers go
	// to unless a request names one (the Telegram door does).
	BotToken string `json:"bot_token,omitempty"`
	ChatID   string `json:"chat_id,omitempty"`
	// WebhookSecret is the secret Telegram sends with each update to the
	// bot's webhook (X-Telegram-Bot-Api-Secret-Token), which the gateway's
	// Telegram door checks.
	WebhookSecret string `json:"webhook_secret,omitempty"`
	// Always pushes every turn of the agent to the target; otherwise only
	// turns whose request names it.
	Always bool `json:"always,omitempty"`
}

// Validate checks a target's form; secret references are checked by the
// catalog, which knows the tenant's grants.
func (t DeliverTarget) Validate() error {
	if t.Name == "" {
		return Errorf(CodeInvalid, "deliver target: name is required")
	}
	if err := ValidateID("deliver target name", t.Name); err != nil {
		return err
	}
	switch t.Kind {
	case DeliverWebhook:
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Errorf(CodeInvalid, "deliver target %q: url %q: want an http or https URL", t.Name, words.Clip(t.URL, 100))
		}
		if u.User != nil {
			return Errorf(CodeInvalid, "deliver target %q: url: no user info; the body is signed with secret", t.Name)
		}
		if t.Secret == "" {
			return Errorf(CodeInvalid, "deliver target %q: secret is required: the reference of the key its deliveries are signed with", t.Name)
		}
		if t.BotToken != "" || t.ChatID != "" || t.WebhookSecret != "" {
			return Errorf(CodeInvalid, "deliver target %q: bot_token, chat_id and webhook_secret are a telegram target's", t.Name)
		}
	case DeliverTelegram:
		if t.BotToken == "" {
			return Errorf(CodeInvalid, "deliver target %q: bot_token is required: the reference of the bot's token", t.Name)
		}
		if t.URL != "" || t.Secret != "" {
			return Errorf(CodeInvalid, "deliver target %q: url and secret are a webhook target's", t.Name)
		}
		if t.Always && t.ChatID == "" {
			return Errorf(CodeInvalid, "deliver target %q: always needs chat_id: the chat every answer goes to", t.Name)
		}
	default:
		return Errorf(CodeInvalid, "deliver target %q: kind %q: want %s or %s", t.Name, t.Kind, DeliverWebhook, DeliverTelegram)
	}
	return nil
}

// DeliverTo is one place a request asks its result to be pushed to: a
// target of its agent, by name, and for a Telegram target the chat.
type DeliverTo struct {
	Target string `json:"target"`
	ChatID string `json:"chat_id,omitempty"`
}

// Delivery is one push of a turn's result: the target as the agent
// defines it, with the request's chat.
type Delivery struct {
	// ID is the delivery's idempotency key, the same on every attempt:
	// "<turn workflow id>/<target>".
	ID     string        `json:"id"`
	Target DeliverTarget `json:"target"`
}

// Deliveries are where a turn of an agent with targets is pushed when it
// ends: its agent's Always targets, then those its request names (each
// once; a request may give an Always target another chat). A request
// that names a target its agent lacks, or a Telegram target without a
// chat, is refused.
func Deliveries(targets []DeliverTarget, req TurnRequest, workflowID string) ([]Delivery, error) {
	if len(req.Deliver) > MaxDeliverTargets {
		return nil, Errorf(CodeInvalid, "deliver: %d targets; the limit is %d", len(req.Deliver), MaxDeliverTargets)
	}
	var out []Delivery
	add := func(t DeliverTarget) {
		i := slices.IndexFunc(out, func(d Delivery) bool { return d.Target.Name == t.Name })
		if i >= 0 {
			out[i].Target = t
			return
		}
		out = append(out, Delivery{ID: workflowID + "/" + t.Name, Target: t})
	}
	for _, t := range targets {
		if t.Always {
			add(t)
		}
	}
	for _, to := range req.Deliver {
		i := slices.IndexFunc(targets, func(t DeliverTarget) bool { return t.Name == to.Target })
		if i < 0 {
			names := make([]string, len(targets))
			for j, t := range targets {
				names[j] = t.Name
			}
			has := "it has none"
			if len(names) > 0 {
				has = "it has [" + strings.Join(names, ", ") + "]"
			}
			return nil, Errorf(CodeInvalid, "deliver: agent %q has no deliver target %q; %s", req.AgentID, words.Clip(to.Target, 64), has)
		}
		t := targets[i]
		if to.ChatID != "" {
			if t.Kind != DeliverTelegram {
				return nil, Errorf(CodeInvalid, "deliver: target %q is a %s; chat_id is a telegram target's", t.Name, t.Kind)
			}
			t.ChatID = to.ChatID
		}
		if t.Kind == DeliverTelegram && t.ChatID == "" {
			return nil, Errorf(CodeInvalid, "deliver: telegram target %q needs a chat_id", t.Name)
		}
		add(t)
	}
	return out, nil
}

// checkDeliverTo checks the form of a request's deliver list.
func checkDeliverTo(list []DeliverTo) error {
	if len(list) > MaxDeliverTargets {
		return Errorf(CodeInvalid, "deliver: %d targets; the limit is %d", len(list), MaxDeliverTargets)
	}
	for _, to := range list {
		if to.Target == "" {
			return Errorf(CodeInvalid, "deliver: target is required: the name of one of the agent's deliver targets")
		}
		if err := ValidateID("deliver target", to.Target); err != nil {
			return fmt.Errorf("deliver: %w", err)
		}
		if len(to.ChatID) > 64 {
			return Errorf(CodeInvalid, "deliver: chat_id of target %q: longer than 64 bytes", to.Target)
		}
	}
	return nil
}

// CheckDeliver refuses a request naming a deliver target the agent lacks,
// or one its target cannot take (a chat for a webhook, a Telegram target
// with no chat): the one check of a request's deliver list against its
// agent, made where a turn is prepared (the gateway) and where it starts
// (LoadAgent), so that a turn that could not deliver never runs.
func (a *Agent) CheckDeliver(req TurnRequest) error {
	if len(req.Deliver) == 0 {
		return nil
	}
	req.AgentID = a.ID
	_, err := Deliveries(a.Deliver, req, "")
	return err
}
