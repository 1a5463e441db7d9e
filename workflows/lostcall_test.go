package workflows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestCallFailure: a call whose last attempt was lost mid-call (timed out
// by its heartbeat or its start-to-close timeout) ends unknown, whatever
// its far side; as an error when the attempt never started, or when it
// sends nothing of its own.
func TestCallFailure(t *testing.T) {
	lost := func(tt enumspb.TimeoutType) error {
		return temporal.NewTimeoutError(tt, errors.New("no answer"))
	}
	for _, tt := range []struct {
		name     string
		notSent  bool
		err      error
		canceled bool
		want     string
	}{
		{"heartbeat lost", false, lost(enumspb.TIMEOUT_TYPE_HEARTBEAT), false, agent.ToolUnknown},
		{"start-to-close", false, lost(enumspb.TIMEOUT_TYPE_START_TO_CLOSE), false, agent.ToolUnknown},
		{"never started", false, lost(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START), false, agent.ToolError},
		{"a local tool or a program", true, lost(enumspb.TIMEOUT_TYPE_START_TO_CLOSE), false, agent.ToolError},
		{"an error", false, errors.New("connection refused"), false, agent.ToolError},
		{"cancelled", false, temporal.NewCanceledError(), true, agent.ToolCanceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, msg := callFailure(tt.notSent, tt.err, tt.canceled)
			require.Equal(t, tt.want, status)
			require.NotEmpty(t, msg)
			if status == agent.ToolUnknown {
				require.Contains(t, msg, "may or may not have taken effect")
			}
		})
	}
}
