package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway/telegram"
	"github.com/agentflow/agentflow/internal/testserver"
)

// botAPI speaks the Bot API's sendMessage for one bot token, and keeps
// what was sent.
type botAPI struct {
	mu   sync.Mutex
	sent []map[string]string
}

func (b *botAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/botbot-token-1/sendMessage" {
		http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, http.StatusNotFound)
		return
	}
	var m map[string]string
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, `{"ok":false,"error_code":400,"description":"Bad Request"}`, http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.sent = append(b.sent, m)
	n := len(b.sent)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": map[string]any{"message_id": n, "chat": map[string]any{"id": m["chat_id"]}}})
}

func (b *botAPI) messages() []map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]string(nil), b.sent...)
}

// TestTelegram: a bot's webhook, posted an update with the secret its
// setWebhook was given, starts a turn of the chat's session whose answer
// is sent to the chat through the Bot API's sendMessage; the same update
// posted again starts nothing more, and the chat's next message is the
// session's next turn. A wrong or missing secret, and a route naming no
// bot, are refused 401 before anything starts; a body that is not an
// Update is a 400, an update that is not a text message a 200 that
// starts nothing, and a message to a closed session a 409.
func TestTelegram(t *testing.T) {
	t.Setenv("TG_BOT_TOKEN", "bot-token-1")
	t.Setenv("TG_HOOK_SECRET", "hook-secret-1")
	bot := &botAPI{}
	api := httptest.NewServer(bot)
	defer api.Close()
	catalog := `tenant: demo
default_agent: assistant
egress: ["127.0.0.1"]
tools:
  - {name: calculator, kind: calculator}
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
    deliver:
      - {name: tg, kind: telegram, bot_token: 'env:TG_BOT_TOKEN', webhook_secret: 'env:TG_HOOK_SECRET'}
`
	ts := testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{catalog}, Tokens: map[string]string{"tok-1": "demo"},
		HTTPAPI: true, TelegramAPI: api.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hook := "http://" + ts.HTTPAPIAddr() + "/v1/telegram/demo/assistant/tg"
	post := func(url, secret, body string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Logf("%s %s: %d %s", url, body[:min(len(body), 40)], resp.StatusCode, answer)
		return resp.StatusCode
	}
	chat := strconv.FormatInt(1e9+time.Now().UnixNano()%1e9, 10) // a session of this run's own
	upd := func(id, text string) string {
		return `{"update_id":` + id + `,"message":{"message_id":3,"date":1700000000,"chat":{"id":` + chat + `,"type":"private"},"from":{"id":7,"is_bot":false,"first_name":"A"},"text":"` + text + `"}}`
	}
	turnID := func(update string) string {
		n, err := strconv.ParseInt(update, 10, 64)
		require.NoError(t, err)
		return contract.TurnWorkflowID("demo", telegram.JobID("hook-secret-1", "demo", "assistant", "tg", n))
	}
	session := telegram.SessionID("assistant", "tg", chat, "7")
	notStarted := func(update string) {
		_, err := ts.Client().DescribeWorkflowExecution(ctx, turnID(update), "")
		var nf *serviceerror.NotFound
		require.ErrorAs(t, err, &nf, "update %s started a turn", update)
	}

	require.Equal(t, http.StatusUnauthorized, post(hook, "wrong-secret", upd("1002", "What is 1 + 1?")))
	require.Equal(t, http.StatusUnauthorized, post(hook, "", upd("1002", "What is 1 + 1?")))
	require.Equal(t, http.StatusUnauthorized, post(strings.Replace(hook, "/tg", "/nobot", 1), "hook-secret-1", upd("1002", "What is 1 + 1?")))
	require.Equal(t, http.StatusUnauthorized, post(strings.Replace(hook, "/demo/", "/acme/", 1), "hook-secret-1", upd("1002", "What is 1 + 1?")))
	require.Equal(t, http.StatusBadRequest, post(hook, "hook-secret-1", `{"update_id":"1002"}`))
	require.Equal(t, http.StatusOK, post(hook, "hook-secret-1", `{"update_id":1002,"edited_message":{"chat":{"id":1},"text":"x"}}`))
	notStarted("1002")

	// One update, posted twice as Telegram does when its first post had
	// no answer: one turn, one answer in the chat.
	require.Equal(t, http.StatusOK, post(hook, "hook-secret-1", upd("1001", "What is 2 + 3?")))
	require.Equal(t, http.StatusOK, post(hook, "hook-secret-1", upd("1001", "What is 2 + 3?")))
	require.Eventually(t, func() bool { return len(bot.messages()) >= 1 }, time.Minute, 50*time.Millisecond)
	require.NoError(t, ts.Client().GetWorkflow(ctx, contract.DeliveryWorkflowID(turnID("1001")), "").Get(ctx, nil))
	var res agent.TurnResult
	require.NoError(t, ts.Client().GetWorkflow(ctx, turnID("1001"), "").Get(ctx, &res))
	require.Equal(t, agent.ChannelTelegram, res.Channel)
	turn, err := ts.Store().Turn(ctx, "demo", res.JobID)
	require.NoError(t, err)
	person := telegram.Person("demo", "assistant", "tg", chat, "7").Caller()
	require.Equal(t, person.Principal(), turn.Request.Caller.Principal(), "the sender is the caller")
	require.Equal(t, "telegram:7", turn.Request.Caller.Name)
	require.Empty(t, turn.Request.Caller.Roles)
	require.Equal(t, session, turn.SessionID)
	require.Equal(t, []map[string]string{{"chat_id": chat, "text": "The result is 5."}}, bot.messages())

	// The chat's next message is the next turn of the same session.
	require.Equal(t, http.StatusOK, post(hook, "hook-secret-1", upd("1003", "What is 4 * 4?")))
	require.Eventually(t, func() bool { return len(bot.messages()) >= 2 }, time.Minute, 50*time.Millisecond)
	require.Equal(t, map[string]string{"chat_id": chat, "text": "The result is 16."}, bot.messages()[1])
	msgs, err := ts.Store().SessionMessages(ctx, "demo", session, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 4, "two exchanges: one per update")
	require.Equal(t, "What is 2 + 3?", msgs[0].Content)
	require.Equal(t, "What is 4 * 4?", msgs[2].Content)
	require.Len(t, bot.messages(), 2)
	notStarted("1002")

	// A chat whose session a schedule's run closed is refused: nothing
	// starts, and the bot's getWebhookInfo shows why.
	require.NoError(t, ts.Store().EndSession(ctx, "demo", session, telegram.JobID("hook-secret-1", "demo", "assistant", "tg", 1003), agent.SessionEndClose))
	require.Equal(t, http.StatusConflict, post(hook, "hook-secret-1", upd("1004", "What is 1 + 1?")))
	notStarted("1004")
}
