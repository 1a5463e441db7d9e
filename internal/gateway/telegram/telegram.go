// Package telegram is the gateway's door for Telegram bots: the webhook
// a bot's updates are posted to (the Bot API's setWebhook), whose text
// messages become turns of a session per chat, answered through the
// Delivery of their result to the same chat (internal/deliver's
// sendMessage), not in the webhook's response.
//
// A door: it builds on the gateway's core and must not import another door,
// the workflows or the store.
//
// A bot is an agent's deliver target of kind telegram with a
// webhook_secret (agent.DeliverTarget): its route is
// POST /v1/telegram/{tenant}/{agent}/{target}. Telegram authenticates
// each post with the secret it was given (X-Telegram-Bot-Api-Secret-Token),
// which the door compares, in constant time, with the target's secret
// resolved for the tenant as a delivery resolves its secrets; that
// secret, not a bearer token, is the post's credential, and the tenant
// is the one whose secret it is. A missing or wrong secret, and a route
// that names no such bot, are one answer, 401, read before the body.
//
// The door speaks for the people who write to the bot, who hold no
// token: the sender of a message (from.id) within its chat (chat.id) is
// the message's caller (Person), so that long-term memory, sessions,
// transcripts, grants and audit records are that person's in that chat,
// never the bot's nor another chat's. Each person has a session of their
// own in each chat (SessionID), a group's members each theirs, found or
// created by its Conversation, so that their messages are answered in
// order with their own transcript; the answer goes to the chat. A
// message's job id is keyed by the bot's webhook secret (JobID):
// Telegram redelivers an update it had no 200 for, and the same
// update_id names the same turn, started once, while no one without the
// secret can work the id out and take it first. Both ids are derived
// ids (agent.DerivedID), which no client may name, and a person's
// sessions and turns are read only by the tenant's staff
// (gateway.Token.Staff). Telegram is answered 200 as soon as the
// message is accepted; updates that are not text from a person in a
// chat are answered 200 and ignored, and a body that is not an Update is
// a 400 that starts nothing.
package telegram

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Path is a bot's webhook; Prefix is the paths of every bot.
const (
	Path   = "/v1/telegram/{tenant}/{agent}/{target}"
	Prefix = "/v1/telegram/"
)

// SecretHeader is where Telegram sends the secret_token of setWebhook.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxBody bounds an update; Telegram's are a few KiB.
const maxBody = 256 << 10

// Agents are the agents whose bots the door serves (store.Store).
type Agents interface {
	ActiveAgent(ctx context.Context, tenantID, agentID string) (agent.Agent, error)
}

// New is the Telegram door, serving the bots of agents.
func New(agents Agents) gateway.Door {
	return gateway.NewDoor(agent.ChannelTelegram, func(mux *http.ServeMux, api *gateway.HTTPAPI) {
		api.OwnCredential(Prefix)
		mux.HandleFunc("POST "+Path, (&server{HTTPAPI: api, agents: agents}).webhook)
		api.RefuseOtherMethods(mux, Path)
	})
}

type server struct {
	*gateway.HTTPAPI
	agents Agents
}

// errUnauthorized is every refusal of a post's credential: a wrong or
// missing secret, and a route that names no bot, look alike.
var errUnauthorized = agent.Errorf(agent.CodeUnauthenticated, "wrong or missing "+SecretHeader+" for this bot")

func (s *server) webhook(w http.ResponseWriter, r *http.Request) {
	tenant, agentID, target := r.PathValue("tenant"), r.PathValue("agent"), r.PathValue("target")
	ctx := r.Context()
	secret, err := s.authenticate(r, tenant, agentID, target)
	if err != nil {
		s.Fail(w, r, err, 0)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	body, err := gateway.ReadBody(r)
	if err != nil {
		s.Refuse(w, r, err)
		return
	}
	in, err := decodeUpdate(body)
	if err != nil {
		s.Fail(w, r, err, http.StatusBadRequest)
		return
	}
	if in == nil {
		w.WriteHeader(http.StatusOK) // not a message the bot answers
		return
	}
	// The post's tenant is the bot's; its caller is the person who wrote,
	// in the chat they wrote in.
	ctx = context.WithValue(ctx, gateway.CallerKey{}, Person(tenant, agentID, target, in.ChatID, in.UserID))
	conv := agent.ConversationInput{SessionID: SessionID(agentID, target, in.ChatID, in.UserID), AgentID: agentID}
	msg := agent.SendMessage{Prompt: in.Text, JobID: JobID(secret, tenant, agentID, target, in.UpdateID),
		Deliver: []agent.DeliverTo{{Target: target, ChatID: in.ChatID}}}
	res, err := s.Service().SendMessageTo(gateway.WithDerived(ctx, conv.SessionID, msg.JobID), conv, msg)
	if err != nil {
		s.Logger().Warn("telegram update refused", zap.String("tenant", tenant), zap.String("agent", agentID),
			zap.String("target", target), zap.Int64("update_id", in.UpdateID), zap.Error(err))
		s.Refuse(w, r.WithContext(ctx), err)
		return
	}
	s.Logger().Info("telegram update accepted", zap.String("tenant", tenant), zap.String("agent", agentID),
		zap.String("target", target), zap.Int64("update_id", in.UpdateID), zap.String("turn", res.TurnWorkflowID))
	w.WriteHeader(http.StatusOK)
}

// authenticate checks the post's secret against the webhook_secret of
// the agent's telegram target, resolved for the tenant, and returns it.
func (s *server) authenticate(r *http.Request, tenant, agentID, target string) (string, error) {
	got := r.Header.Get(SecretHeader)
	if got == "" || s.Service().Secrets() == nil {
		return "", errUnauthorized
	}
	for _, id := range []string{tenant, agentID, target} {
		if agent.ValidateID("id", id) != nil {
			return "", errUnauthorized
		}
	}
	ag, err := s.agents.ActiveAgent(r.Context(), tenant, agentID)
	if agent.IsCode(err, agent.CodeNotFound) || agent.IsCode(err, agent.CodeAgentNotFound) {
		return "", errUnauthorized
	}
	if err != nil {
		return "", fmt.Errorf("load agent %q: %w", agentID, err)
	}
	i := slices.IndexFunc(ag.Deliver, func(t agent.DeliverTarget) bool {
		return t.Name == target && t.Kind == agent.DeliverTelegram && t.WebhookSecret != ""
	})
	if i < 0 {
		return "", errUnauthorized
	}
	want, err := s.Service().Secrets().Resolve(secrets.WithTenant(r.Context(), tenant), ag.Deliver[i].WebhookSecret)
	if err != nil {
		// The operator's to fix; the log says which.
		s.Logger().Warn("telegram webhook secret not resolved", zap.String("tenant", tenant), zap.String("agent", agentID),
			zap.String("target", target), zap.Error(err))
		return "", errUnauthorized
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return "", errUnauthorized
	}
	return want, nil
}

// IssuerPrefix begins the issuer of the people a bot speaks for:
// agentflow:telegram/<agent>/<target>, the bot that vouches for them.
const IssuerPrefix = "agentflow:telegram/"

// Person is who the sender userID of a message in chatID is, to the bot
// target of agentID of tenant: issuer the bot (IssuerPrefix), subject
// "<chat id>/<user id>", name telegram:<user id>, no roles. Their
// memories, sessions, grants and audit records are theirs in that chat:
// what someone tells the bot in a group is not theirs in a private chat,
// where the group would not hear it, nor the other way round.
func Person(tenant, agentID, target, chatID, userID string) gateway.Token {
	return gateway.Token{Tenant: tenant, Name: "telegram:" + userID,
		Issuer: IssuerPrefix + agentID + "/" + target, Subject: chatID + "/" + userID}
}

// SessionID is the session of userID's messages to the bot target of
// agentID in chatID: af:telegram:<agent>:<target>:<chat id>:<user id>
// (agent.DerivedID).
func SessionID(agentID, target, chatID, userID string) string {
	return agent.DerivedID(agent.ChannelTelegram, agentID, target, chatID, userID)
}

// JobID is the job id of the turn that answers update updateID of the
// bot target of agentID of tenant, keyed by the bot's webhook secret
// (agent.KeyedID): the same for every delivery of the update, and
// unknown to whoever does not hold the secret.
func JobID(secret, tenant, agentID, target string, updateID int64) string {
	return agent.KeyedID(agent.ChannelTelegram, []byte(secret), tenant, agentID, target, strconv.FormatInt(updateID, 10))
}
