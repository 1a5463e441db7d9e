// Package deliver pushes a turn's result to where its agent says, when
// the turn ends: a webhook (a signed POST) or a Telegram chat (the Bot
// API's sendMessage). It sends one attempt; the caller (the Deliver
// activity, run by the Delivery workflow) retries, with the delivery's id
// as the idempotency key of every attempt.
//
// It imports only the domain (internal/agent): the activity that calls it
// owns the retries and the record of attempts.
//
// # Webhook
//
// The body is Payload as JSON. Three headers let the receiver check it:
//
//	Agentflow-Delivery-Id: turn/demo/job-1/hook   the same on every attempt
//	Agentflow-Timestamp:   1767225600             Unix seconds of the attempt
//	Agentflow-Signature:   v1=<hex>               HMAC-SHA256(secret, timestamp + "." + body)
//
// A receiver recomputes the signature, refuses a timestamp older than a
// few minutes (a replay), and keeps the delivery ids it has accepted (a
// retry of one it took). Idempotency-Key carries the delivery id too.
//
// # Which answers are retried
//
// One rule, in classify, for every target (a webhook's receiver and the
// Bot API alike): a 2xx answer is a delivery; no answer, a 5xx, 408
// (Request Timeout), 409 (Conflict: the receiver is busy with the same
// delivery id), 425 (Too Early) and 429 (Too Many Requests) are tried
// again, a 429 no sooner than its Retry-After header or Telegram's
// parameters.retry_after says (at most MaxRetryAfter); every other
// answer (a 4xx: a wrong chat id, a revoked bot token, a receiver
// refusing the signature; a redirect, as the client follows none, so a
// target cannot bounce a result to a host the egress allowlist does not
// name) fails the delivery at once, as trying again cannot change it.
// A Telegram refusal says the Bot API's description.
//
// # Telegram
//
// Telegram sends the answer's text in messages of at most
// TelegramMaxChars characters, split at line ends where it can.
package deliver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Headers of a webhook delivery.
const (
	HeaderID        = "Agentflow-Delivery-Id"
	HeaderTimestamp = "Agentflow-Timestamp"
	HeaderSignature = "Agentflow-Signature"
)

// Payload is the body of a webhook delivery. It holds the result, never
// a secret: the tenant's own answer, ids and status.
type Payload struct {
	DeliveryID string `json:"delivery_id"`
	// StreamID is the turn's workflow id, which its event log is read by.
	StreamID      string           `json:"stream_id"`
	JobID         string           `json:"job_id"`
	TenantID      string           `json:"tenant_id"`
	AgentID       string           `json:"agent_id,omitempty"`
	SessionID     string           `json:"session_id,omitempty"`
	Status        string           `json:"status"` // completed, failed or canceled
	Output        string           `json:"output,omitempty"`
	ResultPreview json.RawMessage  `json:"result_preview,omitempty"`
	ResultRef     string           `json:"result_ref,omitempty"`
	Error         *agent.TurnError `json:"error,omitempty"`
	CompletedAt   time.Time        `json:"completed_at"`
}

// MaxOutputBytes bounds the output a payload carries whole; a longer one
// is cut (the receiver reads the rest by result_ref or the turn's API).
const MaxOutputBytes = 256 << 10

// NewPayload is the payload of delivery id for a turn's result.
func NewPayload(id, streamID string, req agent.TurnRequest, res agent.TurnResult) Payload {
	p := Payload{
		DeliveryID: id, StreamID: streamID, JobID: res.JobID, TenantID: req.TenantID,
		AgentID: res.Metadata.AgentID, SessionID: req.SessionID, Status: res.Status,
		Output: words.Clip(res.Output, MaxOutputBytes), ResultPreview: res.ResultPreview,
		ResultRef: res.ResultRef, CompletedAt: res.CompletedAt.UTC(),
	}
	if res.Error != nil {
		p.Error = &agent.TurnError{Type: res.Error.Type, Message: res.Error.Message, Retryable: res.Error.Retryable}
	}
	return p
}

// Sign is the Agentflow-Signature of body sent at ts with secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a delivery's signature and that its timestamp is within
// tolerance of now: what a receiver in Go does with the three headers.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: not a Unix time", HeaderTimestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%s: %s from now, more than %s", HeaderTimestamp, d.Round(time.Second), tolerance)
	}
	if !hmac.Equal([]byte(h.Get(HeaderSignature)), []byte(Sign(secret, ts, body))) {
		return fmt.Errorf("%s: does not match the body", HeaderSignature)
	}
	return nil
}

// Error is a failed attempt: Permanent when retrying cannot help.
type Error struct {
	Status    int // the answer's HTTP status; 0: none
	Permanent bool
	// RetryAfter is the least wait before the next attempt that a 429
	// asked for; 0: the retry policy's.
	RetryAfter time.Duration
	Err        error
}

// MaxRetryAfter bounds the wait a receiver may ask for: the Delivery's
// longest backoff, so that its attempts still span about an hour.
const MaxRetryAfter = 10 * time.Minute

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("answered %d: %v", e.Status, e.Err)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// noRedirects is client with redirects not followed.
func noRedirects(client *http.Client) *http.Client {
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// Webhook posts p to url, signed with secret at now. client is the
// tenant's egress client (internal/egress).
func Webhook(ctx context.Context, client *http.Client, url, secret string, p Payload, now time.Time) (int, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return 0, &Error{Permanent: true, Err: fmt.Errorf("encode payload: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, &Error{Permanent: true, Err: fmt.Errorf("webhook url: %w", err)}
	}
	ts := now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentflow-deliver/1")
	req.Header.Set(HeaderID, p.DeliveryID)
	req.Header.Set("Idempotency-Key", p.DeliveryID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	sig := Sign(secret, ts, body)
	req.Header.Set(HeaderSignature, sig)
	code, err := send(noRedirects(client), req)
	// A receiver may echo the request: its answer never carries the
	// signature into the attempt's record.
	return code, scrub(err, "", sig, "<signature>")
}

// send makes one request and classifies its answer (classify).
func send(client *http.Client, req *http.Request) (int, error) {
	resp, err := client.Do(req)
	if err != nil {
		// An egress refusal is the tenant's configuration: retrying the
		// same URL cannot help. Anything else (no answer) may pass.
		return 0, &Error{Permanent: agent.IsCode(err, agent.CodeInvalid), Err: err}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, classify(resp.StatusCode, resp.Header, snippet)
}

// classify is the one rule of which answers are a delivery, which are
// tried again and which fail for good (the package's doc says it).
func classify(code int, h http.Header, body []byte) error {
	if code >= 200 && code < 300 {
		return nil
	}
	text, retryAfter := answerOf(h, body)
	e := &Error{Status: code, Err: errors.New(text)}
	switch {
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooEarly:
	case code == http.StatusTooManyRequests:
		e.RetryAfter = retryAfter // bounded by answerOf
	default:
		e.Permanent = true
	}
	return e
}

// answerOf is a short, printable account of an answer and the wait it
// asks for: the Bot API's {"description", "parameters":{"retry_after"}}
// when the body is one, else the body's start; a Retry-After header in
// seconds. (Its HTTP-date form is not read: the retry policy's backoff
// stands in.)
func answerOf(h http.Header, body []byte) (string, time.Duration) {
	// Seconds are bounded before they become a duration, which a huge
	// count would overflow.
	seconds := func(n int) time.Duration { return time.Duration(min(n, int(MaxRetryAfter/time.Second))) * time.Second }
	var wait time.Duration
	if n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && n > 0 {
		wait = seconds(n)
	}
	var bot struct {
		Description string `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if json.Unmarshal(body, &bot) == nil && bot.Description != "" {
		if bot.Parameters.RetryAfter > 0 {
			wait = seconds(bot.Parameters.RetryAfter)
		}
		return words.Clip(strings.ToValidUTF8(bot.Description, "?"), 200), wait
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), "?"))
	if s == "" {
		return "no body", wait
	}
	return words.Clip(s, 200), wait
}

// TelegramMaxChars is the most characters of one Telegram message.
const TelegramMaxChars = 4096

// SplitTelegram cuts text into messages of at most max characters (runes,
// as Telegram counts after entity parsing: no entities are sent), at the
// last line end, else space, in the second half of a piece; an empty
// text is one message saying so.
func SplitTelegram(text string, max int) []string {
	if strings.TrimSpace(text) == "" {
		return []string{"(no answer)"}
	}
	var out []string
	for utf8.RuneCountInString(text) > max {
		cut := runeOffset(text, max)
		head := text[:cut]
		if i := strings.LastIndexByte(head, '\n'); i > cut/2 {
			cut = i + 1
		} else if i := strings.LastIndexByte(head, ' '); i > cut/2 {
			cut = i + 1
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	return append(out, text)
}

// runeOffset is the byte offset of rune n of s.
func runeOffset(s string, n int) int {
	i := 0
	for off := range s {
		if i == n {
			return off
		}
		i++
	}
	return len(s)
}

// Telegram is a Bot API endpoint: Base (https://api.telegram.org, or a
// local server speaking its shape) and a bot's token.
type Telegram struct {
	Base  string
	Token string
}

// SendMessage sends one message to chat.
func (t Telegram) SendMessage(ctx context.Context, client *http.Client, chatID, text string) error {
	body, err := json.Marshal(map[string]string{"chat_id": chatID, "text": text})
	if err != nil {
		return &Error{Permanent: true, Err: err}
	}
	// The token is in the path, as the Bot API wants it: errors below are
	// written without the URL so that it never reaches a log.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(t.Base, "/")+"/bot"+t.Token+"/sendMessage", bytes.NewReader(body))
	if err != nil {
		return &Error{Permanent: true, Err: fmt.Errorf("telegram base url is not a URL")}
	}
	req.Header.Set("Content-Type", "application/json")
	_, err = send(noRedirects(client), req)
	return scrub(err, "sendMessage: ", t.Token, "<token>")
}

// scrub replaces secret in an error's text with name (*url.Error quotes
// the URL, and a receiver may echo what it was sent), prefixing it; the
// classification is kept.
func scrub(err error, prefix, secret, name string) error {
	if err == nil {
		return nil
	}
	de := &Error{Err: err}
	if e, ok := err.(*Error); ok {
		de = e
	}
	msg := de.Err.Error()
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, name)
	}
	return &Error{Status: de.Status, Permanent: de.Permanent, RetryAfter: de.RetryAfter, Err: errors.New(prefix + msg)}
}
