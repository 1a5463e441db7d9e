package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// careful is an agent whose tool waits for approval.
const careful = `
tenant: demo
tools:
  - name: careful_calculator
    kind: calculator
    approval: always
agents:
  - id: careful
    model: openai:gpt-4o-mini
    tools: [careful_calculator]
`

// waitFor reads a stream until an event of kind arrives.
func waitFor(t *testing.T, s grpc.ServerStreamingClient[pb.StreamEvent], kind agent.EventKind) agent.Event {
	t.Helper()
	for {
		ev, err := s.Recv()
		require.NoError(t, err)
		if e := gateway.FromPBEvent(ev); e.Kind == kind {
			return e
		}
	}
}

// TestApprovalRoles: deciding needs the approver role; the decision must
// say whether it approves, and is recorded under the token's name, not
// the name the request gives.
func TestApprovalRoles(t *testing.T) {
	f := start(t)
	f.srv.ApplyCatalog(t, careful)
	ctx, cancel := context.WithTimeout(f.as("tok-demo"), time.Minute)
	defer cancel()
	user := f.as("tok-user")
	s, err := f.client.Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{AgentId: "careful", Prompt: "Carefully, what is 6 * 7?"}})
	require.NoError(t, err)
	asked := waitFor(t, s, agent.EventApprovalRequired)
	streamID, callID := asked.StreamID, asked.Tool.CallID

	_, err = f.client.ListPendingApprovals(user, &pb.ListPendingApprovalsRequest{StreamId: streamID})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "has the roles user; ListPendingApprovals needs the role approver")
	_, err = f.client.Approve(user, &pb.ApproveRequest{StreamId: streamID, CallId: callID, Approved: proto.Bool(true)})
	require.Equal(t, codes.PermissionDenied, status.Code(err))

	_, err = f.client.Approve(ctx, &pb.ApproveRequest{StreamId: streamID, CallId: callID})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "approved is required")

	pending, err := f.client.ListPendingApprovals(ctx, &pb.ListPendingApprovalsRequest{StreamId: streamID})
	require.NoError(t, err)
	require.Len(t, pending.GetApprovals(), 1, "refused calls decide nothing")

	// A client that still sends the deprecated approver is not believed.
	ack, err := f.client.Approve(ctx, &pb.ApproveRequest{StreamId: streamID, CallId: callID, ApprovalId: asked.Tool.ApprovalID,
		//lint:ignore SA1019 the test sends the deprecated field on purpose
		Approved: proto.Bool(true), Approver: "mallory"})
	require.NoError(t, err)
	require.Equal(t, agent.ApprovalApproved, ack.GetOutcome())
	events := collect(t, s)
	require.Equal(t, agent.StreamCompleted, events[len(events)-1].Status)

	recs, err := f.srv.Store().Approvals(context.Background(), "demo", jobOf(t, streamID))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "ana", recs[0].Approver, "the token's name, not the one in the request")
	require.Equal(t, []string{agent.IssuerStaticToken, "ana"}, []string{recs[0].ApproverIssuer, recs[0].ApproverSubject},
		"where the approver's identity comes from")
}

// TestCatalogNeedsAdmin: a token without the admin role cannot touch the
// catalog.
func TestCatalogNeedsAdmin(t *testing.T) {
	f := start(t)
	cat := pb.NewCatalogServiceClient(f.conn)
	_, err := cat.ListRules(f.as("tok-user"), &pb.ListRulesRequest{})
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	_, err = cat.ListRules(f.as("tok-demo"), &pb.ListRulesRequest{})
	require.NoError(t, err)
}

// TestCancelThroughGateway: Cancel stops a turn waiting for approval; its
// stream ends CANCELED and its result says who cancelled it and why.
func TestCancelThroughGateway(t *testing.T) {
	f := start(t)
	f.srv.ApplyCatalog(t, careful)
	ctx, cancel := context.WithTimeout(f.as("tok-user"), time.Minute)
	defer cancel()
	s, err := f.client.Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{AgentId: "careful", Prompt: "Carefully, what is 6 * 7?"}})
	require.NoError(t, err)
	asked := waitFor(t, s, agent.EventApprovalRequired)

	_, err = f.client.Cancel(f.as("tok-other"), &pb.CancelRequest{StreamId: asked.StreamID})
	require.Equal(t, codes.NotFound, status.Code(err), "another tenant's turn is not found")
	_, err = f.client.Cancel(ctx, &pb.CancelRequest{StreamId: asked.StreamID, Reason: "asked the wrong agent"})
	require.NoError(t, err)
	events := collect(t, s)
	last := events[len(events)-1]
	require.Equal(t, agent.StreamCanceled, last.Status)
	require.Equal(t, agent.ErrTypeCanceled, last.Error.Type)

	res, err := f.client.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: "careful", Prompt: "Carefully, what is 6 * 7?", JobId: jobOf(t, asked.StreamID)}})
	require.NoError(t, err, "the job's stored result")
	require.Equal(t, agent.StatusCanceled, res.GetStatus())
	require.Equal(t, "the turn was cancelled by token-"+tokenHashPrefix("tok-user")+": asked the wrong agent", res.GetError().GetMessage())

	_, err = f.client.Cancel(ctx, &pb.CancelRequest{StreamId: asked.StreamID})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
}

func jobOf(t *testing.T, streamID string) string {
	t.Helper()
	tenant, err := agent.StreamTenant(streamID)
	require.NoError(t, err)
	return streamID[len("turn/"+tenant+"/"):]
}

func tokenHashPrefix(secret string) string {
	tok, err := gateway.NewToken(secret, "demo", "")
	if err != nil {
		panic(err)
	}
	return tok.Hash()[:8]
}
