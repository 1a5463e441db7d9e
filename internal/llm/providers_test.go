package llm_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/agentflow/agentflow/internal/llm"
)

// ownModel is a provider of the program's own that answers "hi".
type ownModel struct{}

func (ownModel) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "hi", StopReason: "stop"}}}, nil
}

func (ownModel) Call(context.Context, string, ...llms.CallOption) (string, error) { return "hi", nil }

func TestOwnProviders(t *testing.T) {
	for _, tc := range []struct {
		name, provider, err string
	}{
		{name: "a provider of its own", provider: "faq"},
		{name: "a built-in name", provider: "openai", err: "is built in"},
		{name: "not a name", provider: "My Model", err: "want lowercase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := llm.New(llm.Config{Providers: map[string]llms.Model{tc.provider: ownModel{}}})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Contains(t, r.Known(), tc.provider)
			require.NoError(t, r.Check(tc.provider+":v1"))
			resp, err := r.Generate(context.Background(), llm.Request{Model: tc.provider + ":v1", Messages: user("hello")})
			require.NoError(t, err)
			require.Equal(t, "hi", resp.Message.Content)
			require.Equal(t, tc.provider+":v1", resp.Model)
		})
	}
	r, err := llm.New(llm.Config{})
	require.NoError(t, err)
	require.ErrorContains(t, r.Check("faq:v1"), `unknown provider "faq"`)
}
