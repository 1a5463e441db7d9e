package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/deliver"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// refusingBot speaks the Bot API's sendMessage as Telegram refuses it:
// chat "0" does not exist (400, which no retry changes); chat "429" is
// flooded once (429 with retry_after 1), then takes the message.
type refusingBot struct {
	mu      sync.Mutex
	flooded bool
	sent    []string
}

func (b *refusingBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m map[string]string
	_ = json.NewDecoder(r.Body).Decode(&m)
	b.mu.Lock()
	defer b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path != "/botbot-token-1/sendMessage":
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`)
	case m["chat_id"] == "0":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`)
	case m["chat_id"] == "429" && !b.flooded:
		b.flooded = true
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 1","parameters":{"retry_after":1}}`)
	default:
		b.sent = append(b.sent, m["chat_id"]+": "+m["text"])
		_, _ = io.WriteString(w, `{"ok":true,"result":{"message_id":1}}`)
	}
}

// TestDeliveries: a request naming a deliver target its agent lacks is
// refused before any turn starts, on the HTTP API, on gRPC, for a
// conversation's message, and for a turn started with the temporal CLI
// (which fails at once, InvalidRequest, having called no model). A
// turn's deliveries are read back per tenant: a receiver that took it
// (one attempt, 200), one that refused it and a Telegram chat that does
// not exist (each failed at its first attempt, with the reason), and a
// flooded chat reached on the attempt after the wait Telegram asked for;
// another tenant reading the turn gets 404.
func TestDeliveries(t *testing.T) {
	t.Setenv("NOTIFY_HOOK_KEY", "hook-key-1")
	t.Setenv("TG_BOT_TOKEN", "bot-token-1")
	recv := &hookReceiver{accepted: map[string]deliver.Payload{}}
	hook := httptest.NewServer(recv)
	defer hook.Close()
	refuser := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unknown sender", http.StatusUnprocessableEntity)
	}))
	defer refuser.Close()
	bot := &refusingBot{}
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
      - {name: hook, kind: webhook, url: '` + hook.URL + `/in', secret: 'env:NOTIFY_HOOK_KEY'}
      - {name: refuser, kind: webhook, url: '` + refuser.URL + `/in', secret: 'env:NOTIFY_HOOK_KEY'}
      - {name: tg, kind: telegram, bot_token: 'env:TG_BOT_TOKEN'}
`
	acme := "tenant: acme\ndefault_agent: a\nagents:\n  - {id: a, model: openai:gpt-4o-mini}\n"
	e := &env{Server: testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{catalog, acme},
		Tokens: map[string]string{"tok-demo": "demo", "tok-acme": "acme"}, HTTPAPI: true, TelegramAPI: api.URL}), t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	httpDo := func(method, path, token, body string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, method, "http://"+e.HTTPAPIAddr()+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	grpcCtx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-demo")
	client := pb.NewAgentServiceClient(e.Conn)
	const refusal = `deliver: agent \"assistant\" has no deliver target \"slack\"; it has [hook, refuser, tg]`

	// Refused at every door before a turn starts.
	job := "nodeliver-" + testserver.RandomID()
	code, body := httpDo("POST", "/v1/turns", "tok-demo", `{"job_id":"`+job+`","agent_id":"assistant","prompt":"What is 2 + 3?","deliver":[{"target":"slack"}]}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, refusal)
	_, err := client.Start(grpcCtx, &pb.StartRequest{Turn: &pb.TurnRequest{JobId: job, AgentId: "assistant", Prompt: "What is 2 + 3?",
		Deliver: []*pb.DeliverTo{{Target: "slack"}}}})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), strings.ReplaceAll(refusal, `\"`, `"`))
	code, body = httpDo("POST", "/v1/conversations/s-"+job+"/messages", "tok-demo",
		`{"agent_id":"assistant","prompt":"What is 2 + 3?","deliver":[{"target":"slack"}]}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, refusal)
	_, err = e.Client().DescribeWorkflowExecution(ctx, contract.TurnWorkflowID("demo", job), "")
	require.Error(t, err, "no turn was started")

	// A routed turn started with the temporal CLI fails at once: its
	// LoadAgent refuses the target, and no model is called.
	cli := contract.TurnWorkflowID("demo", "cli-"+job)
	e.startWithCLI(cli, `{"tenant_id":"demo","job_id":"cli-`+job+`","prompt":"What is 2 + 3?","deliver":[{"target":"slack"}]}`)
	_, err = e.result(cli)
	require.Error(t, err)
	turnErr := contract.ErrorOf(err)
	require.Equal(t, agent.ErrTypeInvalidRequest, turnErr.Code.Class().Type, "%v", err)
	require.Contains(t, err.Error(), strings.ReplaceAll(refusal, `\"`, `"`))
	for _, ev := range e.history(cli) {
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			require.NotEqual(t, contract.CallModel, ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
		}
	}

	// A turn pushed to three targets: one takes it, two refuse it for
	// good, each at its first attempt.
	job = "deliveries-" + testserver.RandomID()
	started, err := client.Start(grpcCtx, &pb.StartRequest{Turn: &pb.TurnRequest{JobId: job, AgentId: "assistant", Prompt: "What is 2 + 3?",
		Deliver: []*pb.DeliverTo{{Target: "hook"}, {Target: "refuser"}, {Target: "tg", ChatId: "0"}}}})
	require.NoError(t, err)
	wid := started.GetStreamId()
	res, err := e.result(wid)
	require.NoError(t, err)
	require.Equal(t, "The result is 5.", res.Output)
	begin := time.Now()
	err = e.Client().GetWorkflow(ctx, contract.DeliveryWorkflowID(wid), "").Get(ctx, nil)
	require.ErrorContains(t, err, "Bad Request: chat not found")
	require.Less(t, time.Since(begin), 30*time.Second, "refusals are not retried")

	var list struct {
		Deliveries []struct {
			DeliveryID string `json:"delivery_id"`
			Target     string `json:"target"`
			Kind       string `json:"kind"`
			Status     string `json:"status"`
			Attempts   []struct {
				Attempt    int       `json:"attempt"`
				Outcome    string    `json:"outcome"`
				HTTPStatus int       `json:"http_status"`
				Error      string    `json:"error"`
				At         time.Time `json:"at"`
			} `json:"attempts"`
		} `json:"deliveries"`
	}
	code, body = httpDo("GET", "/v1/"+wid+"/deliveries", "tok-demo", "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	require.Len(t, list.Deliveries, 3, body)
	type row struct {
		id, target, kind, status, outcome string
		attempts, http                    int
	}
	var rows []row
	for _, d := range list.Deliveries {
		require.NotEmpty(t, d.Attempts)
		a := d.Attempts[len(d.Attempts)-1]
		rows = append(rows, row{d.DeliveryID, d.Target, d.Kind, d.Status, a.Outcome, len(d.Attempts), a.HTTPStatus})
		require.WithinDuration(t, time.Now(), a.At, time.Minute)
	}
	require.Equal(t, []row{
		{wid + "/hook", "hook", "webhook", "delivered", "delivered", 1, 200},
		{wid + "/refuser", "refuser", "webhook", "failed", "failed", 1, 422},
		{wid + "/tg", "tg", "telegram", "failed", "failed", 1, 400},
	}, rows)
	require.Contains(t, list.Deliveries[1].Attempts[0].Error, "unknown sender")
	require.Contains(t, list.Deliveries[2].Attempts[0].Error, "Bad Request: chat not found")
	require.NotContains(t, body, "bot-token-1")
	require.NotContains(t, body, "hook-key-1")
	require.NotContains(t, body, "v1=")

	// Another tenant's token: the turn is not found, whichever way it asks.
	code, body = httpDo("GET", "/v1/"+wid+"/deliveries", "tok-acme", "")
	require.Equal(t, http.StatusNotFound, code, body)
	code, body = httpDo("GET", "/v1/turn/acme/"+job+"/deliveries", "tok-acme", "")
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, body, "hook")

	// A conversation's message over HTTP names a target too; Telegram's
	// flood answer is waited out as it asks, and the next attempt lands.
	session := "s-" + job
	code, body = httpDo("POST", "/v1/conversations/"+session+"/messages", "tok-demo",
		`{"agent_id":"assistant","prompt":"What is 4 * 4?","deliver":[{"target":"tg","chat_id":"429"}]}`)
	require.Equal(t, http.StatusOK, code, body)
	var sent struct {
		StreamID string `json:"stream_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &sent))
	require.Eventually(t, func() bool {
		_, err := e.Client().DescribeWorkflowExecution(ctx, contract.DeliveryWorkflowID(sent.StreamID), "")
		return err == nil
	}, time.Minute, 100*time.Millisecond)
	require.NoError(t, e.Client().GetWorkflow(ctx, contract.DeliveryWorkflowID(sent.StreamID), "").Get(ctx, nil))
	resp, err := client.ListDeliveries(grpcCtx, &pb.ListDeliveriesRequest{StreamId: sent.StreamID})
	require.NoError(t, err)
	require.Len(t, resp.GetDeliveries(), 1)
	d := resp.GetDeliveries()[0]
	require.Equal(t, "delivered", d.GetStatus())
	require.Len(t, d.GetAttempts(), 2)
	require.Equal(t, []any{"retrying", int32(429)}, []any{d.GetAttempts()[0].GetOutcome(), d.GetAttempts()[0].GetHttpStatus()})
	require.GreaterOrEqual(t, d.GetAttempts()[1].GetAt().AsTime().Sub(d.GetAttempts()[0].GetAt().AsTime()), 900*time.Millisecond,
		"the second attempt waited for retry_after")
	bot.mu.Lock()
	require.Equal(t, []string{"429: The result is 16."}, bot.sent)
	bot.mu.Unlock()
}
