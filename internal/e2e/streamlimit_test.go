package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	a2adoor "github.com/agentflow/agentflow/internal/gateway/a2a"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// everyDoorCatalogs are the HTTP tests' catalogs with demo's agents
// served on every door.
var everyDoorCatalogs = []string{
	strings.ReplaceAll(httpCatalogs[0], "    model: openai:gpt-4o-mini\n", "    model: openai:gpt-4o-mini\n    expose: [mcp, a2a, ag_ui]\n"),
	httpCatalogs[1],
}

// TestStreamLimitEveryDoor: with AGENTFLOW_MAX_STREAMS_PER_TENANT
// reached, every door that follows a turn refuses the next one before it
// starts anything — gRPC Stream, SSE, WebSocket, chat completions
// streamed or not (OpenAI's client), the AI SDK, AG-UI, A2A (a2a-go's
// client) and MCP (the MCP SDK's client) — and a streamed chat completion
// holds a slot while it is open, as every other stream does.
func TestStreamLimitEveryDoor(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.MaxStreamsPerTenant = 1
		o.Catalogs = everyDoorCatalogs
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	oa := openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.user), option.WithMaxRetries(0))
	mcpSession := e.mcpAsked(ctx, t, e.user, make(chan elicited, 1), &mcp.ElicitResult{Action: "decline"})
	a2aCtx := a2aclient.WithSessionID(ctx, "s")
	card, err := agentcard.NewResolver(nil).Resolve(a2aCtx, e.api+a2adoor.A2APrefix+"assistant",
		agentcard.WithRequestHeader("Authorization", "Bearer "+e.user))
	require.NoError(t, err)
	creds := a2aclient.NewInMemoryCredentialsStore()
	creds.Set("s", "bearer", a2aclient.AuthCredential(e.user))
	a2aClient, err := a2aclient.NewFromCard(a2aCtx, card, a2aclient.WithInterceptors(&a2aclient.AuthInterceptor{Service: creds}))
	require.NoError(t, err)

	// refusals are the doors' attempts at a second stream, each naming
	// the job (or session) it would start, which must not be started.
	type attempt struct {
		door    string
		job     string // a turn that must not start
		session string // or a conversation that must not start
		try     func(job string) error
	}
	rateLimited := func(err error) error {
		if err == nil {
			return errors.New("accepted")
		}
		if !strings.Contains(err.Error(), "AGENTFLOW_MAX_STREAMS_PER_TENANT") && !strings.Contains(err.Error(), "429") &&
			!strings.Contains(err.Error(), "ResourceExhausted") {
			return fmt.Errorf("not refused for its tenant's streams: %w", err)
		}
		return nil
	}
	refusals := []attempt{
		{door: "chat completion, streamed", job: "lim-oa-s-" + testserver.RandomID(), try: func(job string) error {
			_, err := (&openAIEnv{t: t}).stream(ctx, oa, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("hi")},
				option.WithHeader("Idempotency-Key", job))
			var apiErr *openai.Error
			if errors.As(err, &apiErr) && apiErr.StatusCode != http.StatusTooManyRequests {
				return fmt.Errorf("status %d: %w", apiErr.StatusCode, err)
			}
			return rateLimited(err)
		}},
		{door: "chat completion", job: "lim-oa-" + testserver.RandomID(), try: func(job string) error {
			_, err := oa.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("hi")},
				option.WithHeader("Idempotency-Key", job))
			return rateLimited(err)
		}},
		{door: "chat completion in a session", session: "lim-oa-sess-" + testserver.RandomID(), try: func(session string) error {
			_, err := oa.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "assistant", Messages: userMessages("hi")},
				option.WithHeader("X-Agentflow-Session", session))
			return rateLimited(err)
		}},
		{door: "SSE", job: "lim-sse-" + testserver.RandomID(), try: func(job string) error {
			code, data := e.rawCallBody("POST", "/v1/turns:stream", e.user, `{"job_id": "`+job+`", "prompt": "hi"}`)
			return rateLimited(fmt.Errorf("%d %s", code, data))
		}},
		{door: "SSE, a conversation's", session: "lim-sse-sess-" + testserver.RandomID(), try: func(session string) error {
			code, data := e.rawCallBody("POST", "/v1/conversations/"+session+"/messages:stream", e.user, `{"prompt": "hi"}`)
			return rateLimited(fmt.Errorf("%d %s", code, data))
		}},
		{door: "gRPC Stream", job: "lim-grpc-" + testserver.RandomID(), try: func(job string) error {
			s, err := pb.NewAgentServiceClient(e.Conn).Stream(grpcAs(ctx, e.user), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "hi"}})
			if err == nil {
				_, err = s.Recv()
			}
			return rateLimited(err)
		}},
		{door: "AI SDK", session: "lim-ui-" + testserver.RandomID(), try: func(chat string) error {
			code, data := e.rawCallBody("POST", "/v1/ui/chat", e.user, uiBody(t, chat, "assistant", userMessage("hi")))
			return rateLimited(fmt.Errorf("%d %s", code, data))
		}},
		{door: "AG-UI", job: "lim-agui-" + testserver.RandomID(), try: func(job string) error {
			code, data := e.rawCallBody("POST", "/ag-ui/assistant", e.user,
				`{"threadId":"","runId":"`+job+`","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[]}`)
			return rateLimited(fmt.Errorf("%d %s", code, data))
		}},
		{door: "AG-UI, a thread's", session: "lim-agui-thread-" + testserver.RandomID(), try: func(thread string) error {
			code, data := e.rawCallBody("POST", "/ag-ui/assistant", e.user,
				`{"threadId":"`+thread+`","runId":"r-`+thread+`","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[]}`)
			return rateLimited(fmt.Errorf("%d %s", code, data))
		}},
		{door: "A2A message/send", try: func(string) error {
			_, err := a2aClient.SendMessage(a2aCtx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})})
			return rateLimited(err)
		}},
		{door: "A2A message/stream", try: func(string) error {
			for _, err := range a2aClient.SendStreamingMessage(a2aCtx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})}) {
				if err != nil {
					return rateLimited(err)
				}
			}
			return errors.New("accepted")
		}},
		{door: "MCP tools/call", try: func(string) error {
			res, err := mcpSession.CallTool(ctx, &mcp.CallToolParams{Name: "assistant", Arguments: map[string]any{"prompt": "hi"}})
			if err != nil {
				return rateLimited(err)
			}
			if !res.IsError {
				return errors.New("accepted")
			}
			return rateLimited(errors.New(mcpText(res)))
		}},
		{door: "WebSocket", try: func(string) error {
			resp := e.socketRefused(ctx, e.user, "")
			return rateLimited(fmt.Errorf("%d", resp.StatusCode))
		}},
	}
	requireNothingStarted := func(a attempt) {
		t.Helper()
		if a.job != "" {
			e.requireNotStarted("demo", a.job)
		}
		if a.session != "" {
			_, err := e.Client().DescribeWorkflowExecution(ctx, contract.ConversationWorkflowID("demo", a.session), "")
			var nf *serviceerror.NotFound
			require.ErrorAs(t, err, &nf, "%s: no conversation is started", a.door)
		}
	}

	// A WebSocket holds demo's one stream: every door refuses another.
	socket := e.socket(ctx, e.user, "")
	for _, a := range refusals {
		require.NoError(t, a.try(a.job+a.session), a.door)
		requireNothingStarted(a)
	}
	_ = e.socket(ctx, e.rival, "") // rival's streams are its own

	// A streamed chat completion that waits for an approval holds the
	// stream as long as it is open: another door is refused meanwhile.
	require.NoError(t, socket.CloseNow())
	job := "lim-held-" + testserver.RandomID()
	held, heldCancel := context.WithCancel(ctx)
	defer heldCancel()
	var s interface {
		Next() bool
		Err() error
		Close() error
	}
	require.Eventually(t, func() bool {
		st := oa.Chat.Completions.NewStreaming(held, openai.ChatCompletionNewParams{Model: "careful", Messages: userMessages("Carefully, what is 2 + 2?")},
			option.WithHeader("Idempotency-Key", job))
		if !st.Next() {
			_ = st.Close() // the socket's slot is not yet given back
			return false
		}
		s = st
		return true
	}, time.Minute, 50*time.Millisecond, "the closed socket's slot is given back")
	defer s.Close()
	e.waitPending(contract.TurnWorkflowID("demo", job))
	sse := refusals[3]
	require.Equal(t, "SSE", sse.door)
	require.NoError(t, sse.try("lim-after-"+testserver.RandomID()), "an open chat completion holds the tenant's stream")
}

// rawCallBody sends a request with a JSON body and returns the answer's
// status and body, whatever its type.
func (e *httpEnv) rawCallBody(method, path, token, body string) (int, []byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.api+path, strings.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	data := make([]byte, 4096)
	n, _ := resp.Body.Read(data)
	return resp.StatusCode, data[:n]
}

// mcpText is the text of a tool's result.
func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
