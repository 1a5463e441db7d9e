package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// httpScript: arithmetic through the calculator, or, asked "carefully",
// through the calculator that waits for approval.
const httpScript = `
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
    reply: {text: 'Hello over HTTP.'}
`

var httpCatalogs = []string{`
tenant: demo
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
  - name: careful_calculator
    kind: calculator
    approval: always
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
  - id: careful
    model: openai:gpt-4o-mini
    tools: [careful_calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
`, `
tenant: rival
default_agent: desk
agents:
  - {id: desk, model: openai:gpt-4o-mini}
`}

// httpEnv is a server with the gateway's HTTP API, tokens of each role
// of tenant demo and one of tenant rival with every role. The tokens are
// random, so that a test can look for them where they must not be.
type httpEnv struct {
	*testserver.Server
	t                          *testing.T
	api                        string
	user, approver, admin, all string
	rival                      string
	log                        *lockedBuffer
}

func newHTTPEnv(t *testing.T) *httpEnv { return newHTTPEnvWith(t, nil) }

// newHTTPEnvWith is newHTTPEnv with options of the test's changed by opt.
func newHTTPEnvWith(t *testing.T, opt func(*testserver.Options)) *httpEnv {
	t.Helper()
	e := &httpEnv{t: t}
	for _, tok := range []*string{&e.user, &e.approver, &e.admin, &e.all, &e.rival} {
		*tok = "secret-" + testserver.RandomID() + testserver.RandomID()
	}
	logger, log := keptLog(t, zapcore.WarnLevel)
	e.log = log
	opts := testserver.Options{Script: httpScript, Catalogs: httpCatalogs, HTTPAPI: true, Logger: logger,
		Tokens: map[string]string{
			e.user: "demo:user:uma", e.approver: "demo:approver:ann", e.admin: "demo:admin:ada",
			e.all: "demo:user+approver+admin:al", e.rival: "rival:user+approver+admin:riv",
		}}
	if opt != nil {
		opt(&opts)
	}
	e.Server = testserver.Start(t, opts)
	e.api = "http://" + e.HTTPAPIAddr()
	return e
}

// call sends a request with a token (none when empty) and returns the
// answer's status and body.
func (e *httpEnv) call(method, path, token, body string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.api+path, rd)
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	if resp.StatusCode >= 400 {
		require.Equal(e.t, gateway.ProblemContentType, resp.Header.Get("Content-Type"), "%s", data)
	} else {
		require.Equal(e.t, "application/json", resp.Header.Get("Content-Type"), "%s", data)
	}
	return resp.StatusCode, data
}

// ok sends a request that must succeed, and reads its answer into out.
func (e *httpEnv) ok(method, path, token, body string, out proto.Message) {
	e.t.Helper()
	code, data := e.call(method, path, token, body)
	require.Equal(e.t, http.StatusOK, code, "%s %s: %s", method, path, data)
	require.NoError(e.t, protojson.Unmarshal(data, out), "%s", data)
}

// problem sends a request that must fail with status, and returns its
// problem details.
func (e *httpEnv) problem(method, path, token, body string, status int) gateway.Problem {
	e.t.Helper()
	code, data := e.call(method, path, token, body)
	require.Equal(e.t, status, code, "%s %s: %s", method, path, data)
	var p gateway.Problem
	require.NoError(e.t, json.Unmarshal(data, &p), "%s", data)
	require.Equal(e.t, status, p.Status)
	require.Equal(e.t, gateway.ProblemTypePrefix+p.Title, p.Type)
	return p
}

// grpcAs is a context whose gRPC calls carry token.
func grpcAs(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// events reads a turn's whole log over HTTP, a few events a page.
func (e *httpEnv) events(streamID, token string) []*pb.StreamEvent {
	e.t.Helper()
	var all []*pb.StreamEvent
	after := int64(0)
	require.Eventually(e.t, func() bool {
		var page pb.ListEventsResponse
		e.ok("GET", fmt.Sprintf("/v1/%s/events?after_index=%d&page_size=3", streamID, after), token, "", &page)
		require.LessOrEqual(e.t, len(page.GetEvents()), 3)
		for _, ev := range page.GetEvents() {
			require.Equal(e.t, after+1, ev.GetMeta().GetEventIndex(), "no gap, no repeat")
			after = ev.GetMeta().GetEventIndex()
			all = append(all, ev)
		}
		return page.GetDone()
	}, time.Minute, 20*time.Millisecond)
	return all
}

// requireNotStarted: no turn of job exists, nor a result.
func (e *httpEnv) requireNotStarted(tenant, job string) {
	e.t.Helper()
	_, err := e.Client().DescribeWorkflowExecution(context.Background(), contract.TurnWorkflowID(tenant, job), "")
	var nf *serviceerror.NotFound
	require.True(e.t, errors.As(err, &nf), "no turn %s: %v", job, err)
	var n int
	require.NoError(e.t, e.Store().Pool().QueryRow(context.Background(), `SELECT count(*) FROM agent_results WHERE job_id = $1`, job).Scan(&n))
	require.Zero(e.t, n, "no result of %s", job)
}

// waitPending waits until a turn has a call waiting for approval.
func (e *httpEnv) waitPending(streamID string) *pb.PendingApproval {
	e.t.Helper()
	var list pb.ListPendingApprovalsResponse
	require.Eventually(e.t, func() bool {
		e.ok("GET", "/v1/"+streamID+"/approvals", e.approver, "", &list)
		return len(list.GetApprovals()) == 1
	}, time.Minute, 50*time.Millisecond)
	return list.GetApprovals()[0]
}

// TestHTTPTurnEqualsGRPC: a streamed one-tool turn started over HTTP is
// the turn gRPC sees: Stream (attached by the same request) and Resume
// give the events a page-by-page read over HTTP gives, Invoke and
// GetResult the result HTTP gives.
func TestHTTPTurnEqualsGRPC(t *testing.T) {
	e := newHTTPEnv(t)
	job := "http-" + testserver.RandomID()
	body := `{"job_id": "` + job + `", "prompt": "What is 12.5 * 4?"}`
	var started pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, body, &started)
	require.Equal(t, contract.TurnWorkflowID("demo", job), started.GetStreamId())
	require.Equal(t, job, started.GetJobId())

	overHTTP := e.events(started.GetStreamId(), e.user)
	var evs []agent.Event
	for _, ev := range overHTTP {
		evs = append(evs, gateway.FromPBEvent(ev))
	}
	require.Equal(t, "The result is 50.", agent.ReplayText(evs))
	kinds := map[agent.EventKind]int{}
	for _, ev := range evs {
		kinds[ev.Kind]++
	}
	require.Equal(t, 1, kinds[agent.EventToolStart])
	require.Equal(t, 1, kinds[agent.EventToolEnd])
	require.Greater(t, kinds[agent.EventToken], 1, "streamed")

	ctx, cancel := context.WithTimeout(grpcAs(context.Background(), e.user), 2*time.Minute)
	defer cancel()
	agents := pb.NewAgentServiceClient(e.Conn)
	stream, err := agents.Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 12.5 * 4?"}})
	require.NoError(t, err)
	requireSameEvents(t, overHTTP, readAll(t, stream))
	resume, err := agents.Resume(ctx, &pb.ResumeRequest{StreamId: started.GetStreamId()})
	require.NoError(t, err)
	requireSameEvents(t, overHTTP, readAll(t, resume))

	var res pb.TurnResult
	e.ok("POST", "/v1/turns:invoke", e.user, body, &res)
	require.Equal(t, agent.StatusCompleted, res.GetStatus())
	require.Equal(t, "The result is 50.", res.GetOutput())
	viaGRPC, err := agents.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 12.5 * 4?"}})
	require.NoError(t, err)
	require.True(t, proto.Equal(viaGRPC, &res), "gRPC %v\nHTTP %v", viaGRPC, &res)

	var stored pb.TurnResult
	e.ok("GET", "/v1/results?result_ref="+url.QueryEscape(res.GetResultRef()), e.user, "", &stored)
	storedGRPC, err := agents.GetResult(ctx, &pb.GetResultRequest{ResultRef: res.GetResultRef()})
	require.NoError(t, err)
	require.True(t, proto.Equal(storedGRPC, &stored), "gRPC %v\nHTTP %v", storedGRPC, &stored)

	// Seed 004's manual test endpoint: a prompt in, the result out.
	var chat pb.TurnResult
	e.ok("POST", "/test/chat", e.user, `{"prompt": "What is 6 * 7?"}`, &chat)
	require.Equal(t, agent.StatusCompleted, chat.GetStatus())
	require.Equal(t, "The result is 42.", chat.GetOutput())
	require.Len(t, chat.GetMetadata().GetToolCalls(), 1)

	// Paging from the middle, by a percent-encoded stream id.
	var page pb.ListEventsResponse
	e.ok("GET", "/v1/"+url.PathEscape(started.GetStreamId())+"/events?after_index=2", e.user, "", &page)
	requireSameEvents(t, overHTTP[2:], page.GetEvents())
	require.True(t, page.GetDone())
	require.Equal(t, int64(len(overHTTP)+1), page.GetNextIndex())
}

func readAll(t *testing.T, s grpc.ServerStreamingClient[pb.StreamEvent]) []*pb.StreamEvent {
	t.Helper()
	var out []*pb.StreamEvent
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, ev)
	}
}

func requireSameEvents(t *testing.T, want, got []*pb.StreamEvent) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, proto.Equal(want[i], got[i]), "event %d:\nwant %v\ngot  %v", i+1, want[i], got[i])
	}
}

// TestHTTPApproval: a call waiting for approval is listed over HTTP; a
// user token may not decide it; an approver's decision over HTTP releases
// it, under the token's name.
func TestHTTPApproval(t *testing.T) {
	e := newHTTPEnv(t)
	job := "careful-" + testserver.RandomID()
	var started pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, `{"job_id": "`+job+`", "agent_id": "careful", "prompt": "Carefully, what is 6 * 7?"}`, &started)
	pending := e.waitPending(started.GetStreamId())
	require.Equal(t, "careful_calculator", pending.GetTool())
	require.JSONEq(t, `{"expression": "6 * 7"}`, pending.GetArgsJson())

	approve := "/v1/" + started.GetStreamId() + "/approvals/" + url.PathEscape(pending.GetCallId())
	p := e.problem("POST", approve, e.user, `{"approved": true}`, http.StatusForbidden)
	require.Equal(t, agent.ErrTypePermissionDenied, p.Title)
	require.Contains(t, p.Detail, "needs the role approver")
	p = e.problem("POST", approve, e.approver, `{"reason": "no decision"}`, http.StatusBadRequest)
	require.Contains(t, p.Detail, "approved is required")
	p = e.problem("POST", approve, e.approver, `{"approved": true}`, http.StatusBadRequest)
	require.Contains(t, p.Detail, "approval_id is required")

	var ack pb.ApproveResponse
	bound := `"approval_id": "` + pending.GetApprovalId() + `"`
	e.ok("POST", approve, e.approver, `{`+bound+`, "approved": true, "reason": "fine", "approver": "mallory"}`, &ack)
	require.Equal(t, "approved", ack.GetOutcome())
	require.Equal(t, pending.GetApprovalId(), ack.GetApprovalId())
	p = e.problem("POST", approve, e.approver, `{`+bound+`, "approved": false}`, http.StatusConflict)
	require.Equal(t, agent.ErrTypeConflict, p.Title)

	evs := e.events(started.GetStreamId(), e.user)
	require.Equal(t, "The result is 42.", agent.ReplayText(fromPB(evs)))
	recs, err := e.Store().Approvals(context.Background(), "demo", job)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "ann", recs[0].Approver, "the token's name, not the body's")
}

func fromPB(evs []*pb.StreamEvent) []agent.Event {
	out := make([]agent.Event, len(evs))
	for i, ev := range evs {
		out[i] = gateway.FromPBEvent(ev)
	}
	return out
}

// TestHTTPRoles: every route with a token of each role answers as
// methodRoles says (PermissionDenied naming the role it needs, else the
// call's answer), and with tenant rival's token, which has every role,
// tenant demo's turns and results are NotFound.
func TestHTTPRoles(t *testing.T) {
	e := newHTTPEnv(t)
	var careful, running pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, `{"agent_id": "careful", "prompt": "Carefully, what is 6 * 7?"}`, &careful)
	e.ok("POST", "/v1/turns", e.user, `{"agent_id": "careful", "prompt": "Carefully, what is 1 + 1?"}`, &running)
	pending := e.waitPending(careful.GetStreamId())
	call := pending.GetCallId()
	e.waitPending(running.GetStreamId())
	var done pb.TurnResult
	e.ok("POST", "/v1/turns:invoke", e.user, `{"prompt": "What is 2 * 3?"}`, &done)
	session := "s-" + testserver.RandomID()
	e.ok("POST", "/v1/conversations/"+session+"/messages", e.user, `{"prompt": "hello"}`, &pb.SendMessageResponse{})

	fresh := func(body string) func() string {
		return func() string { return strings.Replace(body, "JOB", "job-"+testserver.RandomID(), 1) }
	}
	same := func(s string) func() string { return func() string { return s } }
	catalog, _ := json.Marshal(map[string]any{"files": map[string]string{"demo.yaml": httpCatalogs[0]}, "dry_run": true})
	type route struct {
		method, path string
		body         func() string
		role         gateway.Role
		// allowed is the status a token with the role gets (its first
		// call; later ones may find the state changed).
		allowed int
		// tenanted routes name demo's turn or result: rival's token finds
		// nothing there.
		tenanted bool
	}
	routes := []route{
		{"POST", "/v1/turns", fresh(`{"job_id": "JOB", "prompt": "hello"}`), gateway.RoleUser, 200, false},
		{"POST", "/v1/turns:invoke", fresh(`{"job_id": "JOB", "prompt": "hello"}`), gateway.RoleUser, 200, false},
		{"POST", "/test/chat", fresh(`{"job_id": "JOB", "prompt": "hello"}`), gateway.RoleUser, 200, false},
		{"GET", "/v1/" + careful.GetStreamId() + "/events", same(""), gateway.RoleUser, 200, true},
		{"GET", "/v1/" + careful.GetStreamId() + "/approvals", same(""), gateway.RoleApprover, 200, true},
		{"POST", "/v1/" + careful.GetStreamId() + "/approvals/" + call, same(`{"approval_id": "` + pending.GetApprovalId() + `", "approved": true}`),
			gateway.RoleApprover, 200, true},
		{"GET", "/v1/grants?session_id=" + session, same(""), gateway.RoleApprover, 200, false},
		{"POST", "/v1/grants/grant_none/revoke", same(`{}`), gateway.RoleApprover, 404, false},
		{"POST", "/v1/" + running.GetStreamId() + "/cancel", same(`{"reason": "enough"}`), gateway.RoleUser, 200, true},
		{"GET", "/v1/results?result_ref=" + url.QueryEscape(done.GetResultRef()), same(""), gateway.RoleUser, 200, true},
		{"GET", "/v1/agents?page_size=1", same(""), gateway.RoleUser, 200, false},
		{"POST", "/v1/conversations/s-" + testserver.RandomID() + "/messages", same(`{"prompt": "hello"}`), gateway.RoleUser, 200, false},
		{"GET", "/v1/conversations/" + session + "/transcript", same(""), gateway.RoleUser, 200, true},
		{"POST", "/v1/catalog", same(string(catalog)), gateway.RoleAdmin, 200, false},
		{"GET", "/v1/rules", same(""), gateway.RoleAdmin, 200, false},
		{"POST", "/v1/routing/dry-run", same(`{"message": "hello"}`), gateway.RoleAdmin, 200, false},
		{"GET", "/v1/processes", same(""), gateway.RoleAdmin, 200, false},
		{"GET", "/v1/processes/none", same(""), gateway.RoleAdmin, 404, false},
		{"GET", "/v1/processes/none/versions", same(""), gateway.RoleAdmin, 404, false},
		{"GET", "/v1/usage?since_duration=24h&group_by=agent", same(""), gateway.RoleAdmin, 200, false},
	}
	tokens := []struct {
		secret string
		roles  []gateway.Role
	}{
		{e.user, []gateway.Role{gateway.RoleUser}},
		{e.approver, []gateway.Role{gateway.RoleApprover}},
		{e.admin, []gateway.Role{gateway.RoleAdmin}},
		{e.all, gateway.AllRoles()},
	}
	for _, r := range routes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			first := true
			for _, tok := range tokens {
				code, data := e.call(r.method, r.path, tok.secret, r.body())
				if !containsRole(tok.roles, r.role) {
					require.Equal(t, http.StatusForbidden, code, "%s", data)
					require.Contains(t, string(data), "needs the role "+string(r.role))
					continue
				}
				if first {
					require.Equal(t, r.allowed, code, "%s", data)
					first = false
				}
				require.NotContains(t, []int{401, 403}, code, "%s", data)
			}
			if r.tenanted {
				p := e.problem(r.method, r.path, e.rival, r.body(), http.StatusNotFound)
				require.Equal(t, agent.ErrTypeNotFound, p.Title)
			}
		})
	}

	// The canceled turn ended canceled; no token was written anywhere.
	require.Eventually(t, func() bool {
		var page pb.ListEventsResponse
		e.ok("GET", "/v1/"+running.GetStreamId()+"/events", e.user, "", &page)
		return page.GetDone()
	}, time.Minute, 50*time.Millisecond)
	for _, tok := range []string{e.user, e.approver, e.admin, e.all, e.rival} {
		require.NotContains(t, string(e.log.Bytes()), tok, "a token in the log")
	}
}

// TestHTTPTranscript: a session's conversation read over HTTP is its
// Conversation's transcript: each answered message with its turn's stream
// id, prompt, answer and status, in order; a session that does not exist,
// or is another tenant's, is NotFound, and a malformed id is refused.
func TestHTTPTranscript(t *testing.T) {
	e := newHTTPEnv(t)
	session := "s-" + testserver.RandomID()
	var first, second pb.SendMessageResponse
	e.ok("POST", "/v1/conversations/"+session+"/messages", e.user, `{"prompt": "What is 6 * 7?"}`, &first)
	e.ok("POST", "/v1/conversations/"+session+"/messages", e.user, `{"prompt": "What is 2 + 3?", "job_id": "`+session+`-second"}`, &second)
	var tr pb.Transcript
	require.Eventually(t, func() bool {
		e.ok("GET", "/v1/conversations/"+session+"/transcript", e.user, "", &tr)
		return tr.GetTurns() == 2
	}, 2*time.Minute, 100*time.Millisecond)
	require.Equal(t, "conv/demo/"+session, tr.GetConversationId())
	require.Equal(t, session, tr.GetSessionId())
	require.Empty(t, tr.GetPending())
	var got []string
	for _, en := range tr.GetEntries() {
		got = append(got, strings.Join([]string{en.GetJobId(), en.GetStreamId(), en.GetPrompt(), en.GetOutput(), en.GetStatus()}, " | "))
		require.NotEmpty(t, en.GetResultRef())
	}
	require.Equal(t, []string{
		first.GetJobId() + " | " + first.GetStreamId() + " | What is 6 * 7? | The result is 42. | " + agent.StatusCompleted,
		session + "-second | turn/demo/" + session + "-second | What is 2 + 3? | The result is 5. | " + agent.StatusCompleted,
	}, got)

	for _, tt := range []struct {
		name, path, token string
		status            int
		title, detail     string
	}{
		{"another tenant's session", "/v1/conversations/" + session + "/transcript", e.rival, 404, agent.ErrTypeNotFound, "not found"},
		{"a session that does not exist", "/v1/conversations/none-" + testserver.RandomID() + "/transcript", e.user, 404, agent.ErrTypeNotFound, "not found"},
		{"a malformed session id", "/v1/conversations/" + strings.Repeat("x", 300) + "/transcript", e.user, 400, agent.ErrTypeInvalidRequest, "session_id"},
		{"no token", "/v1/conversations/" + session + "/transcript", "", 401, agent.ErrTypeUnauthenticated, "missing bearer token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := e.problem("GET", tt.path, tt.token, "", tt.status)
			require.Equal(t, tt.title, p.Title)
			require.Contains(t, p.Detail, tt.detail)
		})
	}
}

func containsRole(roles []gateway.Role, r gateway.Role) bool {
	for _, have := range roles {
		if have == r {
			return true
		}
	}
	return false
}

// TestHTTPBadInput: a request the API refuses answers 4xx problem details
// that say what is wrong, and starts and stores nothing.
func TestHTTPBadInput(t *testing.T) {
	e := newHTTPEnv(t)
	tests := []struct {
		name, path, body string
		status           int
		title, detail    string
	}{
		{"malformed JSON", "/v1/turns", `{"job_id": "JOB", "prompt": "hi"`, 400, agent.ErrTypeInvalidRequest, "request body is not JSON"},
		{"unknown field", "/v1/turns", `{"job_id": "JOB", "prompt": "hi", "tenant_id": "rival"}`, 400, agent.ErrTypeInvalidRequest, `unknown field "tenant_id"`},
		{"unknown agent", "/v1/turns", `{"job_id": "JOB", "agent_id": "nope", "prompt": "hi"}`, 404, agent.ErrTypeAgentNotFound, `"nope"`},
		{"unknown agent, invoked", "/v1/turns:invoke", `{"job_id": "JOB", "agent_id": "nope", "prompt": "hi"}`, 404, agent.ErrTypeAgentNotFound, `"nope"`},
		{"no prompt", "/test/chat", `{"job_id": "JOB"}`, 400, agent.ErrTypeInvalidRequest, "prompt"},
		{"oversized body", "/v1/turns", `{"job_id": "JOB", "prompt": "` + strings.Repeat("x", gateway.MaxBodyBytes) + `"}`, 413, agent.ErrTypeInvalidRequest, "larger than"},
		{"bad job id", "/v1/turns", `{"job_id": "JOB x", "prompt": "hi"}`, 400, agent.ErrTypeInvalidRequest, "job_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := "bad-" + testserver.RandomID()
			p := e.problem("POST", tt.path, e.user, strings.Replace(tt.body, "JOB", job, 1), tt.status)
			require.Equal(t, tt.title, p.Title)
			require.Contains(t, p.Detail, tt.detail)
			require.False(t, p.Retryable)
			e.requireNotStarted("demo", job)
		})
	}

	t.Run("a message to an unknown agent", func(t *testing.T) {
		session := "s-" + testserver.RandomID()
		p := e.problem("POST", "/v1/conversations/"+session+"/messages", e.user, `{"agent_id": "nope", "prompt": "hi"}`, 404)
		require.Equal(t, agent.ErrTypeAgentNotFound, p.Title)
		_, err := e.Client().DescribeWorkflowExecution(context.Background(), contract.ConversationWorkflowID("demo", session), "")
		var nf *serviceerror.NotFound
		require.True(t, errors.As(err, &nf), "no conversation: %v", err)
	})

	t.Run("a job id with another request", func(t *testing.T) {
		job := "reused-" + testserver.RandomID()
		var started pb.StartResponse
		e.ok("POST", "/v1/turns", e.user, `{"job_id": "`+job+`", "prompt": "hello"}`, &started)
		p := e.problem("POST", "/v1/turns", e.user, `{"job_id": "`+job+`", "prompt": "goodbye"}`, http.StatusConflict)
		require.Equal(t, agent.ErrTypeConflict, p.Title)
		e.events(started.GetStreamId(), e.user) // the first request's turn runs on
	})

	t.Run("reads past the end", func(t *testing.T) {
		var started pb.StartResponse
		e.ok("POST", "/v1/turns", e.user, `{"prompt": "hello"}`, &started)
		n := len(e.events(started.GetStreamId(), e.user))
		p := e.problem("GET", fmt.Sprintf("/v1/%s/events?after_index=%d", started.GetStreamId(), n+1), e.user, "", 400)
		require.Contains(t, p.Detail, "beyond the end of the stream")
		p = e.problem("GET", "/v1/"+started.GetStreamId()+"/events?after_index=-1", e.user, "", 400)
		require.Contains(t, p.Detail, "must not be negative")
		p = e.problem("GET", "/v1/"+started.GetStreamId()+"/events?after_index=two", e.user, "", 400)
		require.Equal(t, agent.ErrTypeInvalidRequest, p.Title)
		p = e.problem("GET", "/v1/turn/demo/none-"+testserver.RandomID()+"/events", e.user, "", 404)
		require.Equal(t, agent.ErrTypeNotFound, p.Title)
	})
}
