package gateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestEnvelopeConversion: the job envelope of a gRPC request becomes the
// turn's — created_at as an RFC 3339 time in UTC, the workflow state as
// JSON with its keys in order —, a timestamp out of range is refused by
// Validate rather than dropped, and a result's completed_at, error tool
// and step reach the answer.
func TestEnvelopeConversion(t *testing.T) {
	state, err := structpb.NewStruct(map[string]any{"total_steps": 10, "current_step": 5})
	require.NoError(t, err)
	at := time.Date(2024, 10, 12, 12, 30, 0, 0, time.FixedZone("CEST", 2*3600))
	in := &pb.TurnRequest{Prompt: "hi", Model: "openai:gpt-4o", WorkflowOwner: "sdutt", UserId: "u-7", RetryCount: 3,
		CreatedAt: timestamppb.New(at), Context: &pb.TurnContext{WorkflowState: state}}
	r := toTurnRequest(in, Token{Tenant: "demo"})
	require.Equal(t, []any{"openai:gpt-4o", "sdutt", "u-7", 3, "2024-10-12T10:30:00Z"}, []any{r.Model, r.WorkflowOwner, r.UserID, r.RetryCount, r.CreatedAt})
	require.Equal(t, `{"current_step":5,"total_steps":10}`, string(r.Context.WorkflowState))
	require.NoError(t, r.Validate())

	in.CreatedAt = &timestamppb.Timestamp{Seconds: 1 << 40}
	r = toTurnRequest(in, Token{Tenant: "demo"})
	require.ErrorContains(t, r.Validate(), `created_at "{seconds: 1099511627776, nanos: 0}": want an RFC 3339 time`)

	done := time.Date(2026, 11, 25, 1, 2, 3, 456000000, time.UTC)
	out := toPBResult(agent.TurnResult{Status: agent.StatusFailed, CompletedAt: done,
		Error: &agent.TurnError{Type: agent.ErrTypeMaxIterations, Message: "m", Tool: "execute_pipeline", Step: "http_request"}}, "turn/demo/j")
	require.True(t, out.GetCompletedAt().AsTime().Equal(done))
	require.Equal(t, []string{"execute_pipeline", "http_request"}, []string{out.GetError().GetTool(), out.GetError().GetStep()})
	require.Nil(t, toPBResult(agent.TurnResult{Status: agent.StatusCompleted}, "").GetCompletedAt(), "an old result without one has none")
}
