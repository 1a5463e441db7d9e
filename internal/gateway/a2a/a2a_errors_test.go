package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// classified is err as classify makes it, without a service: Status,
// then the door's class.
func classified(err error) *a2aError {
	st := status.Convert(gateway.Status(context.Background(), zap.NewNop(), err))
	return a2aProblem(gateway.ProblemFromStatus(st), nil)
}

// TestA2AErrorRow: each class of agentflow's errors is answered as the
// door's row says, by both versions' writers — the internal class too,
// which no request can honestly provoke — with agentflow's type in the
// data, and a limit's wait.
func TestA2AErrorRow(t *testing.T) {
	for _, class := range gateway.ErrorClasses() {
		t.Run(string(class), func(t *testing.T) {
			want := Errors.Errors[class]
			e := classified(agent.Errorf(class, "refused"))

			// 1.0, answered by the door.
			rec := httptest.NewRecorder()
			writeA2AV1Error(rec, json.RawMessage(`7`), e)
			require.Equal(t, want.HTTP, rec.Code)
			var v1 struct {
				ID    int `json:"id"`
				Error struct {
					Code    int              `json:"code"`
					Message string           `json:"message"`
					Data    []map[string]any `json:"data"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v1), rec.Body.String())
			require.Equal(t, 7, v1.ID)
			require.Equal(t, want.Code, strconv.Itoa(v1.Error.Code))
			public := class.Class().Public
			if public {
				require.Contains(t, v1.Error.Message, "refused")
			} else {
				require.Contains(t, v1.Error.Message, "(reference ", "a bug's details stay in the log")
				require.NotContains(t, v1.Error.Message, "refused")
			}
			var reasons []string
			for _, d := range v1.Error.Data {
				if d["domain"] == gateway.ErrorDomain {
					reasons = append(reasons, d["reason"].(string))
				}
			}
			require.Equal(t, []string{class.Class().Type}, reasons, "agentflow's type, once")
			if class == agent.CodeRateLimited {
				require.Equal(t, "1", rec.Header().Get("Retry-After"))
				require.Equal(t, "type.googleapis.com/google.rpc.RetryInfo", v1.Error.Data[len(v1.Error.Data)-1]["@type"])
				require.Equal(t, "1s", v1.Error.Data[len(v1.Error.Data)-1]["retryDelay"])
			}
			if class == agent.CodeUnauthenticated {
				require.NotEmpty(t, rec.Header().Get("WWW-Authenticate"))
			}

			// 0.3, refused before a2a-go's handler reads it.
			rec = httptest.NewRecorder()
			writeA2AError(rec, e.status, e)
			require.Equal(t, want.HTTP, rec.Code)
			var v03 struct {
				Error struct {
					Code int            `json:"code"`
					Data map[string]any `json:"data"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v03), rec.Body.String())
			require.Equal(t, want.Code, strconv.Itoa(v03.Error.Code))
			require.Equal(t, class.Class().Type, v03.Error.Data["reason"])
			if public {
				require.Contains(t, v03.Error.Data["error"], "refused")
			} else {
				require.NotEmpty(t, v03.Error.Data["reference"])
			}

			// 0.3, answered by a2a-go's handler, which finds the code
			// by the kind the error wraps.
			require.True(t, errors.Is(e, e.kind))
			require.Equal(t, want.Code, strconv.Itoa(a2aErrorCode(e.kind)))
		})
	}
}

// TestA2AErrorNotFound: a NotFound is the kind the method says: a task
// not found where the method reads a task, invalid params where the
// thing not found is one of its params.
func TestA2AErrorNotFound(t *testing.T) {
	st := status.Convert(gateway.Status(context.Background(), zap.NewNop(), agent.Errorf(agent.CodeNotFound, "no call c1")))
	e := a2aProblem(gateway.ProblemFromStatus(st), a2a.ErrInvalidParams)
	require.ErrorIs(t, e, a2a.ErrInvalidParams)
	require.Equal(t, http.StatusOK, e.status)
	require.ErrorIs(t, a2aProblem(gateway.ProblemFromStatus(st), nil), a2a.ErrTaskNotFound)
}
