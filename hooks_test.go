package agentflow_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// hooksScript: the model reads the prompt redacted, and looks the
// customer up by the placeholder, which the tool gets revealed.
const hooksScript = `
rules:
  - name: lookup
    when: {user: '(?i)^my email is (\[EMAIL_\d+\])'}
    reply: {tool_calls: [{name: lookup, arguments: '{"email": "$1"}'}]}
  - name: answer
    when: {tool: '(?s)plan gold'}
    reply: {text: 'You are on the gold plan.'}
  - name: other
    reply: {text: 'Hello.'}
`

const hooksCatalog = `
tenant: demo
default_agent: clerk
pii: {mode: placeholder, reveal: [lookup]}
tools:
  - name: lookup
    kind: lookup
agents:
  - id: clerk
    model: openai:gpt-4o-mini
    tools: [lookup]
    limits: {max_iterations: 4}
`

// seen is what a worker's hook was shown, callback by callback.
type seen struct {
	mu     sync.Mutex
	texts  []string // everything, as JSON
	starts []agentflow.TurnBegin
	events map[string][]agent.Event // by job
}

func (s *seen) add(what string, v any) {
	raw, _ := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts = append(s.texts, what+" "+string(raw))
}

// hook records every callback of a worker's hook; it refuses a turn
// whose prompt says "refuse me".
func (s *seen) hook() agentflow.Hook {
	return agentflow.Hook{
		Name: "recorder",
		TurnStart: func(_ context.Context, b *agentflow.TurnBegin) error {
			s.add("TurnStart", b)
			s.mu.Lock()
			s.starts = append(s.starts, *b)
			s.mu.Unlock()
			if strings.Contains(b.Prompt.Content, "refuse me") {
				return agentflow.Refuse("not this one")
			}
			return nil
		},
		ModelStart: func(ctx context.Context, c *agentflow.ModelCall) (context.Context, error) {
			s.add("ModelStart", c)
			return ctx, nil
		},
		ModelEnd: func(_ context.Context, _ *agentflow.ModelCall, r *agentflow.ModelReply) { s.add("ModelEnd", r) },
		ToolStart: func(ctx context.Context, c *agentflow.ToolCall) (context.Context, error) {
			s.add("ToolStart", c)
			return ctx, nil
		},
		ToolEnd:  func(_ context.Context, _ *agentflow.ToolCall, r *agentflow.ToolResult) { s.add("ToolEnd", r) },
		ToolRead: func(_ context.Context, _ *agentflow.ToolCall, r *agentflow.ToolResult) { s.add("ToolRead", r) },
		Event: func(_ context.Context, e *agentflow.TurnEvent) {
			s.add("Event", e)
			s.mu.Lock()
			s.events[e.JobID] = append(s.events[e.JobID], e.Event)
			s.mu.Unlock()
		},
		TurnEnd: func(_ context.Context, t *agentflow.Turn) { s.add("TurnEnd", t) },
	}
}

// TestHooksAroundTurn: a worker's hook sees each turn start once, with
// who asks, and the turn's events in order, as its log holds them; it
// may refuse a turn; and no callback ever sees a value the tenant's PII
// redaction holds back, while the tool the tenant lets see it gets it.
func TestHooksAroundTurn(t *testing.T) {
	const email, phone = "ana.lopez@example.com", "+1 415 555 0134"
	var mu sync.Mutex
	var got []string
	lookup := agentflow.Func("lookup", "Look a customer up by email.", func(_ context.Context, in struct {
		Email string `json:"email"`
	}) (string, error) {
		mu.Lock()
		got = append(got, in.Email)
		mu.Unlock()
		return "customer " + in.Email + ", phone " + phone + ", plan gold", nil
	}, agentflow.ReadOnly())
	s := &seen{events: map[string][]agent.Event{}}
	srv := testserver.Start(t, testserver.Options{Script: hooksScript, Catalogs: []string{hooksCatalog},
		ToolKinds: []agentflow.Tool{lookup}, Hooks: []agentflow.Hook{s.hook()},
		Tokens: map[string]string{"tok-ana": "demo:user:ana"}, VaultKey: []byte("0123456789abcdef0123456789abcdef")})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-ana")

	res, err := pb.NewAgentServiceClient(srv.Conn).Invoke(gctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{
		Prompt: "My email is " + email + " and my phone " + phone + ": which plan am I on?"}})
	require.NoError(t, err)
	require.Equal(t, "You are on the gold plan.", res.GetOutput())
	mu.Lock()
	require.Equal(t, []string{email}, got, "the tool the tenant allows gets the real address")
	mu.Unlock()
	job := res.GetJobId()

	s.mu.Lock()
	require.Len(t, s.starts, 1, "one start per turn")
	start := s.starts[0]
	require.Equal(t, job, start.JobID)
	require.Equal(t, "clerk", start.AgentID)
	require.Equal(t, 1, start.AgentVersion)
	require.NotNil(t, start.Caller)
	require.Equal(t, "ana", start.Caller.Name)
	require.Contains(t, start.Prompt.Content, "[EMAIL_1]", "the prompt as the turn records it")

	page, err := turnclient.Events(ctx, srv.Client(), contract.TurnWorkflowID("demo", job), agent.EventsQuery{})
	require.NoError(t, err)
	require.NotEmpty(t, page.Events)
	require.Equal(t, page.Events, s.events[job], "each event of the log, once, in order")
	// The turn that hands its log to Event hooks (ObserveEvents) replays.
	testserver.Replay(t, testserver.History(ctx, t, srv.Client(), contract.TurnWorkflowID("demo", job), ""),
		filepath.Join("workflows", "testdata"), "turn_observe_events")

	kinds := map[string]bool{}
	for _, text := range s.texts {
		kinds[strings.Fields(text)[0]] = true
		for _, v := range []string{email, phone} {
			require.NotContains(t, text, v, "a hook was shown %q", v)
		}
	}
	require.True(t, slicesContain(s.texts, "ToolStart", "[EMAIL_1]"), "a tool call's arguments as the model wrote them")
	for _, k := range []string{"TurnStart", "ModelStart", "ModelEnd", "ToolStart", "ToolEnd", "ToolRead", "Event", "TurnEnd"} {
		require.True(t, kinds[k], "%s ran", k)
	}
	s.mu.Unlock()

	// A start that refuses: the turn is rejected with the reason, and
	// nothing of it runs.
	before := len(srv.Model.Requests())
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", Prompt: "please refuse me", JobID: "refused-" + testserver.RandomID()}
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	refused, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusRejected, refused.Status)
	require.Equal(t, agent.ErrTypeGuardrailTripped, refused.Error.Type)
	require.Contains(t, refused.Error.Message, "not this one")
	require.Len(t, srv.Model.Requests(), before, "no model call was made")
}

// slicesContain reports whether a text of the callback holds sub.
func slicesContain(texts []string, callback, sub string) bool {
	for _, text := range texts {
		if strings.HasPrefix(text, callback+" ") && strings.Contains(text, sub) {
			return true
		}
	}
	return false
}
