package governor

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func TestParseLimits(t *testing.T) {
	l, err := ParseLimits(" openai=requests:500/1m, input_tokens:200000/1m,output_tokens:50000/30s,concurrent:20 ; anthropic:claude-sonnet-4-5=requests:50;ollama=concurrent:2;")
	require.NoError(t, err)
	require.Equal(t, []string{"anthropic:claude-sonnet-4-5", "ollama", "openai"}, l.Keys())

	for _, tc := range []struct {
		model, key string
		lim        store.GovernorLimits
	}{
		{"openai:gpt-4o", "openai", store.GovernorLimits{Requests: 500, RequestWindow: time.Minute, InputTokens: 200000,
			InputWindow: time.Minute, OutputTokens: 50000, OutputWindow: 30 * time.Second, Concurrent: 20}},
		{"anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5", store.GovernorLimits{Requests: 50, RequestWindow: time.Minute}},
		{"ollama:llama3", "ollama", store.GovernorLimits{Concurrent: 2}},
	} {
		key, lim, ok := l.For(tc.model)
		require.True(t, ok, tc.model)
		require.Equal(t, tc.key, key, tc.model)
		require.Equal(t, tc.lim, lim, tc.model)
	}
	// A model of a provider that only has a model's entry is not governed.
	_, _, ok := l.For("anthropic:claude-haiku-4-5")
	require.False(t, ok)

	empty, err := ParseLimits("  ")
	require.NoError(t, err)
	require.True(t, empty.Empty())
	_, _, ok = empty.For("openai:gpt-4o")
	require.False(t, ok)
}

func TestParseLimitsRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"openai=requests:0", `key "openai": limit "requests": count "0": want a whole number from 1`},
		{"openai=requests:0/1m", `a limit of zero would stop every call`},
		{"openai=concurrent:-3", `limit "concurrent": count "-3"`},
		{"openai=requests:ten", `count "ten"`},
		{"openai=requests:10/0s", `window "0s": want a duration from 1s to 24h0m0s`},
		{"openai=requests:10/500ms", `window "500ms"`},
		{"openai=requests:10/2d", `window "2d"`},
		{"openai=concurrent:2/1m", `limit "concurrent" counts calls in flight and takes no window`},
		{"openai=rpm:10", `unknown limit "rpm" (names: requests, input_tokens, output_tokens, concurrent)`},
		{"openai=requests", `limit "requests": want <name>:<count>[/<window>]`},
		{"openai=requests:1,requests:2", `limit "requests" is set twice`},
		{"openai", `entry "openai": want <provider>[:<model>]=<limit>`},
		{"openai=", `entry "openai=": want`},
		{"=requests:1", `key "": want a provider`},
		{"openai:=requests:1", `key "openai:": the model after "openai:" is empty`},
		{"open ai=requests:1", `key "open ai": a key has no spaces`},
		{"openai=requests:1;openai=concurrent:1", `key "openai" is declared twice`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseLimits(tc.in)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, strings.HasPrefix(err.Error(), EnvLimits+": "), err.Error())
		})
	}
}

// FuzzParseLimits: whatever the variable says, parsing returns limits or
// an error, never panics, and every limit it returns is positive with a
// window in bounds.
func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{
		"openai=requests:500/1m,input_tokens:200000/1m,output_tokens:50000/30s,concurrent:20",
		"anthropic:claude=requests:50;ollama=concurrent:2", "openai=requests:0", "a=b:c/d", ";;", "=", "x=requests:1/1h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLimits(s)
		if err != nil {
			return
		}
		for _, key := range l.Keys() {
			_, lim, ok := l.For(key)
			require.True(t, ok)
			require.GreaterOrEqual(t, lim.Requests, 0)
			require.GreaterOrEqual(t, lim.InputTokens, int64(0))
			require.GreaterOrEqual(t, lim.OutputTokens, int64(0))
			require.GreaterOrEqual(t, lim.Concurrent, 0)
			for _, c := range []struct {
				n int64
				w time.Duration
			}{{int64(lim.Requests), lim.RequestWindow}, {lim.InputTokens, lim.InputWindow}, {lim.OutputTokens, lim.OutputWindow}} {
				if c.n > 0 {
					require.True(t, c.w >= agent.MinLimitWindow && c.w <= agent.MaxLimitWindow, "window %s", c.w)
				}
			}
		}
	})
}
