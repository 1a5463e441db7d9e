package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// identityCatalogs: the calculator of tenant care waits for a person
// unless the caller's credential makes it a supervisor; a rule routes
// supervisors to their own agent. Tenant rival is another tenant.
var identityCatalogs = []string{`
tenant: care
default_agent: desk
tools:
  - name: calculator
    kind: calculator
    approval: '!("supervisor" in caller.roles)'
rules:
  - {name: supervisors, priority: 10, when: '"supervisor" in caller.roles', agent: lead}
agents:
  - id: desk
    model: openai:gpt-4o-mini
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
  - id: lead
    model: openai:gpt-4o-mini
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
`, `
tenant: rival
default_agent: desk
tools:
  - {name: calculator, kind: calculator}
agents:
  - {id: desk, model: openai:gpt-4o-mini, tools: [calculator]}
`}

// TestIdentityComesFromTheCredential: what a request body says of its
// sender is a hint. A user token that claims the supervisor role in its
// context still waits for approval and is routed as anyone; a token that
// holds the role does not wait and is routed to the supervisors' agent;
// the turn records the caller as the token names it.
func TestIdentityComesFromTheCredential(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{
		Script: testScript, Catalogs: identityCatalogs,
		Tokens: map[string]string{"tok-bo": "care:user:bo", "tok-ana": "care:user+supervisor:ana", "tok-rival": "rival:user:eve"},
	})
	e := &env{Server: srv, t: t}
	grpcClient := pb.NewAgentServiceClient(srv.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	as := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}

	// bo claims to be a supervisor: the call waits, the rule does not
	// route, and the turn's caller is bo with bo's roles.
	claim := &pb.TurnRequest{JobId: "claim-" + testserver.RandomID(), Prompt: "What is 6 * 7?", Context: &pb.TurnContext{UserRole: "supervisor"}}
	s, err := grpcClient.Stream(as("tok-bo"), &pb.StreamRequest{Turn: claim})
	require.NoError(t, err)
	id := contract.TurnWorkflowID("care", claim.GetJobId())
	p := e.awaitPending(id)
	require.Equal(t, "calculator", p.Tool)
	var req agent.TurnRequest
	hist := e.history(id)
	require.NoError(t, json.Unmarshal(hist[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &req))
	require.Equal(t, &agent.Caller{Name: "bo", Roles: []string{"user"}, Issuer: agent.IssuerStaticToken, Subject: "bo"}, req.Caller)
	require.Equal(t, "supervisor", req.Context.UserRole, "the hint is kept, as a hint")
	_, err = turnclient.Approve(ctx, srv.Client(), id, agent.NewApprovalDecision(p.CallID, false, "no", "ana"))
	require.NoError(t, err)
	for {
		if _, err := s.Recv(); err != nil {
			break
		}
	}
	res, err := turnclient.Result(ctx, srv.Client().GetWorkflow(ctx, id, ""))
	require.NoError(t, err)
	require.Equal(t, "desk", res.Metadata.AgentID)
	require.Equal(t, agent.ToolRejected, res.Metadata.ToolCalls[0].Status)
	e.replay(id, "turn_caller_from_token")

	// ana holds the role: no approval, and the supervisors' agent.
	out, err := grpcClient.Invoke(as("tok-ana"), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "sup-" + testserver.RandomID(), Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, out.GetStatus())
	require.Equal(t, "The result is 42.", out.GetOutput())
	require.Equal(t, "lead", out.GetMetadata().GetAgentId())
	require.Equal(t, agent.ToolOK, out.GetMetadata().GetToolCalls()[0].GetStatus())
}

// TestNotifyStaysInItsTenant: a turn sends token batches only to
// workflows of its own tenant. Through the gateway another tenant's
// workflow is refused at the request; started through Temporal, the turn
// is rejected before it runs, and the other tenant's workflow receives no
// signal.
func TestNotifyStaysInItsTenant(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{
		Script: testScript, Catalogs: identityCatalogs,
		Tokens: map[string]string{"tok-rival": "rival:user:eve", "tok-bo": "care:user:bo"},
	})
	e := &env{Server: srv, t: t}
	grpcClient := pb.NewAgentServiceClient(srv.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A turn of care that waits for approval: the target.
	target := &pb.TurnRequest{JobId: "target-" + testserver.RandomID(), Prompt: "What is 6 * 7?"}
	targetStream, err := grpcClient.Stream(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-bo"), &pb.StreamRequest{Turn: target})
	require.NoError(t, err)
	targetID := contract.TurnWorkflowID("care", target.GetJobId())
	e.awaitPending(targetID)

	rival := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-rival")
	for _, notify := range []string{targetID, "conv/care/s1", "care", "turn/care", "turn//x", "process-care-42"} {
		_, err := grpcClient.Invoke(rival, &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "tell a story", Notify: notify}})
		require.Equal(t, codes.PermissionDenied, status.Code(err), "notify %q: %v", notify, err)
		require.ErrorContains(t, err, `is not a workflow of tenant "rival"`)
	}
	// Its own tenant's workflows are fine.
	out, err := grpcClient.Invoke(rival, &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "What is 2 * 3?", Notify: "conv/rival/s1"}})
	require.NoError(t, err)
	require.Equal(t, "The result is 6.", out.GetOutput())

	// Through Temporal, as the CLI or another workflow would start it.
	job := "cross-" + testserver.RandomID()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "rival", JobID: job, Prompt: "tell a story", Notify: targetID}
	run, err := srv.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(srv.TaskQueue, req), contract.AgentTurn, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusRejected, res.Status)
	require.Equal(t, agent.ErrTypePermissionDenied, res.Error.Type)
	require.Contains(t, res.Error.Message, fmt.Sprintf("notify %q is not a workflow of tenant \"rival\"", targetID))
	e.replay(run.GetID(), "turn_notify_other_tenant")

	for _, ev := range e.history(targetID) {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			require.NotEqual(t, contract.SignalNotifyTokens, a.GetSignalName(), "no batch reached the other tenant's turn")
		}
	}
	desc, err := srv.Client().DescribeWorkflowExecution(ctx, targetID, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())
	require.NoError(t, srv.Client().CancelWorkflow(ctx, targetID, ""))
	// The target's stream ends with its turn: read it to its end, so that
	// nothing of the stream outlives the test.
	for {
		if _, err := targetStream.Recv(); err != nil {
			break
		}
	}
}
