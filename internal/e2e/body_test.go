package e2e

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestStreamOutlivesTheBodyTimeout: AGENTFLOW_HTTP_BODY_TIMEOUT bounds how
// long a request's body may take to arrive, not its answer: an event
// stream started by a POST goes on past it — while its turn waits for an
// approval — to its end.
func TestStreamOutlivesTheBodyTimeout(t *testing.T) {
	const bodyTimeout = time.Second
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.HTTPBodyTimeout = bodyTimeout })
	job := "outlive-" + testserver.RandomID()
	streamID := contract.TurnWorkflowID("demo", job)
	evs, _ := e.sseEvents("POST", "/v1/turns:stream", e.user, `{"job_id": "`+job+`", "agent_id": "careful", "prompt": "Carefully, what is 2 + 2?"}`, nil,
		func(ev agent.Event) bool {
			if ev.Kind == agent.EventApprovalRequired {
				// Not a synchronisation: time for the connection's read
				// deadline to pass, were it still set once the body had
				// arrived, and end the stream.
				time.Sleep(3 * bodyTimeout)
				pending := e.waitPending(streamID)
				var ack pb.ApproveResponse
				e.ok("POST", "/v1/"+streamID+"/approvals/"+url.PathEscape(pending.GetCallId()), e.approver, `{"approval_id": "`+pending.GetApprovalId()+`", "approved": true}`, &ack)
			}
			return false
		})
	require.Equal(t, agent.StreamCompleted, evs[len(evs)-1].Status, "the stream reads its turn to its end")
	require.Equal(t, "The result is 4.", agent.ReplayText(evs))
}
