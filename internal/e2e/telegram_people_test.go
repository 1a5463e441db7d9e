package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway/telegram"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// peopleScript remembers what it is told to and recalls it when asked,
// through the remember and recall tools, whose scope is the turn's
// caller; arithmetic it answers with the calculator.
const peopleScript = `
rules:
  - name: remember
    when: {user: '(?i)^remember that (.+)$'}
    reply: {tool_calls: [{name: remember, arguments: '{"text": "$1"}'}]}
  - name: remembered
    when: {tool: '^(?:Already )?[Rr]emembered: (.+)$'}
    reply: {text: 'I will remember that $1.'}
  - name: ask
    when: {user: '(?i)^what is my (\w+)\?$'}
    reply: {tool_calls: [{name: recall, arguments: '{"query": "$1"}'}]}
  - name: recalled
    when: {tool: '(?s)<memories[^>]*>\s*- (?P<fact>[^\n]+?) \(mem'}
    reply: {text: 'You told me: ${fact}.'}
  - name: unknown
    when: {tool: '^Nothing remembered'}
    reply: {text: 'I do not know.'}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
`

const peopleCatalog = `tenant: demo
default_agent: assistant
egress: ["127.0.0.1"]
tools:
  - {name: calculator, kind: calculator}
  - {name: remember, kind: remember}
  - {name: recall, kind: recall}
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    tools: [calculator, remember, recall]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
    expose: [a2a]
    deliver:
      - {name: tg, kind: telegram, bot_token: 'env:TG_BOT_TOKEN', webhook_secret: 'env:TG_HOOK_SECRET'}
`

// bot is a Telegram bot's webhook on a test server, and the Bot API it
// answers through.
type bot struct {
	t    *testing.T
	ts   *testserver.Server
	api  *botAPI
	hook string
}

func startBot(t *testing.T) *bot {
	t.Helper()
	t.Setenv("TG_BOT_TOKEN", "bot-token-1")
	t.Setenv("TG_HOOK_SECRET", "hook-secret-1")
	b := &bot{t: t, api: &botAPI{}}
	srv := httptest.NewServer(b.api)
	t.Cleanup(srv.Close)
	b.ts = testserver.Start(t, testserver.Options{Script: peopleScript, Catalogs: []string{peopleCatalog},
		Tokens:  map[string]string{"tok-user": "demo:user:uma", "tok-admin": "demo:user+admin:ada", "tok-approver": "demo:user+approver:abe"},
		HTTPAPI: true, TelegramAPI: srv.URL})
	b.hook = "http://" + b.ts.HTTPAPIAddr() + "/v1/telegram/demo/assistant/tg"
	return b
}

// say posts update id, a message of user in chat, and returns the
// webhook's status.
func (b *bot) say(id int64, chat, user, text string) int {
	b.t.Helper()
	body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"date":1700000000,"chat":{"id":%s,"type":"group"},"from":{"id":%s,"is_bot":false,"first_name":"P"},"text":%q}}`,
		id, id, chat, user, text)
	req, err := http.NewRequest(http.MethodPost, b.hook, strings.NewReader(body))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(telegram.SecretHeader, "hook-secret-1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	b.t.Logf("update %d: %d %s", id, resp.StatusCode, answer)
	return resp.StatusCode
}

// answer posts update id and waits for the bot's answer in chat.
func (b *bot) answer(id int64, chat, user, text string) string {
	b.t.Helper()
	n := len(b.api.messages())
	require.Equal(b.t, http.StatusOK, b.say(id, chat, user, text))
	require.Eventually(b.t, func() bool { return len(b.api.messages()) > n }, time.Minute, 50*time.Millisecond)
	got := b.api.messages()[n]
	require.Equal(b.t, chat, got["chat_id"])
	return got["text"]
}

// a2aTaskIDs lists the tenant's tasks through A2A 1.0's ListTasks, as
// token sees them.
func (b *bot) a2aTaskIDs(token string) ([]string, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":100}}`
	req, err := http.NewRequest(http.MethodPost, "http://"+b.ts.HTTPAPIAddr()+"/a2a/assistant", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Result struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, err
	}
	if answer.Error != nil {
		return nil, fmt.Errorf("ListTasks: %s", answer.Error.Message)
	}
	var ids []string
	for _, task := range answer.Result.Tasks {
		ids = append(ids, task.ID)
	}
	return ids, nil
}

// turn is the stream id of update id's turn.
func (b *bot) turn(id int64) string {
	return contract.TurnWorkflowID("demo", telegram.JobID("hook-secret-1", "demo", "assistant", "tg", id))
}

// TestTelegramPeople: each person writing to a bot is a caller of their
// own, in each chat. A fact one person tells the bot in one chat is
// recalled for them there, never for another person in another chat,
// nor for them in a group, nor for another member of that group; each
// sender in a group has a session of their own, answered in the group.
// A person's session and turns are read only by the tenant's staff
// (admin or approver): to a token with the user role alone they do not
// exist, and listings leave them out. An admin erases a person's
// memories by the identity the bot gives them.
func TestTelegramPeople(t *testing.T) {
	b := startBot(t)
	base := 1e9 + time.Now().UnixNano()%1e9 // chats and people of this run's own
	alice, bob := strconv.FormatInt(base, 10), strconv.FormatInt(base+1, 10)
	group := strconv.FormatInt(-base, 10)
	next := base
	update := func() int64 { next++; return next }

	told := update()
	require.Equal(t, "I will remember that my bank PIN is 9911.", b.answer(told, alice, alice, "Remember that my bank PIN is 9911"))
	require.Equal(t, "You told me: my bank PIN is 9911.", b.answer(update(), alice, alice, "What is my PIN?"), "their own chat recalls it")
	require.Equal(t, "I do not know.", b.answer(update(), bob, bob, "What is my PIN?"), "another person's chat does not")
	require.Equal(t, "I do not know.", b.answer(update(), group, alice, "What is my PIN?"), "nor a group, which would hear it")
	require.Equal(t, "I do not know.", b.answer(update(), group, bob, "What is my PIN?"))
	require.Equal(t, 1, b.ts.Model.Served("recalled"))
	require.Equal(t, 3, b.ts.Model.Served("unknown"))

	// Two people in a group: a session each, both answered in the group.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, who := range []string{alice, bob} {
		msgs, err := b.ts.Store().SessionMessages(ctx, "demo", telegram.SessionID("assistant", "tg", group, who), 0)
		require.NoError(t, err)
		require.Len(t, msgs, 2, "the group's session of %s holds their exchange alone", who)
		require.Equal(t, "What is my PIN?", msgs[0].Content)
	}

	// Who may read a person's chat.
	agents := pb.NewAgentServiceClient(b.ts.Conn)
	aliceChat := telegram.SessionID("assistant", "tg", alice, alice)
	_, err := agents.GetTranscript(withToken("tok-user"), &pb.GetTranscriptRequest{SessionId: aliceChat})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = agents.ForkSession(withToken("tok-user"), &pb.ForkSessionRequest{SessionId: aliceChat})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	for _, tok := range []string{"tok-admin", "tok-approver"} {
		tr, err := agents.GetTranscript(withToken(tok), &pb.GetTranscriptRequest{SessionId: aliceChat})
		require.NoError(t, err, tok)
		require.Len(t, tr.GetEntries(), 2, tok)
		require.Equal(t, "Remember that my bank PIN is 9911", tr.GetEntries()[0].GetPrompt())
	}
	resume := func(tok string) error {
		s, err := agents.Resume(withToken(tok), &pb.ResumeRequest{StreamId: b.turn(told)})
		require.NoError(t, err)
		for {
			if _, err := s.Recv(); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
	}
	require.Equal(t, codes.NotFound, status.Code(resume("tok-user")))
	require.NoError(t, resume("tok-admin"))
	_, err = agents.ListDeliveries(withToken("tok-user"), &pb.ListDeliveriesRequest{StreamId: b.turn(told)})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	// Listings: A2A's ListTasks lists the tenant's turns, a person's only
	// to staff.
	ownJob := "own-" + testserver.RandomID()
	_, err = agents.Invoke(withToken("tok-user"), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: ownJob, Prompt: "What is 1 + 1?"}})
	require.NoError(t, err)
	listed := func(tok string) []string {
		var ids []string
		require.Eventually(t, func() bool {
			var err error
			ids, err = b.a2aTaskIDs(tok)
			require.NoError(t, err)
			return slices.Contains(ids, contract.TurnWorkflowID("demo", ownJob)) // visibility has caught up
		}, time.Minute, 200*time.Millisecond)
		return ids
	}
	require.NotContains(t, listed("tok-user"), b.turn(told))
	require.Contains(t, listed("tok-admin"), b.turn(told))

	// An admin erases a person's memories by the identity the bot gives
	// them: issuer agentflow:telegram/<agent>/<target>, subject
	// <chat>/<user>.
	person := telegram.Person("demo", "assistant", "tg", alice, alice)
	erased, err := pb.NewKnowledgeServiceClient(b.ts.Conn).EraseMemories(withToken("tok-admin"),
		&pb.EraseMemoriesRequest{AgentId: "assistant", Issuer: person.Issuer, Subject: person.Subject})
	require.NoError(t, err)
	require.EqualValues(t, 1, erased.GetDeleted())
	require.Equal(t, "I do not know.", b.answer(update(), alice, alice, "What is my PIN?"))
}

// TestTelegramJobIDs: no one can take the job id of an update the bot
// has not had yet. The ids the door derives are reserved: a tenant's
// user naming one — the turn's job id, the person's session — at any
// door is refused, and the update, when it comes, is answered. What the
// ids were before (telegram-<agent>-<target>-<update_id>) names no
// Telegram turn any more.
func TestTelegramJobIDs(t *testing.T) {
	b := startBot(t)
	base := 2e9 + time.Now().UnixNano()%1e9
	chat := strconv.FormatInt(base, 10)
	next := base + 1
	job := telegram.JobID("hook-secret-1", "demo", "assistant", "tg", next)
	session := telegram.SessionID("assistant", "tg", chat, chat)
	agents := pb.NewAgentServiceClient(b.ts.Conn)
	user := withToken("tok-user")

	// The probe's request: the next update's job id, as it was derived.
	legacy := fmt.Sprintf("telegram-assistant-tg-%d", next)
	res, err := agents.Invoke(user, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: legacy, Prompt: "What is 2 + 2?"}})
	require.NoError(t, err, "an ordinary job id now")
	require.Equal(t, "The result is 4.", res.GetOutput())

	// Today's: refused with a clear error on every path that takes a job
	// id or a session id, before anything starts.
	refused := func(err error) {
		t.Helper()
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), `begins with "af:", which is reserved`)
	}
	_, err = agents.Invoke(user, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 2 + 2?"}})
	refused(err)
	_, err = agents.Start(user, &pb.StartRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 2 + 2?"}})
	refused(err)
	_, err = agents.Start(withToken("tok-admin"), &pb.StartRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 2 + 2?"}})
	refused(err) // staff read a person's turns; no one but the door starts them
	s, err := agents.Stream(user, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 2 + 2?"}})
	require.NoError(t, err)
	_, err = s.Recv()
	refused(err)
	_, err = agents.SendMessage(user, &pb.SendMessageRequest{SessionId: "mine-" + testserver.RandomID(), JobId: job, Prompt: "What is 2 + 2?"})
	refused(err)
	_, err = agents.SendMessage(user, &pb.SendMessageRequest{SessionId: session, Prompt: "What did I say?"})
	refused(err)
	_, err = agents.Invoke(user, &pb.InvokeRequest{Turn: &pb.TurnRequest{SessionId: session, Prompt: "What is 2 + 2?"}})
	refused(err)
	_, err = agents.Invoke(user, &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "What is 2 + 2?",
		Notify: contract.ConversationWorkflowID("demo", session)}})
	refused(err)
	_, err = agents.ForkSession(withToken("tok-admin"), &pb.ForkSessionRequest{SessionId: "any", NewSessionId: session})
	refused(err)

	// The update, when it comes, is the person's.
	require.Equal(t, "The result is 7.", b.answer(next, chat, chat, "What is 3 + 4?"))
	var got agent.TurnResult
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.ts.Client().GetWorkflow(ctx, b.turn(next), "").Get(ctx, &got))
	require.Equal(t, job, got.JobID)
	require.True(t, slices.ContainsFunc(b.api.messages(), func(m map[string]string) bool { return m["text"] == "The result is 7." }))
}
