package agent

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConversationInputMemoryIdle(t *testing.T) {
	tests := []struct {
		sec     int
		wantErr string
	}{
		{0, ""},
		{3, ""},
		{604_800, ""},
		{-1, "memory_idle_sec -1: want 0 (600) to 604800"},
		{604_801, "memory_idle_sec 604801: want 0 (600) to 604800"},
	}
	for _, tt := range tests {
		err := ConversationInput{TenantID: "t", SessionID: "s", MemoryIdleSec: tt.sec}.Validate()
		if tt.wantErr == "" {
			require.NoError(t, err, tt.sec)
			continue
		}
		require.EqualError(t, err, tt.wantErr)
		require.True(t, IsCode(err, CodeInvalid))
	}
}
