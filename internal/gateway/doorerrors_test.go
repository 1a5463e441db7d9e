package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// TestClassOf: every code of agent's table has a class, and each class
// stands for itself.
func TestClassOf(t *testing.T) {
	want := map[agent.Code]agent.Code{
		agent.CodeInvalid: agent.CodeInvalid, agent.CodeModelRejected: agent.CodeInvalid, agent.CodeContextLength: agent.CodeInvalid,
		agent.CodeInvalidOutput: agent.CodeInvalid, agent.CodeGuardrailTripped: agent.CodeInvalid, agent.CodeMaxIterations: agent.CodeInvalid,
		agent.CodeTokenBudget: agent.CodeInvalid, agent.CodeUnauthenticated: agent.CodeUnauthenticated,
		agent.CodePermissionDenied: agent.CodePermissionDenied, agent.CodeNotFound: agent.CodeNotFound, agent.CodeAgentNotFound: agent.CodeNotFound,
		agent.CodeConflict: agent.CodeConflict, agent.CodeCanceled: agent.CodeConflict, agent.CodeRateLimited: agent.CodeRateLimited,
		agent.CodeBudget: agent.CodeRateLimited, agent.CodeModelFailed: agent.CodeUnavailable, agent.CodeTimeout: agent.CodeUnavailable,
		agent.CodeUnavailable: agent.CodeUnavailable, agent.CodeInternal: agent.CodeInternal,
	}
	require.ElementsMatch(t, agent.Codes(), keys(want))
	for code, class := range want {
		require.Equal(t, class, gateway.ClassOf(code), code)
	}
	for _, c := range gateway.ErrorClasses() {
		require.Equal(t, c, gateway.ClassOf(c), "a class stands for itself")
	}
}

// TestProblemRows: the gRPC API and the doors that refuse with problem
// details answer each class as their rows say, through Status and
// WriteProblem — the internal class included, which no request can
// honestly provoke; and a limit, only a limit, asks for its wait.
func TestProblemRows(t *testing.T) {
	ctx := context.Background()
	grpcRow, httpRow := gateway.GRPCErrors(), gateway.HTTPErrors()
	for _, class := range gateway.ErrorClasses() {
		t.Run(string(class), func(t *testing.T) {
			st := status.Convert(gateway.Status(ctx, zap.NewNop(), agent.Errorf(class, "refused")))
			require.Equal(t, grpcRow.Errors[class].Code, st.Code().String())
			require.Zero(t, grpcRow.Errors[class].HTTP)

			rec := httptest.NewRecorder()
			gateway.WriteProblem(rec, gateway.ProblemFromStatus(st))
			require.Equal(t, httpRow.Errors[class].HTTP, rec.Code)
			var p gateway.Problem
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
			require.Equal(t, class.Class().Type, p.Title)
			if class == agent.CodeRateLimited {
				require.Equal(t, "1", rec.Header().Get("Retry-After"))
				require.Equal(t, gateway.LimitRetryAfter, gateway.RetryAfterOf(st))
				require.True(t, p.Retryable, "a limit may be met again after its wait")
			} else {
				require.Empty(t, rec.Header().Get("Retry-After"))
				require.Zero(t, gateway.RetryAfterOf(st))
				require.Equal(t, class.Class().Retryable, p.Retryable)
			}
			if class == agent.CodeInternal || class == agent.CodeUnavailable {
				require.Contains(t, p.Detail, "(reference ")
				require.NotEmpty(t, p.Reference)
			}
		})
	}
	// A status Status made is passed on as it is.
	st := gateway.Status(ctx, zap.NewNop(), agent.Errorf(agent.CodeConflict, "taken"))
	require.Equal(t, st, gateway.Status(ctx, zap.NewNop(), st))
	// A budget for the day asks for no wait.
	budget := status.Convert(gateway.Status(ctx, zap.NewNop(), agent.Errorf(agent.CodeBudget, "spent")))
	require.Zero(t, gateway.RetryAfterOf(budget))
}

// TestSetRetryAfter: whole seconds, at least one.
func TestSetRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration
		want string
	}{{0, ""}, {time.Millisecond, "1"}, {time.Second, "1"}, {1500 * time.Millisecond, "2"}, {time.Minute, "60"}} {
		h := http.Header{}
		gateway.SetRetryAfter(h, tc.wait)
		require.Equal(t, tc.want, h.Get("Retry-After"), tc.wait)
	}
}

// TestErrorTableMarkdown: a row a door, a column a class, and "—" for a
// class a door never meets.
func TestErrorTableMarkdown(t *testing.T) {
	row := gateway.ProblemErrors("X", "")
	row.Errors[agent.CodePermissionDenied] = gateway.DoorError{}
	md := gateway.ErrorTableMarkdown([]gateway.DoorErrors{row})
	require.Equal(t, "| door | invalid | unauthenticated | permission denied | not found | conflict | limit | unavailable | internal |\n"+
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"+
		"| X | 400 | 401 | — | 404 | 409 | 429 | 503 | 500 |\n", md)
	require.Equal(t, "429 `rate_limit_error`", gateway.DoorError{HTTP: 429, Code: "rate_limit_error"}.String())
	require.Equal(t, "`NotFound`", gateway.DoorError{Code: "NotFound"}.String())
}
