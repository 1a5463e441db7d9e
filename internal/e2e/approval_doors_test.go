package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	wsdoor "github.com/agentflow/agentflow/internal/gateway/ws"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// twiceScript is httpScript with a turn that asks for the careful
// calculator in two steps, each time with the call id call_0, as models
// that number each reply's calls from 0 do: "Twice, what is 2 * 3 then
// 4 * 5?" calls it with 2 * 3, then, given 6, with 4 * 5.
var twiceScript = strings.Replace(httpScript, "rules:\n", `rules:
  - name: twice-again
    when: {user: '(?i)^twice, what is (?P<a>[-0-9.+*/() ]+) then (?P<b>[-0-9.+*/() ]+)\?$', tool: '^6$'}
    reply: {tool_calls: [{name: careful_calculator, id: call_0, arguments: '{"expression": "${b}"}'}]}
  - name: twice
    when: {user: '(?i)^twice, what is (?P<a>[-0-9.+*/() ]+) then (?P<b>[-0-9.+*/() ]+)\?$'}
    reply: {tool_calls: [{name: careful_calculator, id: call_0, arguments: '{"expression": "${a}"}'}]}
`, 1)

const twicePrompt = "Twice, what is 2 * 3 then 4 * 5?"

// approvalDoor is a door of the gateway as an approver uses it: start a
// turn of agent careful (as a user), and decide one of its calls. decide
// returns the door's refusal, "" when the decision was taken.
type approvalDoor struct {
	name   string
	start  func(t *testing.T, e *httpEnv) string // the turn's stream id
	decide func(t *testing.T, e *httpEnv, streamID string, p *pb.PendingApproval, approved bool) string
}

// startOverHTTP starts the two-step turn over the HTTP API.
func startOverHTTP(t *testing.T, e *httpEnv) string {
	var started pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, `{"agent_id": "careful", "prompt": "`+twicePrompt+`"}`, &started)
	return started.GetStreamId()
}

func approvalDoors() []approvalDoor {
	return []approvalDoor{{
		name:  "grpc",
		start: startOverHTTP,
		decide: func(t *testing.T, e *httpEnv, streamID string, p *pb.PendingApproval, approved bool) string {
			ctx, cancel := context.WithTimeout(grpcAs(context.Background(), e.approver), time.Minute)
			defer cancel()
			_, err := pb.NewAgentServiceClient(e.Conn).Approve(ctx, &pb.ApproveRequest{StreamId: streamID, CallId: p.GetCallId(),
				ApprovalId: p.GetApprovalId(), Approved: proto.Bool(approved)})
			if err != nil {
				return status.Convert(err).Code().String() + ": " + status.Convert(err).Message()
			}
			return ""
		},
	}, {
		name:  "http",
		start: startOverHTTP,
		decide: func(t *testing.T, e *httpEnv, streamID string, p *pb.PendingApproval, approved bool) string {
			code, data := e.call("POST", "/v1/"+streamID+"/approvals/"+url.PathEscape(p.GetCallId()), e.approver,
				fmt.Sprintf(`{"approval_id": %q, "approved": %t}`, p.GetApprovalId(), approved))
			if code != http.StatusOK {
				return fmt.Sprintf("%d: %s", code, data)
			}
			return ""
		},
	}, {
		name:  "websocket",
		start: startOverHTTP,
		decide: func(t *testing.T, e *httpEnv, streamID string, p *pb.PendingApproval, approved bool) string {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := e.socket(ctx, e.approver, "")
			command(t, ctx, c, fmt.Sprintf(`{"type": "approve", "id": "d", "stream_id": %q, "call_id": %q, "approval_id": %q, "approved": %t}`,
				streamID, p.GetCallId(), p.GetApprovalId(), approved))
			m := socketNext(t, ctx, c)
			require.NotNil(t, m.reply, "a reply, not %s", m.raw)
			_ = c.Close(websocket.StatusNormalClosure, "")
			if m.reply.Type != wsdoor.SocketAck {
				return m.reply.Problem.Title + ": " + m.reply.Problem.Detail
			}
			return ""
		},
	}, {
		// The AI SDK's chat: a turn is a chat's message (<chat>-1), and an
		// approval is answered in a request for that message, with the
		// approval id the server streamed.
		name: "aisdk",
		start: func(t *testing.T, e *httpEnv) string {
			chat := "twice-" + testserver.RandomID()
			chunks, _ := e.uiStream("POST", "/v1/ui/chat", e.all, uiBody(t, chat, "careful", userMessage(twicePrompt)))
			require.Equal(t, "tool-approval-request", chunks[len(chunks)-2].Type)
			return contract.TurnWorkflowID("demo", chat+"-1")
		},
		decide: func(t *testing.T, e *httpEnv, streamID string, p *pb.PendingApproval, approved bool) string {
			job := strings.TrimPrefix(streamID, "turn/demo/")
			chat := strings.TrimSuffix(job, "-1")
			body := uiBody(t, chat, "careful", userMessage(twicePrompt), approvalAnswer(job, "careful_calculator", p.GetCallId(), p.GetApprovalId(), approved))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			resp := e.sseCall(ctx, "POST", "/v1/ui/chat", e.all, body, nil)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body) // to the message's next pause or its end
			require.NoError(t, err)
			if resp.StatusCode != http.StatusOK {
				return fmt.Sprintf("%d: %s", resp.StatusCode, data)
			}
			require.NotContains(t, string(data), `"type":"error"`)
			return ""
		},
	}}
}

// TestApprovalBoundOnEveryDoor: on each door that decides approvals, a
// decision is bound to the call it was made for. Two turns wait each on
// a call call_0; a decision made for the first turn's call, sent for the
// second turn's, is refused; the first turn's call approved, its next
// step waits on another call call_0, and the same decision sent again is
// refused. Each refused decision leaves its call waiting, and the calls
// are then decided each by its own approval id, as recorded.
func TestApprovalBoundOnEveryDoor(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script = twiceScript })
	for _, door := range approvalDoors() {
		t.Run(door.name, func(t *testing.T) {
			first, second := door.start(t, e), door.start(t, e)
			a1, b1 := e.waitPending(first), e.waitPending(second)
			require.Equal(t, []string{"call_0", "call_0"}, []string{a1.GetCallId(), b1.GetCallId()}, "the same model-made call id")
			require.NotEqual(t, a1.GetApprovalId(), b1.GetApprovalId())

			// The first turn's decision, sent for the second turn's call.
			refused := door.decide(t, e, second, a1, true)
			require.Contains(t, refused, "the decision was made for another call, step or run")
			require.True(t, proto.Equal(b1, e.waitPending(second)), "the call still waits")

			require.Empty(t, door.decide(t, e, first, a1, true))
			var a2 *pb.PendingApproval
			require.Eventually(t, func() bool {
				a2 = e.waitPending(first)
				return a2.GetApprovalId() != a1.GetApprovalId()
			}, time.Minute, 50*time.Millisecond, "the next step's call waits")
			require.Equal(t, "call_0", a2.GetCallId())
			require.JSONEq(t, `{"expression": "4 * 5"}`, a2.GetArgsJson())

			// The same decision again, now that call_0 is the next step's.
			refused = door.decide(t, e, first, a1, true)
			require.Contains(t, refused, "was already decided")
			require.True(t, proto.Equal(a2, e.waitPending(first)), "the call still waits")

			require.Empty(t, door.decide(t, e, first, a2, false))
			require.Empty(t, door.decide(t, e, second, b1, true))
			b2 := e.waitPendingNot(second, b1.GetApprovalId())
			require.Empty(t, door.decide(t, e, second, b2, true))

			for _, tc := range []struct {
				stream string
				want   []string
			}{
				{first, []string{a1.GetApprovalId() + " approved", a2.GetApprovalId() + " rejected"}},
				{second, []string{b1.GetApprovalId() + " approved", b2.GetApprovalId() + " approved"}},
			} {
				res := e.turnResult(tc.stream)
				require.Equal(t, agent.StatusCompleted, res.Status)
				recs, err := e.Store().Approvals(context.Background(), "demo", strings.TrimPrefix(tc.stream, "turn/demo/"))
				require.NoError(t, err)
				var got []string
				for _, r := range recs {
					require.Equal(t, "call_0", r.CallID)
					got = append(got, r.ApprovalID+" "+r.Outcome)
				}
				require.Equal(t, tc.want, got, "each call recorded once, under its approval id")
			}
		})
	}
}

// waitPendingNot waits until a turn's call waiting for approval is
// another than the one with approval id old.
func (e *httpEnv) waitPendingNot(streamID, old string) *pb.PendingApproval {
	e.t.Helper()
	var p *pb.PendingApproval
	require.Eventually(e.t, func() bool {
		p = e.waitPending(streamID)
		return p.GetApprovalId() != old
	}, time.Minute, 50*time.Millisecond)
	return p
}

// turnResult waits for a turn's result.
func (e *httpEnv) turnResult(streamID string) agent.TurnResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res agent.TurnResult
	require.NoError(e.t, e.Client().GetWorkflow(ctx, streamID, "").Get(ctx, &res))
	return res
}
