package catalog

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/agent"
)

func TestModelLimitsBlock(t *testing.T) {
	kinds := testKinds(t)
	cat, err := Parse(kinds, "m.yaml", []byte("tenant: acme\nmodel_limits:\n  openai: requests:100/1m,concurrent:4\n  'anthropic:claude-sonnet-4-5': output_tokens:5000\n"))
	require.NoError(t, err)
	require.True(t, cat.Tenants[0].ReplaceModelLimits)
	require.Equal(t, map[string]agent.ModelLimits{
		"openai":                      {Requests: 100, RequestWindow: time.Minute, Concurrent: 4},
		"anthropic:claude-sonnet-4-5": {OutputTokens: 5000, OutputWindow: time.Minute},
	}, cat.Tenants[0].ModelLimits)

	cat, err = Parse(kinds, "m.yaml", []byte("tenant: acme\n"))
	require.NoError(t, err)
	require.False(t, cat.Tenants[0].ReplaceModelLimits, "no block: the stored limits stay")

	cat, err = Parse(kinds, "m.yaml", []byte("tenant: acme\nmodel_limits: {}\n"))
	require.NoError(t, err)
	require.True(t, cat.Tenants[0].ReplaceModelLimits, "an empty block removes them")
	require.Empty(t, cat.Tenants[0].ModelLimits)

	for doc, want := range map[string]string{
		"model_limits:\n  openai: requests:0\n":          `m.yaml:3: model_limits.openai: limit "requests": count "0": want a whole number from 1`,
		"model_limits:\n  openai: rpm:10\n":              `m.yaml:3: model_limits.openai: unknown limit "rpm"`,
		"model_limits:\n  openai: concurrent:2/1m\n":     `takes no window`,
		"model_limits:\n  'openai:': requests:1\n":       `model_limits.openai:: key "openai:": the model after "openai:" is empty`,
		"model_limits:\n  openai: 5\n":                   `m.yaml:3: model_limits.openai: want limits such as requests:100/1m`,
		"model_limits: openai\n":                         `m.yaml:2: model_limits: want a mapping`,
		"model_limits:\n  openai: requests:1/100ms\n":    `window "100ms"`,
		"model_limits:\n  openai: requests:1,requests:2": `limit "requests" is set twice`,
	} {
		_, err := Parse(kinds, "m.yaml", []byte("tenant: acme\n"+doc))
		require.ErrorContains(t, err, want, doc)
	}
}

// TestReadmeModelLimitsCatalog: the example of a tenant's own limits in
// docs/guides/costs.md loads.
func TestReadmeModelLimitsCatalog(t *testing.T) {
	page, err := docs.Page("guides/costs.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(page, "\n**A tenant's own limits.**")
	require.True(t, ok, "the page has the paragraph")
	blocks := docs.Blocks(section, "yaml")
	require.NotEmpty(t, blocks)
	c, err := Parse(testKinds(t), "costs.md", []byte(blocks[0]))
	require.NoError(t, err, blocks[0])
	require.Equal(t, map[string]agent.ModelLimits{"openai": {Requests: 100, RequestWindow: time.Minute, Concurrent: 4}}, c.Tenants[0].ModelLimits)
}
