package llm

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetryAfterHeaders: how long a provider's answer asks to wait, from
// each header providers send, and nothing from headers that do not say.
func TestRetryAfterHeaders(t *testing.T) {
	now := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		status  int
		headers map[string]string
		want    time.Duration
	}{
		{"retry-after wins", 429, map[string]string{"Retry-After": "3", "X-Ratelimit-Reset-Requests": "20s"}, 3 * time.Second},
		{"retry-after-ms", 429, map[string]string{"Retry-After-Ms": "1500"}, 1500 * time.Millisecond},
		{"openai requests used up", 429, map[string]string{
			"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "6m0s",
			"X-Ratelimit-Remaining-Tokens": "5000", "X-Ratelimit-Reset-Tokens": "59.6s"}, 6 * time.Minute},
		{"openai tokens used up", 429, map[string]string{
			"X-Ratelimit-Remaining-Requests": "10", "X-Ratelimit-Reset-Requests": "6m0s",
			"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "17ms"}, 17 * time.Millisecond},
		{"no remaining header: the latest reset", 429, map[string]string{
			"X-Ratelimit-Reset-Requests": "2s", "X-Ratelimit-Reset-Tokens": "5s"}, 5 * time.Second},
		{"anthropic", 429, map[string]string{
			"Anthropic-Ratelimit-Input-Tokens-Remaining": "0",
			"Anthropic-Ratelimit-Input-Tokens-Reset":     now.Add(42 * time.Second).Format(time.RFC3339)}, 42 * time.Second},
		{"reset headers on a success", 200, map[string]string{"X-Ratelimit-Reset-Requests": "2s"}, 0},
		{"reset headers on a 500", 500, map[string]string{"X-Ratelimit-Reset-Requests": "2s"}, 0},
		{"a reset in the past", 429, map[string]string{"Anthropic-Ratelimit-Requests-Reset": now.Add(-time.Second).Format(time.RFC3339)}, 0},
		{"garbage", 429, map[string]string{"X-Ratelimit-Reset-Requests": "soon", "Retry-After-Ms": "-5"}, 0},
		{"more than a day", 429, map[string]string{"X-Ratelimit-Reset-Requests": "48h"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			require.Equal(t, tc.want, retryAfter(tc.status, h, now))
		})
	}
}
