package catalog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestRetentionBlock(t *testing.T) {
	kinds := testKinds(t)
	cat, err := Parse(kinds, "r.yaml", []byte("tenant: acme\nretention:\n  blobs: 30d\n  results: 36h\n"))
	require.NoError(t, err)
	require.Equal(t, &agent.Retention{Blobs: 30 * 24 * time.Hour, Results: 36 * time.Hour}, cat.Tenants[0].Retention)

	cat, err = Parse(kinds, "r.yaml", []byte("tenant: acme\n"))
	require.NoError(t, err)
	require.Nil(t, cat.Tenants[0].Retention, "no block: the stored retention stays")

	for doc, want := range map[string]string{
		"retention:\n  results: 30\n":      `r.yaml:3: retention.results: want a TTL such as 30d or 36h, not`,
		"retention:\n  results: 30y\n":     `r.yaml:3: retention.results: "30y": want a whole number of days (30d) or a duration (36h)`,
		"retention:\n  transcripts: 10s\n": `r.yaml:3: retention.transcripts: "10s": want 1m to 36500d`,
		"retention:\n  blob: 1d\n":         `blob`,
		"retention:\n  blobs: -1d\n":       `retention.blobs`,
	} {
		_, err := Parse(kinds, "r.yaml", []byte("tenant: acme\n"+doc))
		require.ErrorContains(t, err, want, doc)
	}
}
