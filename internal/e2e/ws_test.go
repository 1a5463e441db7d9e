package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	wsdoor "github.com/agentflow/agentflow/internal/gateway/ws"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// socketURL is the WebSocket's address with a query ("" for none).
func (e *httpEnv) socketURL(query string) string {
	u := "ws" + strings.TrimPrefix(e.api, "http") + "/v1/socket"
	if query != "" {
		u += "?" + query
	}
	return u
}

// socket opens a WebSocket with a token in the Authorization header.
func (e *httpEnv) socket(ctx context.Context, token, query string) *websocket.Conn {
	e.t.Helper()
	return e.socketWith(ctx, query, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
}

func (e *httpEnv) socketWith(ctx context.Context, query string, opts *websocket.DialOptions) *websocket.Conn {
	e.t.Helper()
	c, resp, err := websocket.Dial(ctx, e.socketURL(query), opts)
	require.NoError(e.t, err, "%v", resp)
	c.SetReadLimit(-1) // an event carries a whole answer
	e.t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// socketRefused opens a WebSocket that must be refused, and returns the
// refusal.
func (e *httpEnv) socketRefused(ctx context.Context, token, query string) *http.Response {
	e.t.Helper()
	_, resp, err := websocket.Dial(ctx, e.socketURL(query), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	require.Error(e.t, err)
	require.NotNil(e.t, resp, "%v", err)
	return resp
}

// socketMsg is a message of the socket: an event, or a reply.
type socketMsg struct {
	event agent.Event
	raw   string
	reply *wsdoor.SocketReply
}

func socketNext(t *testing.T, ctx context.Context, c *websocket.Conn) socketMsg {
	t.Helper()
	typ, data, err := c.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	var probe struct{ Type, Kind string }
	require.NoError(t, json.Unmarshal(data, &probe), "%s", data)
	if probe.Type != "" {
		var r wsdoor.SocketReply
		require.NoError(t, json.Unmarshal(data, &r))
		return socketMsg{reply: &r}
	}
	ev, err := agent.DecodeEvent(data)
	require.NoError(t, err, "%s", data)
	return socketMsg{event: ev, raw: string(data)}
}

// command sends a command.
func command(t *testing.T, ctx context.Context, c *websocket.Conn, cmd string) {
	t.Helper()
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(cmd)))
}

// reply reads the next message, which must be a reply of type typ.
func reply(t *testing.T, ctx context.Context, c *websocket.Conn, typ string) *wsdoor.SocketReply {
	t.Helper()
	m := socketNext(t, ctx, c)
	require.NotNil(t, m.reply, "a reply, not %s", m.raw)
	require.Equal(t, typ, m.reply.Type, "%+v", m.reply)
	return m.reply
}

// socketEvents reads events until the terminal one, or until stop says so.
func socketEvents(t *testing.T, ctx context.Context, c *websocket.Conn, stop func(agent.Event) bool) ([]agent.Event, []string) {
	t.Helper()
	var evs []agent.Event
	var raw []string
	for {
		m := socketNext(t, ctx, c)
		require.Nil(t, m.reply, "an event, not %+v", m.reply)
		evs, raw = append(evs, m.event), append(raw, m.raw)
		if m.event.Terminal() || stop != nil && stop(m.event) {
			return evs, raw
		}
	}
}

// TestWebSocketEqualsGRPCStream: a streamed one-tool turn started on a
// WebSocket gives exactly what gRPC Stream gives for the same turn, after
// the start's ack; a socket dropped mid-turn and opened again after its
// last index gets the rest, with no gap and no duplicate; a follow
// command does the same on an open socket.
func TestWebSocketEqualsGRPCStream(t *testing.T) {
	e := newHTTPEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "ws-" + testserver.RandomID()
	c := e.socket(ctx, e.user, "")
	command(t, ctx, c, `{"type": "start", "id": "s1", "job_id": "`+job+`", "prompt": "What is 12.5 * 4?"}`)
	ack := reply(t, ctx, c, wsdoor.SocketAck)
	require.Equal(t, "s1", ack.ID)
	require.Equal(t, wsdoor.SocketCommandStart, ack.Command)
	require.JSONEq(t, `{"stream_id": "turn/demo/`+job+`", "job_id": "`+job+`"}`, string(ack.Result))
	evs, overSocket := socketEvents(t, ctx, c, nil)
	require.Equal(t, "The result is 50.", agent.ReplayText(evs))
	streamID := evs[0].StreamID
	requireSameJSON(t, e.grpcStream(e.user, &pb.TurnRequest{JobId: job, Prompt: "What is 12.5 * 4?"}), overSocket)
	require.Equal(t, e.logJSON(streamID), overSocket, "the log's JSON, byte for byte")

	// Follow on the same socket, from an index.
	command(t, ctx, c, `{"type": "follow", "id": "f1", "stream_id": "`+streamID+`", "after_index": 4}`)
	require.Equal(t, "f1", reply(t, ctx, c, wsdoor.SocketAck).ID)
	_, followed := socketEvents(t, ctx, c, nil)
	require.Equal(t, overSocket[4:], followed)

	// Dropped mid-turn, resumed by the index given when connecting.
	job2 := "ws-" + testserver.RandomID()
	d := e.socket(ctx, e.user, "")
	command(t, ctx, d, `{"type": "start", "job_id": "`+job2+`", "prompt": "What is 9 * 9?"}`)
	reply(t, ctx, d, wsdoor.SocketAck)
	first, firstRaw := socketEvents(t, ctx, d, func(ev agent.Event) bool { return ev.Index == 3 })
	require.NoError(t, d.CloseNow())
	r := e.socket(ctx, e.user, "stream_id=turn/demo/"+job2+"&after_index="+strconv.FormatInt(first[len(first)-1].Index, 10))
	_, rest := socketEvents(t, ctx, r, nil)
	require.Equal(t, e.logJSON("turn/demo/"+job2), append(firstRaw, rest...))
}

// TestWebSocketCommands: a user's token cannot approve over the socket
// (the error names the role); an approver's socket can, the call is
// released under the token's name and the user's socket sees the turn
// end; cancel and a conversation message work; bad commands are errors
// with their ids; another tenant's turn is NotFound for every command.
func TestWebSocketCommands(t *testing.T) {
	e := newHTTPEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "careful-" + testserver.RandomID()
	user := e.socket(ctx, e.user, "")
	command(t, ctx, user, `{"type": "start", "id": "go", "job_id": "`+job+`", "agent_id": "careful", "prompt": "Carefully, what is 6 * 7?"}`)
	reply(t, ctx, user, wsdoor.SocketAck)
	waiting, _ := socketEvents(t, ctx, user, func(ev agent.Event) bool { return ev.Status == agent.StreamWaitingApproval })
	var call, approvalID string
	for _, ev := range waiting {
		if ev.Kind == agent.EventApprovalRequired {
			call, approvalID = ev.Tool.CallID, ev.Tool.ApprovalID
		}
	}
	require.NotEmpty(t, call)
	require.NotEmpty(t, approvalID)
	streamID := waiting[0].StreamID

	approve := fmt.Sprintf(`{"type": "approve", "id": "a1", "stream_id": %q, "call_id": %q, "approval_id": %q, "approved": true, "reason": "fine"}`,
		streamID, call, approvalID)
	command(t, ctx, user, approve)
	refused := reply(t, ctx, user, wsdoor.SocketError)
	require.Equal(t, "a1", refused.ID)
	require.Equal(t, agent.ErrTypePermissionDenied, refused.Problem.Title)
	require.Contains(t, refused.Problem.Detail, "needs the role approver")

	rival := e.socket(ctx, e.rival, "")
	for _, cmd := range []string{approve, `{"type": "cancel", "id": "a1", "stream_id": "` + streamID + `"}`,
		`{"type": "follow", "id": "a1", "stream_id": "` + streamID + `"}`} {
		command(t, ctx, rival, cmd)
		p := reply(t, ctx, rival, wsdoor.SocketError)
		require.Equal(t, agent.ErrTypeNotFound, p.Problem.Title, "%s", cmd)
	}
	resp := e.socketRefused(ctx, e.rival, "stream_id="+streamID)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	approver := e.socket(ctx, e.approver, "")
	command(t, ctx, approver, approve)
	ack := reply(t, ctx, approver, wsdoor.SocketAck)
	require.JSONEq(t, `{"call_id": "`+call+`", "outcome": "approved", "approval_id": "`+approvalID+`", "grant_id": ""}`, string(ack.Result))
	rest, _ := socketEvents(t, ctx, user, nil)
	all := append(waiting, rest...)
	require.Equal(t, "The result is 42.", agent.ReplayText(all))
	require.Equal(t, agent.StreamCompleted, all[len(all)-1].Status)
	recs, err := e.Store().Approvals(ctx, "demo", job)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "ann", recs[0].Approver, "the token's name")

	// Cancel a turn waiting for a decision; it ends canceled.
	command(t, ctx, user, `{"type": "start", "agent_id": "careful", "prompt": "Carefully, what is 2 * 2?"}`)
	reply(t, ctx, user, wsdoor.SocketAck)
	pending, _ := socketEvents(t, ctx, user, func(ev agent.Event) bool { return ev.Kind == agent.EventApprovalRequired })
	command(t, ctx, user, `{"type": "cancel", "id": "c1", "stream_id": "`+pending[0].StreamID+`", "reason": "enough"}`)
	for {
		m := socketNext(t, ctx, user)
		if m.reply != nil {
			require.Equal(t, wsdoor.SocketAck, m.reply.Type, "%+v", m.reply)
			require.Equal(t, "c1", m.reply.ID)
			continue
		}
		if m.event.Terminal() {
			require.Equal(t, agent.StreamCanceled, m.event.Status)
			break
		}
	}

	// A conversation's message, then its turn.
	session := "s-" + testserver.RandomID()
	command(t, ctx, user, `{"type": "message", "id": "m1", "session_id": "`+session+`", "prompt": "What is 2 * 3?"}`)
	ack = reply(t, ctx, user, wsdoor.SocketAck)
	require.JSONEq(t, `{"stream_id": "turn/demo/`+session+`-1", "job_id": "`+session+`-1", "conversation_id": "conv/demo/`+session+`", "steered": false}`, string(ack.Result))
	msg, _ := socketEvents(t, ctx, user, nil)
	require.Equal(t, "The result is 6.", agent.ReplayText(msg))

	// Bad commands: errors with what is wrong, and the socket goes on.
	for _, tt := range []struct{ cmd, id, detail string }{
		{`{"type": "start", "id": "b1", "agent_id": "nope", "prompt": "hi"}`, "b1", `"nope"`},
		{`{"type": "launch", "id": "b2"}`, "b2", `unknown command type "launch"`},
		{`{"type": "approve", "id": "b3", "stream_id": "` + streamID + `", "call_id": "x", "approved": "yes"}`, "b3", "approve command"},
		{`{"type": "follow", "id": "b4", "stream_id": "` + streamID + `", "after_index": 999}`, "b4", "beyond the end of the stream"},
		{`not json`, "", "a command is a JSON object"},
	} {
		command(t, ctx, user, tt.cmd)
		p := socketNext(t, ctx, user).reply
		if p.Type == wsdoor.SocketAck {
			// A follow is acked as it begins; its failure comes after.
			require.Equal(t, wsdoor.SocketCommandFollow, p.Command)
			p = reply(t, ctx, user, wsdoor.SocketError)
			require.Equal(t, streamID, p.StreamID)
		}
		require.Equal(t, wsdoor.SocketError, p.Type)
		require.Equal(t, tt.id, p.ID)
		require.Contains(t, p.Problem.Detail, tt.detail)
	}
}

// TestWebSocketBrowserAuth: a browser's socket sends its token as a
// subprotocol beside agentflow.v1, which is the one selected; a page of
// an origin that is not allowed is refused; no token is 401.
func TestWebSocketBrowserAuth(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.CORSOrigins = []string{"http://localhost:3000"} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	protos := []string{wsdoor.SocketProtocol, wsdoor.SocketBearerPrefix + base64.RawURLEncoding.EncodeToString([]byte(e.user))}
	c := e.socketWith(ctx, "", &websocket.DialOptions{Subprotocols: protos, HTTPHeader: http.Header{"Origin": {"http://localhost:3000"}}})
	require.Equal(t, wsdoor.SocketProtocol, c.Subprotocol())
	command(t, ctx, c, `{"type": "start", "prompt": "What is 2 + 2?"}`)
	reply(t, ctx, c, wsdoor.SocketAck)
	evs, _ := socketEvents(t, ctx, c, nil)
	require.Equal(t, "The result is 4.", agent.ReplayText(evs))

	_, resp, err := websocket.Dial(ctx, e.socketURL(""), &websocket.DialOptions{Subprotocols: protos, HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	_, resp, err = websocket.Dial(ctx, e.socketURL(""), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	for _, tok := range []string{e.user, e.rival} {
		require.NotContains(t, string(e.log.Bytes()), tok, "a token in the log")
	}
}

// longScript answers "long" with a long text, in few chunks, and
// arithmetic through the calculator.
func longScript() string {
	return `
pacing: {chunk_words: 4000}
rules:
  - name: long
    when: {user: '^long$'}
    reply: {text: '` + strings.TrimSpace(strings.Repeat("durable ", 40000)) + `'}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
`
}

// TestWebSocketSlowClient: a socket whose client never reads (a small
// receive window, so the kernel holds little for it) is dropped once a
// write to it has waited SlowClient; meanwhile another client streams a
// turn to its end unslowed, and the dropped one resumes from the last
// event it read, with no gap and no duplicate.
func TestWebSocketSlowClient(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script = longScript() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var long pb.TurnResult
	e.ok("POST", "/v1/turns:invoke", e.user, `{"prompt": "long"}`, &long)
	require.Equal(t, agent.StatusCompleted, long.GetStatus())
	streamID := "turn/demo/" + long.GetJobId()
	whole := e.logJSON(streamID)
	size := 0
	for _, ev := range whole {
		size += len(ev)
	}
	require.Greater(t, size, 500<<10, "more than a connection's buffers hold")

	dialer := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	slow := e.socketWith(ctx, "stream_id="+streamID+"&after_index=0", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + e.user}},
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}},
	})

	// Another client, meanwhile: a whole turn, while the slow one waits.
	other := e.socket(ctx, e.user, "")
	command(t, ctx, other, `{"type": "start", "prompt": "What is 6 * 7?"}`)
	reply(t, ctx, other, wsdoor.SocketAck)
	evs, _ := socketEvents(t, ctx, other, nil)
	require.Equal(t, "The result is 42.", agent.ReplayText(evs))
	require.NotContains(t, string(e.log.Bytes()), "too slow", "the other client finished first")

	require.Eventually(t, func() bool { return strings.Contains(string(e.log.Bytes()), "too slow") }, time.Minute, 50*time.Millisecond)
	var got []string
	for {
		_, data, err := slow.Read(ctx)
		if err != nil {
			require.NotEqual(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "dropped, not ended: %v", err)
			break
		}
		got = append(got, string(data))
	}
	require.Less(t, len(got), len(whole), "dropped before the end")
	require.Equal(t, whole[:len(got)], got, "what it read is the log's beginning")

	after := 0
	if len(got) > 0 {
		after = int(mustDecode(t, got[len(got)-1]).Index)
	}
	again := e.socket(ctx, e.user, "stream_id="+streamID+"&after_index="+strconv.Itoa(after))
	_, rest := socketEvents(t, ctx, again, nil)
	require.Equal(t, whole, append(got, rest...))
}
