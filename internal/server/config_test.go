package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTokens(t *testing.T) {
	got, err := ParseTokens(" a=demo, b=acme ,")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "demo", "b": "acme"}, got)
	for _, bad := range []string{"a", "=demo", "a="} {
		_, err := ParseTokens(bad)
		require.ErrorContains(t, err, "want token=tenant pairs", bad)
	}
}

func TestValidate(t *testing.T) {
	ok := Config{DatabaseURL: "postgres://x", TemporalAddress: "t:7233", TaskQueue: "q"}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"worker only", func(*Config) {}, ""},
		{"gateway without tokens", func(c *Config) { c.Roles = []string{RoleGateway}; c.GRPCAddr = ":1" }, "AGENTFLOW_TOKENS is empty"},
		{"gateway", func(c *Config) {
			c.Roles, c.GRPCAddr, c.Tokens = []string{RoleWorker, RoleGateway}, ":1", map[string]string{"t": "demo"}
		}, ""},
		{"unknown role", func(c *Config) { c.Roles = []string{"scheduler"} }, `unknown role "scheduler"`},
		{"stream interval too short", func(c *Config) { c.StreamInterval = 50 * time.Millisecond }, "want 100ms to 250ms"},
		{"no database", func(c *Config) { c.DatabaseURL = "" }, "DATABASE_URL is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}
