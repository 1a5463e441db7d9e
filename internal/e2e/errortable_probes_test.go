package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	a2adoor "github.com/agentflow/agentflow/internal/gateway/a2a"
	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
	openaidoor "github.com/agentflow/agentflow/internal/gateway/openai"
	telegramdoor "github.com/agentflow/agentflow/internal/gateway/telegram"
	wsdoor "github.com/agentflow/agentflow/internal/gateway/ws"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// errProbes are the error table's probes, by door and class: each
// provokes its class at its door, as a client of the door's protocol
// would meet it, and reads the door's answer.
func errProbes() map[string]map[agent.Code]errProbe {
	return map[string]map[agent.Code]errProbe{
		gateway.GRPCErrors().Door:            grpcProbes,
		gateway.HTTPErrors().Door:            httpProbes,
		doorRow(agent.ChannelSSE).Door:       sseProbes,
		doorRow(agent.ChannelWebSocket).Door: socketProbes,
		openaidoor.Errors.Door:               openAIProbes,
		doorRow(agent.ChannelAISDK).Door:     aiSDKProbes,
		doorRow(agent.ChannelAGUI).Door:      aguiProbes,
		mcpdoor.Errors2025.Door:              mcpSessionProbes,
		mcpdoor.Errors2026.Door:              mcpStatelessProbes,
		a2adoor.Errors.Door:                  a2aProbes,
		telegramdoor.Errors.Door:             telegramProbes,
	}
}

// grpcProbes: AgentService's calls.
var grpcProbes = map[agent.Code]errProbe{
	agent.CodeInvalid: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.grpcStart(e.user, &pb.TurnRequest{JobId: "errtab-" + testserver.RandomID()})
	},
	agent.CodeUnauthenticated: func(e *errEnv, _ agent.Code) gateway.DoorError {
		_, err := pb.NewAgentServiceClient(e.Conn).ListAgents(e.ctx, &pb.ListAgentsRequest{})
		return grpcAnswer(err)
	},
	agent.CodePermissionDenied: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.grpcStart(e.approver, &pb.TurnRequest{Prompt: "hi"})
	},
	agent.CodeNotFound: func(e *errEnv, _ agent.Code) gateway.DoorError {
		_, err := pb.NewAgentServiceClient(e.Conn).ListEvents(grpcAs(e.ctx, e.user), &pb.ListEventsRequest{StreamId: "turn/demo/never-" + testserver.RandomID()})
		return grpcAnswer(err)
	},
	agent.CodeConflict: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.grpcStart(e.user, &pb.TurnRequest{JobId: e.conflict, Prompt: "hi"})
	},
	agent.CodeRateLimited: func(e *errEnv, _ agent.Code) gateway.DoorError {
		s, err := pb.NewAgentServiceClient(e.Conn).Stream(grpcAs(e.ctx, e.user), &pb.StreamRequest{Turn: &pb.TurnRequest{Prompt: "hi"}})
		if err == nil {
			_, err = s.Recv()
		}
		st := status.Convert(err)
		require.Equal(e.t, gateway.LimitRetryAfter, gateway.RetryAfterOf(st), "a limit says when to try again")
		return grpcAnswer(err)
	},
	agent.CodeUnavailable: func(e *errEnv, _ agent.Code) gateway.DoorError {
		_, err := pb.NewAgentServiceClient(e.Conn).ListAgents(grpcAs(e.ctx, e.user), &pb.ListAgentsRequest{})
		return grpcAnswer(err)
	},
}

func (e *errEnv) grpcStart(token string, turn *pb.TurnRequest) gateway.DoorError {
	_, err := pb.NewAgentServiceClient(e.Conn).Start(grpcAs(e.ctx, token), &pb.StartRequest{Turn: turn})
	return grpcAnswer(err)
}

// grpcAnswer is a call's status code ("OK" for none).
func grpcAnswer(err error) gateway.DoorError {
	return gateway.DoorError{Code: status.Code(err).String()}
}

// httpProbes: the HTTP API's JSON routes.
var httpProbes = map[agent.Code]errProbe{
	agent.CodeInvalid: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("POST", "/v1/turns", e.user, `{}`, nil))
	},
	agent.CodeUnauthenticated: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("GET", "/v1/agents", "", "", nil))
	},
	agent.CodePermissionDenied: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("GET", "/v1/agents", e.approver, "", nil))
	},
	agent.CodeNotFound: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("GET", "/v1/turn/demo/never-"+testserver.RandomID()+"/events", e.user, "", nil))
	},
	agent.CodeConflict: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("POST", "/v1/turns", e.user, `{"job_id": "`+e.conflict+`", "prompt": "hi"}`, nil))
	},
	agent.CodeRateLimited: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.withBodiesInFlight("/v1/turns", map[string]string{"Authorization": "Bearer " + e.user}, func() gateway.DoorError {
			return e.problem(e.raw("POST", "/v1/turns", e.user, `{}`, nil))
		})
	},
	agent.CodeUnavailable: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("GET", "/v1/agents", e.user, "", nil))
	},
}

// sseProbes: POST /v1/turns:stream and the follow of a turn.
var sseProbes = map[agent.Code]errProbe{
	agent.CodeInvalid:          func(e *errEnv, _ agent.Code) gateway.DoorError { return e.sseStart(e.user, `{}`) },
	agent.CodeUnauthenticated:  func(e *errEnv, _ agent.Code) gateway.DoorError { return e.sseStart("", `{"prompt": "hi"}`) },
	agent.CodePermissionDenied: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.sseStart(e.approver, `{"prompt": "hi"}`) },
	agent.CodeNotFound: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("GET", "/v1/turn/demo/never-"+testserver.RandomID()+"/events:stream", e.user, "", nil))
	},
	agent.CodeConflict: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.sseStart(e.user, `{"job_id": "`+e.conflict+`", "prompt": "hi"}`)
	},
	agent.CodeRateLimited: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.sseStart(e.user, `{"prompt": "hi"}`) },
}

func (e *errEnv) sseStart(token, body string) gateway.DoorError {
	return e.problem(e.raw("POST", "/v1/turns:stream", token, body, nil))
}

// socketProbes: the WebSocket's upgrade, and its commands once open.
var socketProbes = map[agent.Code]errProbe{
	agent.CodeInvalid:         func(e *errEnv, _ agent.Code) gateway.DoorError { return e.socketUpgrade(e.user, "after_index=-1") },
	agent.CodeUnauthenticated: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.socketUpgrade("", "") },
	agent.CodePermissionDenied: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.socketCommand(e.approver, `{"type": "start", "id": "p", "prompt": "hi"}`)
	},
	agent.CodeNotFound: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.socketUpgrade(e.user, "stream_id=turn/rival/never-"+testserver.RandomID())
	},
	agent.CodeConflict: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.socketCommand(e.user, `{"type": "start", "id": "c", "job_id": "`+e.conflict+`", "prompt": "hi"}`)
	},
	agent.CodeRateLimited: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.socketUpgrade(e.user, "") },
}

// socketUpgrade is a refused upgrade's problem.
func (e *errEnv) socketUpgrade(token, query string) gateway.DoorError {
	e.t.Helper()
	opts := &websocket.DialOptions{HTTPHeader: http.Header{}}
	if token != "" {
		opts.HTTPHeader.Set("Authorization", "Bearer "+token)
	}
	c, resp, err := websocket.Dial(e.ctx, e.socketURL(query), opts)
	if err == nil {
		_ = c.CloseNow()
		return gateway.DoorError{HTTP: http.StatusSwitchingProtocols}
	}
	require.NotNil(e.t, resp, "%v", err)
	return e.problem(resp.StatusCode, resp.Header, nil)
}

// socketCommand is a refused command's problem, on a socket of token.
func (e *errEnv) socketCommand(token, cmd string) gateway.DoorError {
	e.t.Helper()
	c := e.socket(e.ctx, token, "")
	defer c.CloseNow()
	command(e.t, e.ctx, c, cmd)
	r := reply(e.t, e.ctx, c, wsdoor.SocketError)
	require.NotNil(e.t, r.Problem)
	return gateway.DoorError{HTTP: r.Problem.Status}
}

// openAIProbes: chat completions, Responses and models.
var openAIProbes = map[agent.Code]errProbe{
	agent.CodeInvalid: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.openAI("POST", "/v1/chat/completions", e.user, `{"model": "assistant", "messages": []}`, nil)
	},
	agent.CodeUnauthenticated: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.openAI("POST", "/v1/responses", "", `{"model": "assistant", "input": "hi"}`, nil)
	},
	agent.CodePermissionDenied: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.openAI("POST", "/v1/chat/completions", e.approver, openAIHi("assistant"), nil)
	},
	agent.CodeNotFound: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.openAI("POST", "/v1/chat/completions", e.user, openAIHi("nobody"), nil)
	},
	agent.CodeConflict: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.openAI("POST", "/v1/chat/completions", e.user, openAIHi("assistant"), map[string]string{"Idempotency-Key": e.conflict})
	},
	agent.CodeRateLimited: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.openAI("POST", "/v1/chat/completions", e.user, openAIHi("assistant"), nil)
	},
	agent.CodeUnavailable: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.openAI("GET", "/v1/models", e.user, "", nil) },
}

func openAIHi(model string) string {
	return `{"model": "` + model + `", "messages": [{"role": "user", "content": "hi"}]}`
}

// openAI is an OpenAI error object's status and type.
func (e *errEnv) openAI(method, path, token, body string, headers map[string]string) gateway.DoorError {
	e.t.Helper()
	code, h, data := e.raw(method, path, token, body, headers)
	var v struct {
		Error *struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	require.NoError(e.t, json.Unmarshal(data, &v), "%d %s", code, data)
	require.NotNil(e.t, v.Error, "%d %s", code, data)
	if code == http.StatusTooManyRequests {
		require.Equal(e.t, "1", h.Get("Retry-After"))
		require.Equal(e.t, "true", h.Get("X-Should-Retry"), "OpenAI's clients try again after Retry-After")
	}
	return gateway.DoorError{HTTP: code, Code: v.Error.Type}
}

// aiSDKProbes: the AI SDK's chat.
var aiSDKProbes = map[agent.Code]errProbe{
	agent.CodeInvalid: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("POST", "/v1/ui/chat", e.user, `{"id": "errtab", "messages": []}`, nil))
	},
	agent.CodeUnauthenticated:  func(e *errEnv, _ agent.Code) gateway.DoorError { return e.uiChat("", "assistant") },
	agent.CodePermissionDenied: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.uiChat(e.approver, "assistant") },
	agent.CodeNotFound:         func(e *errEnv, _ agent.Code) gateway.DoorError { return e.uiChat(e.user, "nobody") },
	agent.CodeConflict: func(e *errEnv, _ agent.Code) gateway.DoorError {
		chat := "errtab-" + testserver.RandomID()
		e.uiStream("POST", "/v1/ui/chat", e.user, uiBody(e.t, chat, "assistant", userMessage("hi")))
		return e.problem(e.raw("POST", "/v1/ui/chat", e.user, uiBody(e.t, chat, "careful", userMessage("hi")), nil))
	},
	agent.CodeRateLimited: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.uiChat(e.user, "assistant") },
}

func (e *errEnv) uiChat(token, agentID string) gateway.DoorError {
	return e.problem(e.raw("POST", "/v1/ui/chat", token, uiBody(e.t, "errtab-"+testserver.RandomID(), agentID, userMessage("hi")), nil))
}

// aguiProbes: AG-UI's runs.
var aguiProbes = map[agent.Code]errProbe{
	agent.CodeInvalid: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.problem(e.raw("POST", "/ag-ui/assistant", e.user, `{"runId": 7}`, nil))
	},
	agent.CodeUnauthenticated:  func(e *errEnv, _ agent.Code) gateway.DoorError { return e.aguiRun("", "assistant", "") },
	agent.CodePermissionDenied: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.aguiRun(e.approver, "assistant", "") },
	agent.CodeNotFound:         func(e *errEnv, _ agent.Code) gateway.DoorError { return e.aguiRun(e.user, "nobody", "") },
	agent.CodeConflict:         func(e *errEnv, _ agent.Code) gateway.DoorError { return e.aguiRun(e.user, "assistant", e.conflict) },
	agent.CodeRateLimited:      func(e *errEnv, _ agent.Code) gateway.DoorError { return e.aguiRun(e.user, "assistant", "") },
	agent.CodeUnavailable:      func(e *errEnv, _ agent.Code) gateway.DoorError { return e.aguiRun(e.user, "assistant", "") },
}

func (e *errEnv) aguiRun(token, agentID, runID string) gateway.DoorError {
	if runID == "" {
		runID = "errtab-" + testserver.RandomID()
	}
	return e.problem(e.raw("POST", "/ag-ui/"+agentID, token,
		`{"threadId":"","runId":"`+runID+`","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[]}`, nil))
}

// telegramProbes: a bot's webhook.
var telegramProbes = map[agent.Code]errProbe{
	agent.CodeInvalid: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.telegram(telegramHook, "hook-secret-1", `{"update_id":"x"}`)
	},
	agent.CodeUnauthenticated: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.telegram(telegramHook, "wrong-secret", telegramUpdate(1, "hi"))
	},
	agent.CodeNotFound: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.telegram(strings.Replace(telegramHook, "/tg", "/nobot", 1), "hook-secret-1", telegramUpdate(1, "hi"))
	},
	agent.CodeConflict: func(e *errEnv, _ agent.Code) gateway.DoorError {
		// One update posted again with another text: not Telegram's
		// redelivery, whose update is the same.
		id := int(1e9 + time.Now().UnixNano()%1e9)
		require.Equal(e.t, gateway.DoorError{HTTP: http.StatusOK}, e.telegram(telegramHook, "hook-secret-1", telegramUpdate(id, "What is 2 + 2?")))
		return e.telegram(telegramHook, "hook-secret-1", telegramUpdate(id, "What is 3 + 3?"))
	},
	agent.CodeRateLimited: func(e *errEnv, _ agent.Code) gateway.DoorError {
		secret := map[string]string{telegramdoor.SecretHeader: "hook-secret-1"}
		return e.withBodiesInFlight(telegramHook, secret, func() gateway.DoorError {
			return e.telegram(telegramHook, "hook-secret-1", `{"update_id":1,"edited_message":{"chat":{"id":1},"text":"x"}}`)
		})
	},
	agent.CodeUnavailable: func(e *errEnv, _ agent.Code) gateway.DoorError {
		return e.telegram(telegramHook, "hook-secret-1", telegramUpdate(2, "hi"))
	},
}

const telegramHook = "/v1/telegram/demo/assistant/tg"

func telegramUpdate(id int, text string) string {
	return `{"update_id":` + strconv.Itoa(id) + `,"message":{"message_id":3,"date":1700000000,"chat":{"id":4242,"type":"private"},` +
		`"from":{"id":7,"is_bot":false,"first_name":"A"},"text":"` + text + `"}}`
}

func (e *errEnv) telegram(path, secret, body string) gateway.DoorError {
	code, h, data := e.raw("POST", path, "", body, map[string]string{telegramdoor.SecretHeader: secret})
	if code == http.StatusOK {
		return gateway.DoorError{HTTP: code}
	}
	return e.problem(code, h, data)
}
