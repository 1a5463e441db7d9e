package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Error is a failed provider call.
type Error struct {
	Model      string        // "provider:model"
	Status     int           // HTTP status; 0 when no response arrived
	RetryAfter time.Duration // the provider's Retry-After, 0 if none
	Retryable  bool          // whether the same call may succeed later
	Message    string        // what went wrong, secrets redacted
	// ContextLength says the provider refused the request as longer than
	// the model's context window: a model with a larger one may take it.
	ContextLength bool
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "call %s", e.Model)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// retryableStatus says which HTTP statuses may succeed on a later try.
func retryableStatus(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status == 529: // 529: Anthropic's "overloaded"
		return true
	case status >= 500:
		return true
	}
	return false
}

// contextLength reports whether a provider's refusal (its status, and
// its error body's code and message) says the prompt is longer than the
// model's context window. OpenAI names the error by its code; Anthropic,
// vLLM and Ollama only say it in the message.
func contextLength(status int, code, message string) bool {
	if status < 400 || status >= 500 || status == http.StatusTooManyRequests {
		return false
	}
	if code == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(message)
	for _, s := range []string{"maximum context length", "context length exceeded", "context window", "prompt is too long", "context_length_exceeded"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// maxErrorBody bounds how much of a refusal's body is read to classify
// it; the client reads the rest as it would have.
const maxErrorBody = 64 << 10

// readErrorBody reads the code and message of an error response's body,
// {"error": {"code", "message"}} (OpenAI's, and Anthropic's without a
// code), and returns a body that reads the same bytes again.
func readErrorBody(body io.ReadCloser) (code, message string, again io.ReadCloser) {
	head, err := io.ReadAll(io.LimitReader(body, maxErrorBody))
	again = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), body), body}
	if err != nil {
		return "", "", again
	}
	var e struct {
		Error struct {
			Code    any    `json:"code"` // a string, or a number from some servers
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(head, &e) != nil {
		return "", "", again
	}
	if c, ok := e.Error.Code.(string); ok {
		code = c
	}
	return code, e.Error.Message, again
}

// failure classifies an error from langchaingo using what the transport
// saw of the HTTP exchange.
func (r *Router) failure(ctx context.Context, model string, st *callState, err error) error {
	snap := st.snapshot()
	if snap.textErr != nil {
		return fmt.Errorf("call %s: stream consumer: %w", model, snap.textErr)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("call %s: %w", model, ctx.Err())
	}
	msg := r.redact(err.Error())
	if snap.status >= 400 {
		return &Error{Model: model, Status: snap.status, RetryAfter: snap.retryAfter,
			Retryable: retryableStatus(snap.status), Message: msg,
			ContextLength: contextLength(snap.status, snap.errCode, snap.errMessage)}
	}
	// No response, or one that broke off: a network failure, worth a retry.
	return &Error{Model: model, Status: snap.status, Retryable: true, Message: msg}
}

func (r *Router) redact(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}

// HasCredentials reports whether any provider is configured.
func (c Config) HasCredentials() bool {
	return c.OpenAIAPIKey != "" || c.OpenAIBaseURL != "" || c.AnthropicAPIKey != "" || c.OllamaHost != ""
}

// callState is what the transport learns about one Generate call, and
// what it adds to the request's body that langchaingo cannot send.
type callState struct {
	omitTemperature bool // drop langchaingo's always-sent "temperature": 0
	// responseFormat, when set, is the request body's response_format
	// (OutputFormat).
	responseFormat json.RawMessage
	// promptCacheKey is sent as OpenAI's "prompt_cache_key", which
	// langchaingo's openai client has no field for.
	promptCacheKey string
	// reasoningEffort is OpenAI's "reasoning_effort", which langchaingo
	// v0.1.14 never sends.
	reasoningEffort string
	watchDone       bool // look for the stream's final "data: [DONE]"
	// aliasReasoning copies "reasoning" into "reasoning_content" (see
	// aliasReasoning) in an OpenAI-compatible reply.
	aliasReasoning bool

	mu         sync.Mutex
	status     int
	retryAfter time.Duration
	sawDone    bool
	textErr    error
	// errCode and errMessage are a refusal's, from its body.
	errCode, errMessage string
}

type callSnapshot struct {
	watchDone           bool
	status              int
	retryAfter          time.Duration
	sawDone             bool
	textErr             error
	errCode, errMessage string
}

func (s *callState) snapshot() callSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return callSnapshot{watchDone: s.watchDone, status: s.status, retryAfter: s.retryAfter, sawDone: s.sawDone, textErr: s.textErr,
		errCode: s.errCode, errMessage: s.errMessage}
}

func (s *callState) setRefusal(code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errCode, s.errMessage = code, message
}

func (s *callState) setTextErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.textErr == nil {
		s.textErr = err
	}
}

func (s *callState) setResponse(status int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.retryAfter = status, retryAfter
}

func (s *callState) setDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sawDone = true
}

type callStateKey struct{}

func withCallState(ctx context.Context, st *callState) context.Context {
	return context.WithValue(ctx, callStateKey{}, st)
}

// transport observes each provider call: status and Retry-After, which
// langchaingo does not report, and the end of an SSE stream.
type transport struct {
	base http.RoundTripper
	now  func() time.Time
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(callStateKey{}).(*callState)
	if st == nil {
		return t.base.RoundTrip(req)
	}
	if st.editsBody() && req.Body != nil && req.Method == http.MethodPost {
		r2, err := editBody(req, st)
		if err != nil {
			return nil, err
		}
		req = r2
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	st.setResponse(resp.StatusCode, retryAfter(resp.StatusCode, resp.Header, t.now()))
	if resp.StatusCode >= 400 && resp.Body != nil {
		code, message, body := readErrorBody(resp.Body)
		resp.Body = body
		st.setRefusal(code, message)
	}
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	switch {
	case st.aliasReasoning && st.watchDone:
		resp.Body = newSSEReasoning(resp.Body)
	case st.aliasReasoning:
		resp.Body = &jsonReasoning{body: resp.Body}
	}
	if st.watchDone {
		resp.Body = &doneWatcher{ReadCloser: resp.Body, st: st}
	}
	return resp, nil
}

// editsBody says the call's request body needs editing.
func (s *callState) editsBody() bool {
	return s.omitTemperature || s.responseFormat != nil || s.promptCacheKey != "" || s.reasoningEffort != ""
}

// editBody returns a copy of req whose JSON body lacks the "temperature"
// member when the provider should apply its own default, has st's
// response_format, and carries the prompt-caching members langchaingo
// cannot send (callState). A body that is not a JSON object is sent as it
// is.
func editBody(req *http.Request, st *callState) (*http.Request, error) {
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) == nil {
		changed := false
		if _, ok := obj["temperature"]; ok && st.omitTemperature {
			delete(obj, "temperature")
			changed = true
		}
		if st.responseFormat != nil {
			obj["response_format"] = st.responseFormat
			changed = true
		}
		if st.promptCacheKey != "" {
			obj["prompt_cache_key"], _ = json.Marshal(st.promptCacheKey) // a string always encodes
			changed = true
		}
		if st.reasoningEffort != "" {
			obj["reasoning_effort"], _ = json.Marshal(st.reasoningEffort)
			changed = true
		}
		if changed {
			if b, err := json.Marshal(obj); err == nil {
				body = b
			}
		}
	}
	r2 := req.Clone(req.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r2, nil
}

// retryAfter is how long a provider's answer asks the caller to wait:
// its Retry-After, else OpenAI's retry-after-ms, else, on a 429, the
// latest reset of the rate limits it says are used up (OpenAI's
// x-ratelimit-reset-requests and -tokens, durations such as "6m0s";
// Anthropic's anthropic-ratelimit-*-reset, RFC 3339 times), or of all
// those it sends when it says none is used up.
func retryAfter(status int, h http.Header, now time.Time) time.Duration {
	if d := parseRetryAfter(h.Get("Retry-After"), now); d > 0 {
		return d
	}
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("Retry-After-Ms")), 64); err == nil && ms > 0 && ms < 1e12 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	if status != http.StatusTooManyRequests {
		return 0
	}
	var spent, all time.Duration
	for _, l := range rateLimitHeaders {
		reset := h.Get(l.reset)
		if reset == "" {
			continue
		}
		var d time.Duration
		if l.rfc3339 {
			if at, err := time.Parse(time.RFC3339, strings.TrimSpace(reset)); err == nil {
				d = at.Sub(now)
			}
		} else if v, err := time.ParseDuration(strings.TrimSpace(reset)); err == nil {
			d = v
		}
		if d <= 0 || d > maxRateLimitReset {
			continue
		}
		all = max(all, d)
		if strings.TrimSpace(h.Get(l.remaining)) == "0" {
			spent = max(spent, d)
		}
	}
	if spent > 0 {
		return spent
	}
	return all
}

// maxRateLimitReset bounds a reset header believed: a day.
const maxRateLimitReset = 24 * time.Hour

// rateLimitHeaders are the providers' rate-limit headers: how much of a
// limit is left, and when it is whole again.
var rateLimitHeaders = []struct {
	remaining, reset string
	rfc3339          bool
}{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", false},
	{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", false},
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", true},
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset", true},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", true},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset", true},
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		switch {
		case !(secs > 0): // also NaN
			return 0
		case secs >= float64(math.MaxInt64)/float64(time.Second):
			// Converting a float beyond int64 gives any value, often a
			// negative one: "1e300" and "Inf" mean "a very long time".
			return math.MaxInt64
		}
		return time.Duration(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		if d := at.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

var doneMarker = []byte("[DONE]")

// doneWatcher notes when the SSE stream's "[DONE]" marker passes, also
// when it is split across reads, and reads the rest of a finished stream
// before closing it.
type doneWatcher struct {
	io.ReadCloser
	st   *callState
	tail []byte
	done bool
	eof  bool
}

func (w *doneWatcher) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if n > 0 && !w.done {
		buf := append(w.tail, p[:n]...)
		if bytes.Contains(buf, doneMarker) {
			w.done = true
			w.st.setDone()
		}
		keep := len(doneMarker) - 1
		if len(buf) > keep {
			buf = buf[len(buf)-keep:]
		}
		w.tail = append(w.tail[:0], buf...)
	}
	if errors.Is(err, io.EOF) {
		w.eof = true
	}
	return n, err
}

// Bounds on reading what follows "[DONE]" when a finished stream is
// closed: the blank line and the chunked body's end, normally already on
// their way.
const (
	maxDrain  = 4 << 10
	drainWait = 2 * time.Second
)

// Close reads the end of a stream that sent "[DONE]" before closing it.
// The client stops reading at the marker, and Go's transport closes a
// connection whose body is closed before its end, so without this a
// stream whose last bytes arrived a moment after the marker cost the next
// call a new connection. A server that keeps the stream open after
// "[DONE]" is cut off after drainWait.
func (w *doneWatcher) Close() error {
	if w.done && !w.eof {
		stop := time.AfterFunc(drainWait, func() { _ = w.ReadCloser.Close() })
		_, _ = io.Copy(io.Discard, io.LimitReader(w.ReadCloser, maxDrain))
		stop.Stop()
	}
	return w.ReadCloser.Close()
}
