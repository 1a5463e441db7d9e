package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestRetentionFromEnv(t *testing.T) {
	t.Setenv(EnvRetentionBlobs, "7d")
	t.Setenv(EnvRetentionResults, "36h")
	t.Setenv(EnvRetentionInterval, "15m")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, agent.Retention{Blobs: 7 * 24 * time.Hour, Results: 36 * time.Hour}, c.Retention)
	require.Equal(t, 15*time.Minute, c.RetentionInterval)

	for env, value := range map[string]string{EnvRetentionTranscripts: "1y", EnvRetentionInterval: "30s", EnvRetentionResults: "0"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, value)
			_, err := ConfigFromEnv()
			require.ErrorContains(t, err, env)
		})
	}
}
