package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const mcpServerScript = `
pacing: {chunk_words: 1, delay_ms: 100}
rules:
  - name: twice-again
    when: {user: '(?i)^twice carefully: (?P<a>[-0-9.+*/^() ]+) then (?P<b>[-0-9.+*/^() ]+)$', tool: '^6$'}
    reply: {tool_calls: [{name: careful_calculator, id: call_0, arguments: '{"expression": "${b}"}'}]}
  - name: twice
    when: {user: '(?i)^twice carefully: (?P<a>[-0-9.+*/^() ]+) then (?P<b>[-0-9.+*/^() ]+)$'}
    reply: {tool_calls: [{name: careful_calculator, id: call_0, arguments: '{"expression": "${a}"}'}]}
  - name: careful
    when: {user: '(?i)^carefully: ([-0-9.+*/^() ]+)$'}
    reply: {tool_calls: [{name: careful_calculator, arguments: '{"expression": "$1"}'}]}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - name: weather
    when: {user: 'weather'}
    reply: {text: '{"temp_c": 21, "sky": "clear"}'}
  - name: slowest
    when: {user: 'very slowly'}
    reply: {text: 'one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten one two three four five six seven eight nine ten'}
  - name: slow
    when: {user: 'slowly'}
    reply: {text: 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen'}
`

const mcpServerCatalog = `
tenant: demo
tools:
  - name: calculator
    kind: calculator
  - name: careful_calculator
    kind: calculator
    approval: always
agents:
  - id: careful
    model: openai:gpt-4o-mini
    tools: [careful_calculator]
    expose: [mcp]
  - id: calc
    description: Does arithmetic with a calculator.
    model: openai:gpt-4o-mini
    tools: [calculator]
    expose: [mcp]
  - id: weather
    model: openai:gpt-4o-mini
    output_schema: {type: object, properties: {temp_c: {type: number}, sky: {type: string}}, required: [temp_c]}
    expose: [mcp, a2a]
  - id: hidden
    model: openai:gpt-4o-mini
`

const mcpServerOtherCatalog = `
tenant: other
agents:
  - id: theirs
    model: openai:gpt-4o-mini
    expose: [mcp]
`

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// sessionMCP is the protocol version of the clients of these tests: the
// last with sessions, resumable streams and elicitation during a call
// (2026-07-28's stateless requests and Tasks are tested in
// internal/gateway/mcp and internal/e2e).
var sessionMCP = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// mcpConnect opens a session of the MCP Go SDK's client with token.
func mcpConnect(ctx context.Context, t *testing.T, srv *testserver.Server, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentflow-test", Version: "1"}, opts)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://" + srv.HTTPAPIAddr() + mcpdoor.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}},
	}, sessionMCP)
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// TestMCPServer: an MCP client (the official Go SDK's) lists a tenant's
// exposed agents as tools and calls them: each call is a durable turn,
// answered with its text and, for an agent with an output schema, its
// JSON as structured content, with progress notifications while it runs.
// Agents not exposed, other tenants' agents and malformed arguments are
// refused with the protocol's errors, and a request without a token never
// reaches the server.
func TestMCPServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script: mcpServerScript, Catalogs: []string{mcpServerCatalog, mcpServerOtherCatalog},
		Tokens:  map[string]string{"tok": "demo", "tok2": "other", "approver": "demo:approver:ops"},
		HTTPAPI: true,
		Logger:  zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})

	var mu sync.Mutex
	var progress []string
	session := mcpConnect(ctx, t, srv, "tok", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Message)
		},
	})

	tools, err := session.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	require.Equal(t, []string{"calc", "careful", "weather"}, names, "exposed agents only, the other tenant's not")
	require.Equal(t, "Does arithmetic with a calculator.", tools.Tools[0].Description)
	schema, err := json.Marshal(tools.Tools[0].InputSchema)
	require.NoError(t, err)
	require.Contains(t, string(schema), `"prompt"`)
	require.Nil(t, tools.Tools[0].OutputSchema)
	require.NotNil(t, tools.Tools[2].OutputSchema, "the agent's output schema")

	// ListAgents says what each agent is exposed through.
	listed, err := pb.NewAgentServiceClient(srv.Conn).ListAgents(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok"), &pb.ListAgentsRequest{})
	require.NoError(t, err)
	exposed := map[string][]string{}
	for _, a := range listed.GetAgents() {
		exposed[a.GetId()] = a.GetExpose()
	}
	require.Equal(t, map[string][]string{"calc": {"mcp"}, "careful": {"mcp"}, "weather": {"mcp", "a2a"}, "hidden": nil}, exposed)

	params := &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{"prompt": "What is 12.5 * 4?"}}
	params.SetProgressToken("p1")
	res, err := session.CallTool(ctx, params)
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Len(t, res.Content, 1)
	require.Equal(t, "The result is 50.", res.Content[0].(*mcp.TextContent).Text)
	streamID, _ := res.Meta["agentflow/stream_id"].(string)
	require.True(t, strings.HasPrefix(streamID, "turn/demo/"), "the turn's stream id: %q", streamID)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(progress, "\n"), "calling the tool calculator")
	}, 10*time.Second, 10*time.Millisecond, "no progress named the calculator while the turn ran")

	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "weather", Arguments: map[string]any{"prompt": "the weather?"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	structured, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.JSONEq(t, `{"temp_c": 21, "sky": "clear"}`, string(structured))

	for _, tc := range []struct {
		name string
		call *mcp.CallToolParams
		want string
	}{
		{"an agent not exposed", &mcp.CallToolParams{Name: "hidden", Arguments: map[string]any{"prompt": "hi"}}, `unknown tool "hidden"`},
		{"another tenant's agent", &mcp.CallToolParams{Name: "theirs", Arguments: map[string]any{"prompt": "hi"}}, `unknown tool "theirs"`},
		{"no prompt", &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{}}, "arguments.prompt is required"},
		{"a prompt that is not text", &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{"prompt": 3}}, `want {"prompt": "…"}`},
		{"an unknown argument", &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{"prompt": "hi", "agent": "hidden"}}, `unknown field "agent"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := session.CallTool(ctx, tc.call)
			require.ErrorContains(t, err, tc.want)
		})
	}

	other := mcpConnect(ctx, t, srv, "tok2", nil)
	tools, err = other.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 1)
	require.Equal(t, "theirs", tools.Tools[0].Name)

	// What the tenant stored is a resource of its sessions, by ref; not of
	// another tenant's.
	upload, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.HTTPAPIAddr()+"/v1/files?name=n.txt", strings.NewReader("a note"))
	require.NoError(t, err)
	upload.Header.Set("Authorization", "Bearer tok")
	upload.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(upload)
	require.NoError(t, err)
	var file struct {
		Ref string `json:"ref"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&file))
	_ = resp.Body.Close()
	templates, err := session.ListResourceTemplates(ctx, nil)
	require.NoError(t, err)
	require.Len(t, templates.ResourceTemplates, 1)
	require.Equal(t, "cas://sha256:{digest}", templates.ResourceTemplates[0].URITemplate)
	read, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: file.Ref})
	require.NoError(t, err)
	require.Equal(t, "a note", read.Contents[0].Text)
	require.Equal(t, "text/plain", read.Contents[0].MIMEType)
	_, err = other.ReadResource(ctx, &mcp.ReadResourceParams{URI: file.Ref})
	require.ErrorContains(t, err, "not found", "another tenant's blob")
	_, err = session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "cas://sha256:" + strings.Repeat("0", 64)})
	require.ErrorContains(t, err, "not found")
	// A file too large to answer whole is named, with where to stream it
	// from.
	big, err := srv.Store().WriteTenantBlob(ctx, "demo", bytes.NewReader(make([]byte, 17<<20)), "application/zip", 0)
	require.NoError(t, err)
	_, err = session.ReadResource(ctx, &mcp.ReadResourceParams{URI: big.Ref})
	require.ErrorContains(t, err, "more than a resource read answers")
	require.ErrorContains(t, err, "download it with GET /v1/files/"+url.PathEscape(big.Ref))

	for token, want := range map[string]int{"": http.StatusUnauthorized, "nope": http.StatusUnauthorized, "approver": http.StatusForbidden} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.HTTPAPIAddr()+mcpdoor.MCPPath,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, "token %q", token)
	}
}

// TestMCPCancel: a client that cancels its call cancels the turn.
func TestMCPCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script: mcpServerScript, Catalogs: []string{mcpServerCatalog},
		Tokens: map[string]string{"tok": "demo"}, HTTPAPI: true,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	previewed := make(chan struct{}, 1)
	session := mcpConnect(ctx, t, srv, "tok", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if strings.Contains(req.Params.Message, "one") {
				select {
				case previewed <- struct{}{}:
				default:
				}
			}
		},
	})
	callCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		// Six hundred words, 100 ms apart: the cancellation comes long
		// before the answer's end, however busy the machine.
		params := &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{"prompt": "say it very slowly"}}
		params.SetProgressToken("p")
		_, err := session.CallTool(callCtx, params)
		done <- err
	}()
	select {
	case <-previewed:
	case <-ctx.Done():
		t.Fatal("no preview of the answer")
	}
	stop()
	require.Error(t, <-done)

	// The turn ends canceled, its run closed.
	var status enumspb.WorkflowExecutionStatus
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		it, err := srv.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: "AgentflowAgent = 'calc' AND TaskQueue = '" + srv.TaskQueue + "'"})
		if err == nil && len(it.GetExecutions()) > 0 {
			if status = it.GetExecutions()[0].GetStatus(); status == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
				break
			}
		}
	}
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, status, "the turn's run, 30 s after the client cancelled its call")
}

// TestMCPApproval: a call whose turn waits for approval asks the client,
// when it can be asked and its token may approve, and the answer decides
// the call as the token's holder; a client that cannot be asked is told
// to wait, and an approver's decision over the approvals API ends the
// wait.
func TestMCPApproval(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script: mcpServerScript, Catalogs: []string{mcpServerCatalog},
		Tokens:  map[string]string{"tok": "demo", "alice": "demo:user+approver:alice", "ops": "demo:approver:ops"},
		HTTPAPI: true,
		Logger:  zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})

	t.Run("asked of the client", func(t *testing.T) {
		var asked []string
		session := mcpConnect(ctx, t, srv, "alice", &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = append(asked, req.Params.Message)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true, "reason": "fine"}}, nil
			},
		})
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "careful", Arguments: map[string]any{"prompt": "carefully: 6 * 7"}})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		require.Equal(t, "The result is 42.", res.Content[0].(*mcp.TextContent).Text)
		require.Len(t, asked, 1)
		require.Contains(t, asked[0], "careful_calculator")
		job := strings.TrimPrefix(res.Meta["agentflow/stream_id"].(string), "turn/demo/")
		approvals, err := srv.Store().Approvals(ctx, "demo", job)
		require.NoError(t, err)
		require.Len(t, approvals, 1)
		require.Equal(t, "alice", approvals[0].Approver, "decided as the token's holder")
	})

	t.Run("an approver decides", func(t *testing.T) {
		waiting := make(chan string, 1)
		session := mcpConnect(ctx, t, srv, "tok", &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				if i := strings.Index(req.Params.Message, "stream turn/"); i >= 0 {
					select {
					case waiting <- strings.TrimSuffix(req.Params.Message[i+len("stream "):], ")"):
					default:
					}
				}
			},
		})
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			params := &mcp.CallToolParams{Name: "careful", Arguments: map[string]any{"prompt": "carefully: 2 + 3"}}
			params.SetProgressToken("p")
			res, err := session.CallTool(ctx, params)
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		var streamID string
		select {
		case streamID = <-waiting:
		case <-ctx.Done():
			t.Fatal("no progress notification of the wait")
		}
		pending := approveFirst(ctx, t, srv, streamID, "ops")
		require.Equal(t, "careful_calculator", pending)
		res := <-done
		require.NotNil(t, res)
		require.Equal(t, "The result is 5.", res.Content[0].(*mcp.TextContent).Text)
	})
}

// TestMCPLateApprovalDecidesNoOtherCall: the client is asked about a
// call (call_0 of the first step) and answers late, after an approver has
// decided the call over the approvals API and the turn's next step waits
// on another call with the same id. The late answer is bound to the call
// it was asked about: it decides nothing, and the next call waits until
// the client's answer about it.
func TestMCPLateApprovalDecidesNoOtherCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	core, logs := observer.New(zap.InfoLevel)
	srv := testserver.Start(t, testserver.Options{
		Script: mcpServerScript, Catalogs: []string{mcpServerCatalog},
		Tokens:  map[string]string{"alice": "demo:user+approver:alice", "ops": "demo:approver:ops"},
		HTTPAPI: true, Logger: zap.New(core),
	})
	first, second := make(chan struct{}), make(chan struct{})
	asked := make(chan string, 2)
	session := mcpConnect(ctx, t, srv, "alice", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params.Message
			answer, approved, reason := second, false, "not that one"
			if strings.Contains(req.Params.Message, "2 * 3") {
				answer, approved, reason = first, true, "fine" // late: the call is decided meanwhile
			}
			select {
			case <-answer:
			case <-ctx.Done(): // the test has ended
				return nil, ctx.Err()
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": approved, "reason": reason}}, nil
		},
	})
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "careful", Arguments: map[string]any{"prompt": "twice carefully: 2 * 3 then 4 * 5"}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case m := <-asked:
		require.Contains(t, m, "2 * 3")
	case <-ctx.Done():
		t.Fatal("the client was not asked")
	}
	var streamID string
	require.Eventually(t, func() bool {
		resp, err := srv.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`AgentflowAgent = "careful" AND TaskQueue = %q AND ExecutionStatus = "Running"`, srv.TaskQueue)})
		if err != nil || len(resp.GetExecutions()) != 1 {
			return false
		}
		streamID = resp.GetExecutions()[0].GetExecution().GetWorkflowId()
		return true
	}, time.Minute, 100*time.Millisecond)

	// An approver decides the call the client was asked about.
	pending := func() []*pb.PendingApproval {
		resp, err := pb.NewAgentServiceClient(srv.Conn).ListPendingApprovals(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer ops"),
			&pb.ListPendingApprovalsRequest{StreamId: streamID})
		require.NoError(t, err)
		return resp.GetApprovals()
	}
	var one []*pb.PendingApproval
	require.Eventually(t, func() bool { one = pending(); return len(one) == 1 }, time.Minute, 50*time.Millisecond)
	_, err := pb.NewAgentServiceClient(srv.Conn).Approve(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer ops"),
		&pb.ApproveRequest{StreamId: streamID, CallId: one[0].GetCallId(), ApprovalId: one[0].GetApprovalId(), Approved: proto.Bool(true)})
	require.NoError(t, err)
	var two []*pb.PendingApproval
	require.Eventually(t, func() bool {
		two = pending()
		return len(two) == 1 && two[0].GetApprovalId() != one[0].GetApprovalId()
	}, time.Minute, 50*time.Millisecond, "the next step waits")
	require.Equal(t, "call_0", two[0].GetCallId())

	// The client's late answer about the first call decides nothing.
	close(first)
	require.Eventually(t, func() bool {
		return logs.FilterMessage("mcp approval not taken").FilterField(zap.String("stream_id", streamID)).Len() == 1
	}, time.Minute, 50*time.Millisecond)
	refusal := logs.FilterMessage("mcp approval not taken").All()[0].ContextMap()["error"]
	require.Contains(t, fmt.Sprint(refusal), "(approval "+one[0].GetApprovalId()+") was already decided")
	still := pending()
	require.Len(t, still, 1)
	require.True(t, proto.Equal(two[0], still[0]), "the next call still waits")
	select {
	case m := <-asked:
		require.Contains(t, m, "4 * 5", "asked about the next call")
	case <-ctx.Done():
		t.Fatal("the client was not asked about the next call")
	}
	close(second)
	res := <-done
	require.NotNil(t, res)
	require.Equal(t, "The result is error: the call was rejected by alice and not run: not that one.", res.Content[0].(*mcp.TextContent).Text)
	recs, err := srv.Store().Approvals(ctx, "demo", strings.TrimPrefix(streamID, "turn/demo/"))
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, r.ApprovalID+" "+r.Outcome+" by "+r.Approver)
	}
	require.Equal(t, []string{one[0].GetApprovalId() + " approved by ops", two[0].GetApprovalId() + " rejected by alice"}, got)
}

// approveFirst approves the first call that waits in the stream over the
// HTTP approvals API with token, and returns its tool's name.
func approveFirst(ctx context.Context, t *testing.T, srv *testserver.Server, streamID, token string) string {
	t.Helper()
	api := "http://" + srv.HTTPAPIAddr()
	type waiting struct {
		CallID     string `json:"call_id"`
		ApprovalID string `json:"approval_id"`
		Tool       string `json:"tool"`
	}
	get := func() (calls []waiting) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/"+streamID+"/approvals", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body struct {
			Approvals []waiting `json:"approvals"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return body.Approvals
	}
	var calls []waiting
	require.Eventually(t, func() bool { calls = get(); return len(calls) > 0 }, 30*time.Second, 50*time.Millisecond)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/"+streamID+"/approvals/"+calls[0].CallID,
		strings.NewReader(`{"approval_id": "`+calls[0].ApprovalID+`", "approved": true, "reason": "ok"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return calls[0].Tool
}

// TestMCPResumes: a client whose connection drops while its call runs
// reconnects with Last-Event-ID and gets the rest of the call's stream,
// its result once; the turn goes on meanwhile.
func TestMCPResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script: mcpServerScript, Catalogs: []string{mcpServerCatalog},
		Tokens: map[string]string{"tok": "demo"}, HTTPAPI: true,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	p := newProxy(t, srv.HTTPAPIAddr())
	var once sync.Once
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "agentflow-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
			if strings.Contains(req.Params.Message, "one two") {
				once.Do(p.cut) // mid-answer
			}
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://" + p.ln.Addr().String() + mcpdoor.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{token: "tok", base: http.DefaultTransport}},
	}, sessionMCP)
	require.NoError(t, err)
	defer session.Close()
	params := &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{"prompt": "say it slowly"}}
	params.SetProgressToken("p")
	res, err := session.CallTool(ctx, params)
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen", res.Content[0].(*mcp.TextContent).Text)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, progress)
	cut := false
	for _, m := range progress {
		cut = cut || strings.Contains(m, "one two")
	}
	require.True(t, cut, "the connection was cut mid-answer: %v", progress)
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NotEmpty(t, p.conns, "the client came back on a new connection")
}

// TestMCPResumesOnAnotherGateway: a gateway is gone while a call's turn
// runs; the client reconnects, with Last-Event-ID, to another gateway of
// the same deployment (the same database, Temporal and task queue), which
// sends the rest of the call's progress and its result, once.
func TestMCPResumesOnAnotherGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := devtest.Database(t)
	opts := testserver.Options{
		Script: mcpServerScript, Catalogs: []string{mcpServerCatalog}, DatabaseURL: dbURL,
		Tokens: map[string]string{"tok": "demo"}, HTTPAPI: true,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	}
	first := testserver.Start(t, opts)
	opts.Script, opts.Catalogs, opts.SharedModel, opts.TaskQueue = "", nil, first.Model, first.TaskQueue
	second := testserver.Start(t, opts)

	p := newProxy(t, first.HTTPAPIAddr())
	var once sync.Once
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "agentflow-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
			if strings.Contains(req.Params.Message, "one two") {
				once.Do(func() {
					// The first gateway is gone: every connection to it
					// cut, and the next ones reach the second.
					p.mu.Lock()
					p.backend = second.HTTPAPIAddr()
					p.mu.Unlock()
					p.cut()
				})
			}
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://" + p.ln.Addr().String() + mcpdoor.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{token: "tok", base: http.DefaultTransport}},
	}, sessionMCP)
	require.NoError(t, err)
	params := &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{"prompt": "say it slowly"}}
	params.SetProgressToken("p")
	res, err := session.CallTool(ctx, params)
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen", res.Content[0].(*mcp.TextContent).Text)
	mu.Lock()
	defer mu.Unlock()
	i := slices.IndexFunc(progress, func(m string) bool { return strings.Contains(m, "one two") })
	require.GreaterOrEqual(t, i, 0, "the connection was cut mid-answer: %v", progress)
	for _, m := range progress[i+1:] {
		require.NotEqual(t, progress[i], m, "no notification twice")
	}
}

// TestMCPResumeFinishesFromTheLog: a gateway that did not start a call —
// the one that did is gone with its session — resumes the call's stream
// from what was stored of it, then sends the rest of the turn's progress
// and the call's result from the turn's event log, once; a resume after
// the result has nothing more to send.
func TestMCPResumeFinishesFromTheLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script: mcpServerScript, Catalogs: []string{mcpServerCatalog},
		Tokens: map[string]string{"tok": "demo:user:alice", "bob": "demo:user:bob"}, HTTPAPI: true,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	job := "mcp-resume-" + testserver.RandomID()
	_, err := pb.NewAgentServiceClient(srv.Conn).Start(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok"),
		&pb.StartRequest{Turn: &pb.TurnRequest{AgentId: "calc", Prompt: "What is 12.5 * 4?", JobId: job}})
	require.NoError(t, err)
	// What the gone gateway had stored of the call's stream: its priming
	// event, nothing else.
	session, stream := "s-"+testserver.RandomID(), "ST"+testserver.RandomID()
	alice, err := gateway.ParseToken("tok", "demo:user:alice")
	require.NoError(t, err)
	require.NoError(t, srv.Store().MCPOpen(ctx, store.MCPStream{SessionID: session, StreamID: stream, TenantID: "demo", UserID: alice.Principal(),
		RequestID: json.RawMessage(`7`), ProgressToken: json.RawMessage(`"p"`), JobID: job}))
	require.NoError(t, srv.Store().MCPAppend(ctx, session, stream, nil))

	resume := func(token, last string) (int, []map[string]any, []string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.HTTPAPIAddr()+mcpdoor.MCPPath, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Last-Event-ID", last)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var msgs []map[string]any
		var ids []string
		for _, line := range strings.Split(string(body), "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				ids = append(ids, id)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(data), &m), data)
				msgs = append(msgs, m)
			}
		}
		return resp.StatusCode, msgs, ids
	}
	status, _, _ := resume("bob", stream+"_0")
	require.Equal(t, http.StatusForbidden, status, "another user's session")

	status, msgs, ids := resume("tok", stream+"_0")
	require.Equal(t, http.StatusOK, status)
	require.NotEmpty(t, msgs)
	answer := msgs[len(msgs)-1]
	require.Equal(t, float64(7), answer["id"], "the call's own id")
	text := answer["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
	require.Equal(t, "The result is 50.", text)
	var progress []string
	for _, m := range msgs[:len(msgs)-1] {
		require.Equal(t, "notifications/progress", m["method"])
		params := m["params"].(map[string]any)
		require.Equal(t, "p", params["progressToken"])
		progress = append(progress, params["message"].(string))
	}
	require.Contains(t, progress, "calling the tool calculator")
	for i, id := range ids {
		require.Equal(t, fmt.Sprintf("%s_%d", stream, i+1), id, "event ids go on from the stream's")
	}

	status, msgs, _ = resume("tok", ids[len(ids)-1])
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, msgs, "answered already: nothing more")
	status, msgs, _ = resume("tok", stream+"_0")
	require.Equal(t, http.StatusOK, status)
	require.Len(t, msgs, len(ids), "from the start again: what was sent, the answer once")
}
