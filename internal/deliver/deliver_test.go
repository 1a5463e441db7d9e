package deliver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestWebhookSigned: a receiver that checks the signature, the timestamp
// and the delivery id accepts the delivery; one holding another secret,
// or a body changed on the way, refuses it.
func TestWebhookSigned(t *testing.T) {
	var got atomic.Pointer[Payload]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := Verify("k1", r.Header, body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		require.Equal(t, r.Header.Get(HeaderID), r.Header.Get("Idempotency-Key"))
		var p Payload
		require.NoError(t, json.Unmarshal(body, &p))
		got.Store(&p)
	}))
	defer srv.Close()
	p := NewPayload("turn/demo/j1/hook", "turn/demo/j1", agent.TurnRequest{TenantID: "demo", SessionID: "s1"},
		agent.TurnResult{JobID: "j1", Status: agent.StatusCompleted, Output: "50", Metadata: agent.ResultMetadata{AgentID: "assistant"}})
	code, err := Webhook(context.Background(), srv.Client(), srv.URL, "k1", p, time.Now())
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.Equal(t, "50", got.Load().Output)
	require.Equal(t, "s1", got.Load().SessionID)

	_, err = Webhook(context.Background(), srv.Client(), srv.URL, "other", p, time.Now())
	var de *Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, 401, de.Status)
	require.True(t, de.Permanent)

	_, err = Webhook(context.Background(), srv.Client(), srv.URL, "k1", p, time.Now().Add(-time.Hour))
	require.ErrorContains(t, err, "more than 5m0s")

	body := []byte(`{"a":1}`)
	h := http.Header{}
	h.Set(HeaderTimestamp, "100")
	h.Set(HeaderSignature, Sign("k1", 100, body))
	require.NoError(t, Verify("k1", h, body, time.Unix(100, 0), time.Minute))
	require.Error(t, Verify("k1", h, []byte(`{"a":2}`), time.Unix(100, 0), time.Minute))
}

// TestWebhookAnswers: 5xx, 429 and no answer are retried; other answers,
// redirects included, fail for good, and no redirect is followed.
func TestWebhookAnswers(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer target.Close()
	for _, tt := range []struct {
		code      int
		permanent bool
	}{{500, false}, {503, false}, {429, false}, {408, false}, {400, true}, {404, true}, {302, true}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tt.code == 302 {
				http.Redirect(w, r, target.URL, http.StatusFound)
				return
			}
			w.WriteHeader(tt.code)
		}))
		_, err := Webhook(context.Background(), srv.Client(), srv.URL, "k", Payload{DeliveryID: "d"}, time.Now())
		srv.Close()
		var de *Error
		require.ErrorAs(t, err, &de, "%d", tt.code)
		require.Equal(t, tt.permanent, de.Permanent, "%d", tt.code)
	}
	require.Zero(t, hits.Load(), "a redirect was followed")
}

// TestTelegram: an answer goes to the chat in messages of at most 4096
// characters, and an error never shows the bot's token.
func TestTelegram(t *testing.T) {
	var texts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/botT0K3N/sendMessage" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"ok":false,"description":"Not Found"}`))
			return
		}
		var m struct {
			ChatID string `json:"chat_id"`
			Text   string `json:"text"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&m))
		require.Equal(t, "42", m.ChatID)
		texts = append(texts, m.Text)
		_, _ = w.Write([]byte(`{"ok":true,"result":{"message_id":1}}`))
	}))
	defer srv.Close()
	long := strings.Repeat("é", 5000)
	for _, part := range SplitTelegram(long, TelegramMaxChars) {
		require.NoError(t, Telegram{Base: srv.URL, Token: "T0K3N"}.SendMessage(context.Background(), srv.Client(), "42", part))
	}
	require.Len(t, texts, 2)
	require.Equal(t, 4096, utf8.RuneCountInString(texts[0]))
	require.Equal(t, long, texts[0]+texts[1])

	err := Telegram{Base: srv.URL, Token: "WR0NG"}.SendMessage(context.Background(), srv.Client(), "42", "x")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "WR0NG")
	err = Telegram{Base: "http://127.0.0.1:1", Token: "WR0NG"}.SendMessage(context.Background(), srv.Client(), "42", "x")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "WR0NG")
}

// FuzzSplitTelegram: the pieces put back together are the text, each
// within the limit.
func FuzzSplitTelegram(f *testing.F) {
	f.Add("hello world\nsecond line", 8)
	f.Add("", 4)
	f.Fuzz(func(t *testing.T, text string, max int) {
		if max < 2 || max > 5000 || !utf8.ValidString(text) || strings.TrimSpace(text) == "" {
			return
		}
		parts := SplitTelegram(text, max)
		require.Equal(t, text, strings.Join(parts, ""))
		for _, p := range parts {
			require.LessOrEqual(t, utf8.RuneCountInString(p), max)
			require.NotEmpty(t, p)
		}
	})
}

// TestClassify: one rule for every target's answers. A 4xx a retry
// cannot change fails at once; 408, 409, 425, 429 and 5xx are tried
// again, a 429 after the wait it asks for (Retry-After, or the Bot API's
// retry_after, bounded); the Bot API's description is the error.
func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		code      int
		header    string // Retry-After
		body      string
		permanent bool
		wait      time.Duration
		text      string
	}{
		{name: "ok", code: 200},
		{name: "bad chat", code: 400, body: `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`, permanent: true, text: "Bad Request: chat not found"},
		{name: "revoked token", code: 401, body: `{"ok":false,"error_code":401,"description":"Unauthorized"}`, permanent: true, text: "Unauthorized"},
		{name: "blocked", code: 403, body: `{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}`, permanent: true, text: "Forbidden: bot was blocked by the user"},
		{name: "not found", code: 404, body: "no such hook", permanent: true, text: "no such hook"},
		{name: "redirect", code: 302, permanent: true, text: "no body"},
		{name: "timeout", code: 408, text: "no body"},
		{name: "conflict", code: 409, body: "busy with this delivery", text: "busy with this delivery"},
		{name: "too early", code: 425, text: "no body"},
		{name: "telegram flood", code: 429, body: `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}`,
			wait: 7 * time.Second, text: "Too Many Requests: retry after 7"},
		{name: "retry-after header", code: 429, header: "30", text: "no body", wait: 30 * time.Second},
		{name: "retry-after bounded", code: 429, header: "86400", text: "no body", wait: MaxRetryAfter},
		{name: "retry-after a date", code: 429, header: "Wed, 21 Oct 2015 07:28:00 GMT", text: "no body"},
		{name: "server error", code: 502, body: "<html>bad gateway</html>", text: "<html>bad gateway</html>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("Retry-After", tt.header)
			}
			err := classify(tt.code, h, []byte(tt.body))
			if tt.code == 200 {
				require.NoError(t, err)
				return
			}
			var de *Error
			require.ErrorAs(t, err, &de)
			require.Equal(t, tt.permanent, de.Permanent)
			require.Equal(t, tt.wait, de.RetryAfter)
			require.Equal(t, tt.code, de.Status)
			require.EqualError(t, de.Err, tt.text)
		})
	}
}

// TestRefusalsScrubbed: a Telegram refusal names the Bot API's reason,
// never the token; a webhook receiver that echoes the request does not
// put the signature in the attempt's error.
func TestRefusalsScrubbed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/bot") {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"ok":false,"error_code":401,"description":"Unauthorized `+r.URL.Path+`"}`)
			return
		}
		http.Error(w, "refused: "+r.Header.Get(HeaderSignature), http.StatusForbidden)
	}))
	defer srv.Close()
	err := Telegram{Base: srv.URL, Token: "123:secret-token"}.SendMessage(context.Background(), srv.Client(), "42", "hi")
	var de *Error
	require.ErrorAs(t, err, &de)
	require.True(t, de.Permanent)
	require.EqualError(t, err, "answered 401: sendMessage: Unauthorized /bot<token>/sendMessage")

	p := NewPayload("turn/demo/j1/hook", "turn/demo/j1", agent.TurnRequest{TenantID: "demo"}, agent.TurnResult{JobID: "j1", Status: agent.StatusCompleted})
	code, err := Webhook(context.Background(), srv.Client(), srv.URL, "k1", p, time.Unix(100, 0))
	require.Equal(t, 403, code)
	require.ErrorAs(t, err, &de)
	require.True(t, de.Permanent)
	require.Contains(t, err.Error(), "refused: <signature>")
	require.NotContains(t, err.Error(), "v1=")
}

// FuzzClassify: any answer is a delivery (2xx), or an *Error that is
// permanent exactly for what no retry changes, whose wait is bounded,
// and whose text is short and valid UTF-8; it never panics.
func FuzzClassify(f *testing.F) {
	f.Add(400, "", `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`)
	f.Add(429, "5", `{"ok":false,"parameters":{"retry_after":99999999999}}`)
	f.Add(503, "-1", "\xff\xfe")
	f.Add(302, "", "")
	f.Add(429, "9223372036", `{"description":"x","parameters":{"retry_after":9223372036854775807}}`)
	f.Fuzz(func(t *testing.T, code int, retryAfter, body string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		err := classify(code, h, []byte(body))
		if code >= 200 && code < 300 {
			require.NoError(t, err)
			return
		}
		var de *Error
		require.ErrorAs(t, err, &de)
		retried := code >= 500 || code == 408 || code == 409 || code == 425 || code == 429
		require.Equal(t, !retried, de.Permanent)
		require.True(t, de.RetryAfter >= 0 && de.RetryAfter <= MaxRetryAfter, "wait %s", de.RetryAfter)
		require.True(t, utf8.ValidString(de.Err.Error()))
		require.LessOrEqual(t, len(de.Err.Error()), 210)
	})
}
