package agent

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChannelValidate(t *testing.T) {
	for _, c := range append(slices.Clone(channels), "") {
		req := TurnRequest{TenantID: "demo", Prompt: "hi", Channel: c}
		require.NoError(t, req.Validate(), c)
		require.NoError(t, SendMessage{Prompt: "hi", Channel: c}.Validate(), c)
	}
	for _, c := range []string{"GRPC", "web", "cli", "temporal ", "a2a\n", "x-" + string(make([]byte, 300))} {
		req := TurnRequest{TenantID: "demo", Prompt: "hi", Channel: c}
		err := req.Validate()
		require.Error(t, err, c)
		require.True(t, IsCode(err, CodeInvalid), c)
		require.Contains(t, err.Error(), "channel")
		require.Contains(t, err.Error(), "want one of grpc, http, sse")
		require.Error(t, SendMessage{Prompt: "hi", Channel: c}.Validate(), c)
	}
}

func TestChannelJSON(t *testing.T) {
	// The CLI's JSON names it as channel; a result says it back.
	var req TurnRequest
	require.NoError(t, json.Unmarshal([]byte(`{"tenant_id":"demo","prompt":"hi","channel":"schedule"}`), &req))
	require.Equal(t, ChannelSchedule, req.Channel)
	b, err := json.Marshal(TurnResult{Status: StatusCompleted, Channel: ChannelA2A})
	require.NoError(t, err)
	require.Contains(t, string(b), `"channel":"a2a"`)
	// None is left out, as before channels were kept.
	b, err = json.Marshal(TurnRequest{TenantID: "demo", Prompt: "hi"})
	require.NoError(t, err)
	require.NotContains(t, string(b), "channel")
}
