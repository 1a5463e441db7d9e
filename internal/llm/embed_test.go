package llm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/scripted"
)

func TestEmbed(t *testing.T) {
	srv, r := start(t)
	ctx := context.Background()

	texts := []string{"Refunds take five days.", "Damaged items need a photo."}
	vecs, usage, err := r.Embed(ctx, "openai:text-embedding-3-small", 0, texts)
	require.NoError(t, err)
	require.Len(t, vecs, 2)
	for i, v := range vecs {
		require.Equal(t, scripted.Embedding(texts[i], scripted.EmbeddingDims), v)
	}
	require.Equal(t, agent.Usage{PromptTokens: 13, TotalTokens: 13}, usage)

	vecs, _, err = r.Embed(ctx, "openai:text-embedding-3-small", 64, texts[:1])
	require.NoError(t, err)
	require.Len(t, vecs[0], 64, "dims asks the provider for shorter vectors")

	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name, model string
			texts       []string
			want        string
		}{
			{"no texts", "openai:e", nil, "no texts"},
			{"empty text", "openai:e", []string{"a", ""}, "text 1 is empty"},
			{"unknown provider", "cohere:e", []string{"a"}, "unknown provider"},
			{"unconfigured", "ollama:nomic-embed-text", []string{"a"}, "OLLAMA_HOST"},
		} {
			_, _, err := r.Embed(ctx, tc.model, 0, tc.texts)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%s: %v", tc.name, err)
			require.Contains(t, err.Error(), tc.want, tc.name)
		}
		a, err := llm.New(llm.Config{AnthropicAPIKey: "k"})
		require.NoError(t, err)
		_, _, err = a.Embed(ctx, "anthropic:claude", 0, []string{"a"})
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		require.Contains(t, err.Error(), "no embedding API")
	})

	t.Run("provider down", func(t *testing.T) {
		srv.FailEmbeddings(429, 1, 7)
		_, _, err := r.Embed(ctx, "openai:e", 0, []string{"a"})
		var le *llm.Error
		require.True(t, errors.As(err, &le), "%v", err)
		require.True(t, le.Retryable)
		require.Equal(t, 429, le.Status)
		require.Equal(t, 7*time.Second, le.RetryAfter)
		require.NotContains(t, err.Error(), "sk-secret-123")

		srv.FailEmbeddings(400, 1, 0)
		_, _, err = r.Embed(ctx, "openai:e", 0, []string{"a"})
		require.True(t, errors.As(err, &le), "%v", err)
		require.False(t, le.Retryable)

		// The client does not retry on its own: one failure, one request.
		before := srv.Embedded()
		srv.FailEmbeddings(503, 1, 0)
		_, _, err = r.Embed(ctx, "openai:e", 0, []string{"a"})
		require.True(t, errors.As(err, &le) && le.Retryable, "%v", err)
		_, _, err = r.Embed(ctx, "openai:e", 0, []string{"a"})
		require.NoError(t, err)
		require.Equal(t, before+1, srv.Embedded())
	})

	t.Run("ollama", func(t *testing.T) {
		o, err := llm.New(llm.Config{OllamaHost: strings.TrimSuffix(srv.URL(), "/v1")})
		require.NoError(t, err)
		vecs, _, err := o.Embed(ctx, "ollama:nomic-embed-text", 0, []string{"local"})
		require.NoError(t, err)
		require.Equal(t, scripted.Embedding("local", scripted.EmbeddingDims), vecs[0])
	})
}

func TestScriptedEmbeddingNear(t *testing.T) {
	sim := func(a, b string) float64 {
		x, y := scripted.Embedding(a, 256), scripted.Embedding(b, 256)
		var s float64
		for i := range x {
			s += float64(x[i]) * float64(y[i])
		}
		return s
	}
	require.InDelta(t, 1, sim("Refund policy", "refund POLICY!"), 1e-6)
	require.Greater(t, sim("refund policy for damaged items", "damaged items refund"), sim("refund policy for damaged items", "weather in paris"))
	require.Nil(t, scripted.Embedding(" ,. ", 8))
}
