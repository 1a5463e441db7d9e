package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/sse"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// sseCall opens an event stream: a request with a token and, when not
// empty, a body and more headers. The caller closes the answer's body.
func (e *httpEnv) sseCall(ctx context.Context, method, path, token, body string, header map[string]string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.api+path, rd)
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	return resp
}

// sseEvents opens an event stream that must answer 200 and reads it with
// a reader of the standard (package sse) until it ends, or until stop says
// so (then the connection is dropped). Each event must be the log's: its
// id the index, its type the kind, its data the event's JSON.
func (e *httpEnv) sseEvents(method, path, token, body string, header map[string]string, stop func(agent.Event) bool) ([]agent.Event, []string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp := e.sseCall(ctx, method, path, token, body, header)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	require.Equal(e.t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(e.t, "no-cache", resp.Header.Get("Cache-Control"))
	require.Equal(e.t, "no", resp.Header.Get("X-Accel-Buffering"))
	rd := sse.NewReader(resp.Body)
	var evs []agent.Event
	var raw []string
	for {
		m, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return evs, raw
		}
		require.NoError(e.t, err)
		require.NotEqual(e.t, gateway.SSEProblemEvent, m.Type, "%s", m.Data)
		ev, err := agent.DecodeEvent([]byte(m.Data))
		require.NoError(e.t, err, "%s", m.Data)
		require.Equal(e.t, strconv.FormatInt(ev.Index, 10), m.ID)
		require.Equal(e.t, string(ev.Kind), m.Type)
		evs, raw = append(evs, ev), append(raw, m.Data)
		if stop != nil && stop(ev) {
			return evs, raw
		}
	}
}

// grpcStream is what gRPC Stream gives for a request, as JSON events.
func (e *httpEnv) grpcStream(token string, turn *pb.TurnRequest) []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(grpcAs(context.Background(), token), 2*time.Minute)
	defer cancel()
	stream, err := pb.NewAgentServiceClient(e.Conn).Stream(ctx, &pb.StreamRequest{Turn: turn})
	require.NoError(e.t, err)
	return eventsJSON(e.t, fromPB(readAll(e.t, stream)))
}

func eventsJSON(t *testing.T, evs []agent.Event) []string {
	t.Helper()
	out := make([]string, len(evs))
	for i, ev := range evs {
		data, err := json.Marshal(ev)
		require.NoError(t, err)
		out[i] = string(data)
	}
	return out
}

// requireSameJSON: the same events, in the same order.
func requireSameJSON(t *testing.T, want, got []string) {
	t.Helper()
	require.Len(t, got, len(want), "want %v\ngot  %v", want, got)
	for i := range want {
		require.JSONEq(t, want[i], got[i], "event %d", i+1)
	}
}

// logJSON is the turn's log as the events query holds it.
func (e *httpEnv) logJSON(streamID string) []string {
	e.t.Helper()
	page, err := turnclient.Events(context.Background(), e.Client(), streamID, agent.EventsQuery{})
	require.NoError(e.t, err)
	require.True(e.t, page.Done)
	return eventsJSON(e.t, page.Events)
}

// TestSSEEqualsGRPCStream: a streamed one-tool turn started over SSE
// gives exactly the events gRPC Stream gives for the same turn (attached
// by the same request), and the log holds; following it over SSE, by
// either form of its path, gives them again; a conversation's message
// streams its turn.
func TestSSEEqualsGRPCStream(t *testing.T) {
	e := newHTTPEnv(t)
	job := "sse-" + testserver.RandomID()
	body := `{"job_id": "` + job + `", "prompt": "What is 12.5 * 4?"}`
	evs, overSSE := e.sseEvents("POST", "/v1/turns:stream", e.user, body, nil, nil)
	require.Equal(t, "The result is 50.", agent.ReplayText(evs))
	require.True(t, evs[len(evs)-1].Terminal(), "the stream ends after the terminal status")
	kinds := map[agent.EventKind]int{}
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Index, "no gap, no repeat")
		kinds[ev.Kind]++
	}
	require.Equal(t, 1, kinds[agent.EventToolStart])
	require.Equal(t, 1, kinds[agent.EventToolEnd])
	require.Greater(t, kinds[agent.EventToken], 1, "streamed")

	streamID := evs[0].StreamID
	requireSameJSON(t, e.grpcStream(e.user, &pb.TurnRequest{JobId: job, Prompt: "What is 12.5 * 4?"}), overSSE)
	require.Equal(t, e.logJSON(streamID), overSSE, "the log's JSON, byte for byte")
	_, again := e.sseEvents("GET", "/v1/"+streamID+"/events:stream", e.user, "", nil, nil)
	require.Equal(t, overSSE, again)
	_, after2 := e.sseEvents("GET", "/v1/"+streamID+"/events:stream?after_index=2", e.user, "", nil, nil)
	require.Equal(t, overSSE[2:], after2)

	// A conversation's message, and its turn's stream.
	session := "s-" + testserver.RandomID()
	msg, _ := e.sseEvents("POST", "/v1/conversations/"+session+"/messages:stream", e.user, `{"prompt": "What is 6 * 7?"}`, nil, nil)
	require.Equal(t, "The result is 42.", agent.ReplayText(msg))
	require.Equal(t, agent.StreamCompleted, msg[len(msg)-1].Status)
	require.Equal(t, "turn/demo/"+session+"-1", msg[0].StreamID, "the message's turn")
}

// TestSSEResume: a stream dropped mid-turn resumes from the last event id
// the client's reader kept — by Last-Event-ID on the follow route, by
// the same POST again (as fetch-based clients reconnect), or by
// after_index — with no gap and no duplicate.
func TestSSEResume(t *testing.T) {
	e := newHTTPEnv(t)
	job := "resume-" + testserver.RandomID()
	body := `{"job_id": "` + job + `", "prompt": "What is 9 * 9?"}`
	first, firstRaw := e.sseEvents("POST", "/v1/turns:stream", e.user, body, nil, func(ev agent.Event) bool { return ev.Index == 3 })
	require.Len(t, first, 3)
	last := strconv.FormatInt(first[len(first)-1].Index, 10)
	streamID := first[0].StreamID

	_, byHeader := e.sseEvents("GET", "/v1/"+streamID+"/events:stream?after_index=0", e.user, "", map[string]string{"Last-Event-ID": last}, nil)
	_, byPost := e.sseEvents("POST", "/v1/turns:stream", e.user, body, map[string]string{"Last-Event-ID": last}, nil)
	_, byQuery := e.sseEvents("GET", "/v1/"+streamID+"/events:stream?after_index="+last, e.user, "", nil, nil)
	whole := e.logJSON(streamID)
	require.Equal(t, agent.StreamCompleted, mustDecode(t, whole[len(whole)-1]).Status)
	for _, rest := range [][]string{byHeader, byPost, byQuery} {
		require.Equal(t, whole, append(append([]string(nil), firstRaw...), rest...))
	}
	// The POSTs started one turn: the job's.
	_, err := e.Client().DescribeWorkflowExecution(context.Background(), streamID, "")
	require.NoError(t, err)
}

func mustDecode(t *testing.T, data string) agent.Event {
	t.Helper()
	ev, err := agent.DecodeEvent([]byte(data))
	require.NoError(t, err)
	return ev
}

// TestSSERefusals: what a stream refuses is a problem with its status,
// before the stream begins, and starts nothing: a Last-Event-ID that is
// not an index or is beyond the log, no token, another tenant's turn on
// every route, an unknown agent, a resumed POST without its job id.
func TestSSERefusals(t *testing.T) {
	e := newHTTPEnv(t)
	job := "ref-" + testserver.RandomID()
	evs, _ := e.sseEvents("POST", "/v1/turns:stream", e.user, `{"job_id": "`+job+`", "prompt": "What is 1 + 1?"}`, nil, nil)
	streamID := evs[0].StreamID
	follow := "/v1/" + streamID + "/events:stream"
	beyond := strconv.Itoa(len(evs) + 1)
	body := `{"job_id": "` + job + `", "prompt": "What is 1 + 1?"}`

	fresh := "ref-" + testserver.RandomID()
	tests := []struct {
		name, method, path, token, body string
		header                          map[string]string
		status                          int
		title, detail                   string
	}{
		{"Last-Event-ID not a number", "GET", follow, e.user, "", map[string]string{"Last-Event-ID": "abc"}, 400, agent.ErrTypeInvalidRequest, `Last-Event-ID "abc" is not an event index`},
		{"Last-Event-ID beyond the log", "GET", follow, e.user, "", map[string]string{"Last-Event-ID": beyond}, 400, agent.ErrTypeInvalidRequest, "beyond the end of the stream"},
		{"after_index beyond the log", "GET", follow + "?after_index=" + beyond, e.user, "", nil, 400, agent.ErrTypeInvalidRequest, "beyond the end of the stream"},
		{"after_index negative", "GET", follow + "?after_index=-1", e.user, "", nil, 400, agent.ErrTypeInvalidRequest, "is not an event index"},
		{"an unknown parameter", "GET", follow + "?last_event_id=1", e.user, "", nil, 400, agent.ErrTypeInvalidRequest, `unknown query parameter "last_event_id"`},
		{"a resumed POST beyond the log", "POST", "/v1/turns:stream", e.user, body, map[string]string{"Last-Event-ID": beyond}, 400, agent.ErrTypeInvalidRequest, "beyond the end"},
		{"a resumed POST without a job id", "POST", "/v1/turns:stream", e.user, `{"prompt": "hi"}`, map[string]string{"Last-Event-ID": "2"}, 400, agent.ErrTypeInvalidRequest, "needs the job_id"},
		{"no token", "GET", follow, "", "", nil, 401, agent.ErrTypeUnauthenticated, "missing bearer token"},
		{"no token to start", "POST", "/v1/turns:stream", "", `{"job_id": "` + fresh + `", "prompt": "hi"}`, nil, 401, agent.ErrTypeUnauthenticated, "missing bearer token"},
		{"another tenant's turn", "GET", follow, e.rival, "", nil, 404, agent.ErrTypeNotFound, "not found"},
		{"another tenant's job, resumed", "POST", "/v1/turns:stream", e.rival, body, map[string]string{"Last-Event-ID": "1"}, 404, agent.ErrTypeNotFound, "not found"},
		{"another tenant's message's turn, resumed", "POST", "/v1/conversations/s1/messages:stream", e.rival, body, map[string]string{"Last-Event-ID": "1"}, 404, agent.ErrTypeNotFound, "not found"},
		{"a turn that does not exist", "GET", "/v1/turn/demo/none-" + testserver.RandomID() + "/events:stream", e.user, "", nil, 404, agent.ErrTypeNotFound, "not found"},
		{"an unknown agent", "POST", "/v1/turns:stream", e.user, `{"job_id": "` + fresh + `", "agent_id": "nope", "prompt": "hi"}`, nil, 404, agent.ErrTypeAgentNotFound, `"nope"`},
		{"an unknown field", "POST", "/v1/turns:stream", e.user, `{"job_id": "` + fresh + `", "prompt": "hi", "tenant_id": "rival"}`, nil, 400, agent.ErrTypeInvalidRequest, `unknown field "tenant_id"`},
		{"a message to an unknown agent", "POST", "/v1/conversations/s-" + fresh + "/messages:stream", e.user, `{"agent_id": "nope", "prompt": "hi"}`, nil, 404, agent.ErrTypeAgentNotFound, `"nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.sseCall(context.Background(), tt.method, tt.path, tt.token, tt.body, tt.header)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tt.status, resp.StatusCode, "%s", data)
			require.Equal(t, gateway.ProblemContentType, resp.Header.Get("Content-Type"))
			var p gateway.Problem
			require.NoError(t, json.Unmarshal(data, &p), "%s", data)
			require.Equal(t, tt.title, p.Title)
			require.Contains(t, p.Detail, tt.detail)
		})
	}
	e.requireNotStarted("demo", fresh)
	_, err := e.Client().DescribeWorkflowExecution(context.Background(), "turn/rival/"+job, "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "rival's resumed POST started nothing")
}

// TestStreamLimit: a tenant's open streams on one gateway — WebSockets,
// SSE and gRPC streams together — stop at AGENTFLOW_MAX_STREAMS_PER_TENANT
// with 429 (ResourceExhausted); another tenant's are its own, and a
// stream closed frees its slot.
func TestStreamLimit(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.MaxStreamsPerTenant = 2 })
	job := "limit-" + testserver.RandomID()
	evs, _ := e.sseEvents("POST", "/v1/turns:stream", e.user, `{"job_id": "`+job+`", "prompt": "hello"}`, nil, nil)
	streamID := evs[0].StreamID

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s1 := e.socket(ctx, e.user, "")
	s2 := e.socket(ctx, e.user, "")
	p := e.problem("GET", "/v1/"+streamID+"/events:stream", e.user, "", http.StatusTooManyRequests)
	require.Equal(t, agent.ErrTypeRateLimited, p.Title)
	require.Contains(t, p.Detail, "AGENTFLOW_MAX_STREAMS_PER_TENANT")
	resp := e.socketRefused(ctx, e.user, "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	resume, err := pb.NewAgentServiceClient(e.Conn).Resume(grpcAs(ctx, e.user), &pb.ResumeRequest{StreamId: streamID})
	require.NoError(t, err)
	_, err = resume.Recv()
	require.ErrorContains(t, err, "ResourceExhausted")
	_ = e.socket(ctx, e.rival, "") // rival's own count

	_ = s1.CloseNow()
	require.Eventually(t, func() bool {
		resp := e.sseCall(ctx, "GET", "/v1/"+streamID+"/events:stream", e.user, "", nil)
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 50*time.Millisecond, "a closed socket frees its slot")
	_ = s2
}
