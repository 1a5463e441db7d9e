package openai

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// TestOpenAIErrorRow: each class is answered with the status and type of
// the door's row — the internal class too, which no request can
// honestly provoke — and a limit with its wait, which OpenAI's clients
// honour (x-should-retry, Retry-After).
func TestOpenAIErrorRow(t *testing.T) {
	for _, class := range gateway.ErrorClasses() {
		t.Run(string(class), func(t *testing.T) {
			err := agent.Errorf(class, "refused")
			p := gateway.ProblemFromStatus(status.Convert(gateway.Status(context.Background(), zap.NewNop(), err)))
			rec := httptest.NewRecorder()
			writeOpenAIError(rec, p, err)
			want := Errors.Errors[class]
			require.Equal(t, want.HTTP, rec.Code)
			var e struct {
				Error openAIError `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
			require.Equal(t, want.Code, e.Error.Type)
			limit := class == agent.CodeRateLimited
			require.Equal(t, limit || class.Class().Retryable, rec.Header().Get("X-Should-Retry") == "true")
			require.Equal(t, limit, rec.Header().Get("Retry-After") == "1")
		})
	}
}
