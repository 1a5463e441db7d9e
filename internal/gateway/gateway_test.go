package gateway_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

func TestMain(m *testing.M) { devtest.Main(m) }

const script = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: careful
    when: {user: '(?i)^carefully, what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: careful_calculator, arguments: '{"expression": "$1"}'}]}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - name: echo
    reply: {text: 'Hello from the scripted model, streaming word by word.'}
`

var catalogs = []string{`
tenant: demo
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
toolkits:
  - name: math
    tools: [calculator]
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    description: answers arithmetic
    tools: [calculator]
  - id: writer
    model: openai:gpt-4o-mini
    tools: [math]
  - id: limited
    model: openai:gpt-4o-mini
    limits: {turns_per_minute: 1}
`, `
tenant: other
default_agent: secret
agents:
  - id: secret
    model: openai:gpt-4o-mini
`}

type fixture struct {
	client pb.AgentServiceClient
	conn   *grpc.ClientConn
	srv    *testserver.Server
}

func (f fixture) as(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

// start runs the worker and the gateway with both tenants' catalogs.
func start(t *testing.T) fixture {
	t.Helper()
	ts := testserver.Start(t, testserver.Options{
		Script:   script,
		Catalogs: catalogs,
		Tokens:   map[string]string{"tok-demo": "demo:user+approver+admin:ana", "tok-other": "other:user+approver+admin", "tok-user": "demo:user"},
	})
	return fixture{client: pb.NewAgentServiceClient(ts.Conn), conn: ts.Conn, srv: ts}
}

func collect(t *testing.T, s grpc.ServerStreamingClient[pb.StreamEvent]) []agent.Event {
	t.Helper()
	var out []agent.Event
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, gateway.FromPBEvent(ev))
	}
}

func TestInvokeAndStream(t *testing.T) {
	f := start(t)
	ctx := f.as("tok-demo")

	res, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "inv-1", Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.GetStatus())
	require.Equal(t, "The result is 42.", res.GetOutput())
	require.Equal(t, "turn/demo/inv-1", res.GetStreamId())
	require.Equal(t, "calculator", res.GetMetadata().GetToolCalls()[0].GetTool())
	require.Positive(t, res.GetMetadata().GetTokensUsed())

	// The same job again attaches to the stored turn.
	again, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "inv-1", Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	require.Equal(t, res.GetResultRef(), again.GetResultRef())

	got, err := f.client.GetResult(ctx, &pb.GetResultRequest{ResultRef: res.GetResultRef()})
	require.NoError(t, err)
	require.Equal(t, res.GetOutput(), got.GetOutput())

	s, err := f.client.Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: "str-1", AgentId: "writer", Prompt: "hi"}})
	require.NoError(t, err)
	events := collect(t, s)
	for i, e := range events {
		require.Equal(t, int64(i+1), e.Index)
		require.Equal(t, "turn/demo/str-1", e.StreamID)
	}
	require.True(t, events[len(events)-1].Terminal())
	require.Equal(t, "Hello from the scripted model, streaming word by word.", agent.ReplayText(events))

	// Resume from the middle gives exactly the rest.
	r, err := f.client.Resume(ctx, &pb.ResumeRequest{StreamId: "turn/demo/str-1", AfterIndex: 2})
	require.NoError(t, err)
	rest := collect(t, r)
	require.Equal(t, events[2:], rest)
}

// TestToolkitToolStart: a call of a tool granted by a toolkit says so in
// its tool_start event, through the gRPC stream.
func TestToolkitToolStart(t *testing.T) {
	f := start(t)
	s, err := f.client.Stream(f.as("tok-demo"), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: "kit-1", AgentId: "writer", Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	var starts []*agent.ToolEvent
	for _, e := range collect(t, s) {
		if e.Kind == agent.EventToolStart {
			starts = append(starts, e.Tool)
		}
	}
	require.Len(t, starts, 1)
	require.Equal(t, "calculator", starts[0].Name)
	require.Equal(t, "math", starts[0].FromToolkit)
	require.Equal(t, "calculator", starts[0].Source)
}

func TestBadRequests(t *testing.T) {
	f := start(t)
	demo, other := f.as("tok-demo"), f.as("tok-other")
	res, err := f.client.Invoke(demo, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "mine", Prompt: "hi"}})
	require.NoError(t, err)

	stream := func(ctx context.Context, req *pb.ResumeRequest) error {
		s, err := f.client.Resume(ctx, req)
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	tests := []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"unknown agent", func() error {
			_, err := f.client.Invoke(demo, &pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: "nobody", Prompt: "hi"}})
			return err
		}, codes.NotFound, `agent "nobody"`},
		{"empty prompt", func() error {
			_, err := f.client.Invoke(demo, &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "  "}})
			return err
		}, codes.InvalidArgument, "prompt is required"},
		{"bad history", func() error {
			_, err := f.client.Invoke(demo, &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "hi", History: "all"}})
			return err
		}, codes.InvalidArgument, `history "all"`},
		{"another tenant's stream", func() error {
			return stream(other, &pb.ResumeRequest{StreamId: "turn/demo/mine"})
		}, codes.NotFound, `stream "turn/demo/mine" not found`},
		{"another tenant's result", func() error {
			_, err := f.client.GetResult(other, &pb.GetResultRequest{ResultRef: res.GetResultRef()})
			return err
		}, codes.NotFound, "not found"},
		{"after_index beyond the end", func() error {
			return stream(demo, &pb.ResumeRequest{StreamId: "turn/demo/mine", AfterIndex: 1000})
		}, codes.InvalidArgument, "beyond the end of the stream"},
		{"unknown stream", func() error {
			return stream(demo, &pb.ResumeRequest{StreamId: "turn/demo/none"})
		}, codes.NotFound, "not found"},
		{"malformed stream id", func() error {
			return stream(demo, &pb.ResumeRequest{StreamId: "job-1"})
		}, codes.InvalidArgument, "want turn/<tenant>/<job_id>"},
		{"missing token", func() error {
			_, err := f.client.Invoke(context.Background(), &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "hi"}})
			return err
		}, codes.Unauthenticated, "missing bearer token"},
		{"wrong token", func() error {
			_, err := f.client.Invoke(f.as("nope"), &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "hi"}})
			return err
		}, codes.Unauthenticated, "unknown token"},
		{"not a bearer token", func() error {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Basic tok-demo")
			_, err := f.client.ListAgents(ctx, &pb.ListAgentsRequest{})
			return err
		}, codes.Unauthenticated, "want \"Bearer <token>\""},
		{"missing token on a stream", func() error {
			return stream(context.Background(), &pb.ResumeRequest{StreamId: "turn/demo/mine"})
		}, codes.Unauthenticated, "missing bearer token"},
		{"approve on another tenant's turn", func() error {
			_, err := f.client.Approve(other, &pb.ApproveRequest{StreamId: "turn/demo/mine", CallId: "c1", Approved: proto.Bool(true)})
			return err
		}, codes.NotFound, "not found"},
		{"message without a session", func() error {
			_, err := f.client.SendMessage(demo, &pb.SendMessageRequest{Prompt: "hi"})
			return err
		}, codes.InvalidArgument, "session_id is required"},
		{"blank message", func() error {
			_, err := f.client.SendMessage(demo, &pb.SendMessageRequest{SessionId: "s1", Prompt: " "})
			return err
		}, codes.InvalidArgument, "prompt is required"},
		{"message numbered past the job id limit", func() error {
			_, err := f.client.SendMessage(demo, &pb.SendMessageRequest{SessionId: strings.Repeat("s", 190), Prompt: "hi"})
			return err
		}, codes.InvalidArgument, "session_id is 190 bytes, too long to number its messages (at most 179): give each message a job_id"},
		{"message to an unknown agent", func() error {
			_, err := f.client.SendMessage(demo, &pb.SendMessageRequest{SessionId: "s1", Prompt: "hi", AgentId: "nobody"})
			return err
		}, codes.NotFound, `agent "nobody"`},
		{"message to a version the agent does not have", func() error {
			_, err := f.client.SendMessage(demo, &pb.SendMessageRequest{SessionId: "s1v", Prompt: "hi", AgentId: "assistant", AgentVersion: 99})
			return err
		}, codes.NotFound, "version 99"},
		{"question answered on another tenant's turn", func() error {
			_, err := f.client.Answer(other, &pb.AnswerRequest{StreamId: "turn/demo/mine", CallId: "c1", Answer: "yes"})
			return err
		}, codes.NotFound, "not found"},
		{"question answered on a turn that ended", func() error {
			_, err := f.client.Answer(demo, &pb.AnswerRequest{StreamId: "turn/demo/mine", CallId: "c1", Answer: "yes"})
			return err
		}, codes.FailedPrecondition, `turn "turn/demo/mine" has ended`},
		{"approve on a turn that ended", func() error {
			_, err := f.client.Approve(demo, &pb.ApproveRequest{StreamId: "turn/demo/mine", CallId: "c1", ApprovalId: "apr_1", Approved: proto.Bool(true)})
			return err
		}, codes.FailedPrecondition, `turn "turn/demo/mine" has ended`},
		{"approve without a call id", func() error {
			_, err := f.client.Approve(demo, &pb.ApproveRequest{StreamId: "turn/demo/mine", ApprovalId: "apr_1", Approved: proto.Bool(true)})
			return err
		}, codes.InvalidArgument, "call_id is required"},
		{"approve without an approval id", func() error {
			_, err := f.client.Approve(demo, &pb.ApproveRequest{StreamId: "turn/demo/mine", CallId: "c1", Approved: proto.Bool(true)})
			return err
		}, codes.InvalidArgument, "approval_id is required"},
		{"approve for the session with a match that is no JSON Pointer", func() error {
			_, err := f.client.Approve(demo, &pb.ApproveRequest{StreamId: "turn/demo/mine", CallId: "c1", ApprovalId: "apr_1", Approved: proto.Bool(true),
				Scope: "session", Match: []*pb.ArgCondition{{Path: "region", Equals: structpb.NewStringValue("eu")}}})
			return err
		}, codes.InvalidArgument, "want a JSON Pointer"},
		{"approve with a match and no equals", func() error {
			_, err := f.client.Approve(demo, &pb.ApproveRequest{StreamId: "turn/demo/mine", CallId: "c1", ApprovalId: "apr_1", Approved: proto.Bool(true),
				Scope: "session", Match: []*pb.ArgCondition{{Path: "/region"}}})
			return err
		}, codes.InvalidArgument, "match[0].equals is required"},
		{"revoke another tenant's grant, or none", func() error {
			_, err := f.client.RevokeGrant(other, &pb.RevokeGrantRequest{GrantId: "grant_nope"})
			return err
		}, codes.NotFound, `grant "grant_nope"`},
		{"list the grants of another tenant's turn", func() error {
			_, err := f.client.ListGrants(other, &pb.ListGrantsRequest{StreamId: "turn/demo/mine"})
			return err
		}, codes.NotFound, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			require.Error(t, err)
			require.Equal(t, tt.code, status.Code(err), "%v", err)
			require.Contains(t, status.Convert(err).Message(), tt.msg)
		})
	}
}

func TestListAgents(t *testing.T) {
	f := start(t)
	list := func(ctx context.Context, req *pb.ListAgentsRequest) []string {
		resp, err := f.client.ListAgents(ctx, req)
		require.NoError(t, err)
		var ids []string
		for _, a := range resp.GetAgents() {
			ids = append(ids, a.GetId())
		}
		return ids
	}
	demo, other := f.as("tok-demo"), f.as("tok-other")
	require.Equal(t, []string{"assistant", "limited", "writer"}, list(demo, &pb.ListAgentsRequest{}))
	require.Equal(t, []string{"assistant", "writer"}, list(demo, &pb.ListAgentsRequest{Tool: "calculator"}))
	require.Equal(t, []string{"writer"}, list(demo, &pb.ListAgentsRequest{AgentId: "writer"}))
	require.Equal(t, []string{"secret"}, list(other, &pb.ListAgentsRequest{}))
	require.Empty(t, list(other, &pb.ListAgentsRequest{AgentId: "assistant"}), "tenants never see each other's agents")

	resp, err := f.client.ListAgents(demo, &pb.ListAgentsRequest{AgentId: "assistant"})
	require.NoError(t, err)
	a := resp.GetAgents()[0]
	require.True(t, a.GetDefault())
	require.Equal(t, "answers arithmetic", a.GetDescription())
	require.Equal(t, int32(agent.DefaultMaxIterations), a.GetLimits().GetMaxIterations())
	require.Equal(t, "calculator", a.GetTools()[0].GetKind())
	require.Equal(t, agent.ApprovalNever, a.GetTools()[0].GetApproval())
	require.Contains(t, a.GetTools()[0].GetParametersJson(), "expression")

	require.Empty(t, a.GetTools()[0].GetFromToolkit(), "listed by name")
	require.Equal(t, "calculator", a.GetTools()[0].GetSource())

	resp, err = f.client.ListAgents(demo, &pb.ListAgentsRequest{AgentId: "writer"})
	require.NoError(t, err)
	require.Equal(t, "math", resp.GetAgents()[0].GetTools()[0].GetFromToolkit(), "granted by toolkit math")

	resp, err = f.client.ListAgents(demo, &pb.ListAgentsRequest{AgentId: "limited"})
	require.NoError(t, err)
	require.Equal(t, int32(1), resp.GetAgents()[0].GetLimits().GetTurnsPerMinute())
}

func TestRateLimitedAgent(t *testing.T) {
	f := start(t)
	ctx := f.as("tok-demo")
	first, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: "limited", Prompt: "hi"}})
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, first.GetStatus())
	second, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: "limited", Prompt: "hi again"}})
	require.NoError(t, err, "a refused turn is a result, not an RPC error")
	require.Equal(t, agent.StatusRejected, second.GetStatus())
	require.Equal(t, agent.ErrTypeRateLimited, second.GetError().GetType())
	require.Contains(t, second.GetError().GetMessage(), "allows 1 turns a minute")
}

func TestHealthAndReflection(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, svc := range []string{"", "agentflow.v1.AgentService"} {
		h, err := healthpb.NewHealthClient(f.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err, "health needs no token")
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus(), "service %q", svc)
	}

	rc, err := reflectionpb.NewServerReflectionClient(f.conn).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, rc.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: ""},
	}))
	resp, err := rc.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	require.Contains(t, names, "agentflow.v1.AgentService")
}

func TestCatalogService(t *testing.T) {
	f := start(t)
	cat := pb.NewCatalogServiceClient(f.conn)
	demo, other := f.as("tok-demo"), f.as("tok-other")

	// Watchers of both tenants, from before the change.
	sctx, cancel := context.WithCancel(demo)
	defer cancel()
	watch, err := cat.StreamCatalog(sctx, &pb.StreamCatalogRequest{})
	require.NoError(t, err)
	snap, err := watch.Recv()
	require.NoError(t, err)
	require.True(t, snap.GetSnapshot())
	require.Len(t, snap.GetAgents(), 3)
	octx, ocancel := context.WithCancel(other)
	defer ocancel()
	otherWatch, err := cat.StreamCatalog(octx, &pb.StreamCatalogRequest{})
	require.NoError(t, err)
	osnap, err := otherWatch.Recv()
	require.NoError(t, err)
	require.Equal(t, "secret", osnap.GetAgents()[0].GetId(), "each tenant sees only its own catalog")

	doc := `
tenant: demo
agents:
  - id: writer
    model: openai:gpt-4o-mini
    system_prompt: Write haiku.
rules:
  - name: poems
    priority: 5
    when: 'message.contains("poem")'
    agent: writer
`
	dry, err := cat.UpsertCatalog(demo, &pb.UpsertCatalogRequest{Files: map[string]string{"writer.yaml": doc}, DryRun: true})
	require.NoError(t, err)
	require.NotEmpty(t, dry.GetChanges())
	rules, err := cat.ListRules(demo, &pb.ListRulesRequest{})
	require.NoError(t, err)
	require.Empty(t, rules.GetRules(), "a dry run changes nothing")

	applied := time.Now()
	resp, err := cat.UpsertCatalog(demo, &pb.UpsertCatalogRequest{Files: map[string]string{"writer.yaml": doc}})
	require.NoError(t, err)
	var actions []string
	for _, c := range resp.GetChanges() {
		actions = append(actions, c.GetKind()+":"+c.GetName()+":"+c.GetAction())
	}
	require.Contains(t, actions, "agent:writer:updated")
	require.Contains(t, actions, "rule:poems:created")

	delta, err := watch.Recv()
	require.NoError(t, err)
	t.Logf("delta %s after the change was applied", time.Since(applied).Round(time.Millisecond))
	require.False(t, delta.GetSnapshot())
	require.Equal(t, resp.GetCatalogVersion(), delta.GetCatalogVersion())
	require.Len(t, delta.GetAgents(), 1)
	require.Equal(t, "writer", delta.GetAgents()[0].GetId())
	require.True(t, delta.GetRulesChanged())
	require.Equal(t, "poems", delta.GetRules()[0].GetName())

	route, err := cat.RouteDryRun(demo, &pb.RouteDryRunRequest{Message: "a poem please"})
	require.NoError(t, err)
	require.Equal(t, "writer", route.GetAgentId())
	require.Equal(t, "poems", route.GetRule())
	route, err = cat.RouteDryRun(demo, &pb.RouteDryRunRequest{Message: "sums"})
	require.NoError(t, err)
	require.Equal(t, "assistant", route.GetAgentId())
	require.Equal(t, "default", route.GetRule())

	// Another tenant's documents, and invalid ones, change nothing.
	_, err = cat.UpsertCatalog(other, &pb.UpsertCatalogRequest{Files: map[string]string{"x.yaml": doc}})
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	_, err = cat.UpsertCatalog(demo, &pb.UpsertCatalogRequest{Files: map[string]string{"bad.yaml": "tenant: demo\nrules:\n  - name: r\n    when: 'nope =='\n    agent: writer\n"}})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "bad.yaml:4: rules[0].when")
	after, err := cat.ListRules(demo, &pb.ListRulesRequest{})
	require.NoError(t, err)
	require.Equal(t, resp.GetCatalogVersion(), after.GetCatalogVersion())

	// The other tenant's watcher saw nothing.
	got := make(chan error, 1)
	go func() { _, err := otherWatch.Recv(); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("tenant other received an event: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
}
