package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/sse"
)

// The doors whose clients are ours to write (SSE: there is no official
// one; the gateway's own internal/sse reader reads as a browser does) or
// Go libraries (coder/websocket, openai-go).

// maxResumes bounds how often a client goes on after its stream broke,
// so that a door that never answers fails the run instead of its time.
const maxResumes = 20

// resumeDelay is how long a client waits before it goes on after its
// stream broke: an EventSource's default is 3 s, fetch-based clients
// retry at once; the balancer has moved by then either way.
const resumeDelay = 200 * time.Millisecond

// httpClient is a client of its own for one run, so that no connection
// outlives it.
func httpClient() *http.Client { return &http.Client{Transport: &http.Transport{}} }

// sseClient starts the turn with POST /v1/turns:stream and, when the
// stream breaks, follows it on GET /v1/turn/{tenant}/{job}/events:stream
// with Last-Event-ID, as an EventSource does. A break before any event
// sends the start again: the same job id starts nothing new.
func sseClient(ctx context.Context, _ *env, c doorCall) (doorRead, error) {
	hc := httpClient()
	defer hc.CloseIdleConnections()
	start, err := json.Marshal(map[string]string{"job_id": c.job, "session_id": c.job, "agent_id": "calc", "prompt": c.prompt})
	if err != nil {
		return doorRead{}, err
	}
	r := newLogReader()
	read := doorRead{job: c.job, session: c.job}
	err = resume(ctx, &read, "stream", func(int) (bool, error) {
		var req *http.Request
		var err error
		if r.last == 0 {
			req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/turns:stream", bytes.NewReader(start))
		} else {
			req, err = http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/turn/"+tenant+"/"+c.job+"/events:stream", nil)
			if err == nil {
				req.Header.Set("Last-Event-ID", strconv.FormatInt(r.last, 10))
			}
		}
		if err != nil {
			return true, err
		}
		err = readSSE(hc, req, func(ev sse.Event) error {
			var e agent.Event
			if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
				return fmt.Errorf("event %s: %w", ev.ID, err)
			}
			if ev.ID != strconv.FormatInt(e.Index, 10) {
				r.flaws = append(r.flaws, fmt.Sprintf("event id %s for event %d", ev.ID, e.Index))
			}
			r.add(e)
			return nil
		})
		return r.ended(), ignoreIf(r.ended(), err)
	})
	read.text, read.flaws = r.text(), r.flaws
	return read, err
}

// readSSE sends req and hands each event of its answer's stream to fn,
// until the stream ends or breaks.
func readSSE(hc *http.Client, req *http.Request, fn func(sse.Event) error) error {
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", sse.ContentType)
	if req.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, data)
	}
	rd := sse.NewReader(resp.Body)
	for {
		ev, err := rd.Next()
		if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// wsClient starts the turn with the socket's start command and, when
// the socket breaks, opens another and follows the turn after the last
// event it has (follow, by index).
func wsClient(ctx context.Context, _ *env, c doorCall) (doorRead, error) {
	url := "ws" + strings.TrimPrefix(c.base, "http") + "/v1/socket"
	streamID := "turn/" + tenant + "/" + c.job
	r := newLogReader()
	read := doorRead{job: c.job, session: c.job}
	err := resume(ctx, &read, "socket", func(attempt int) (bool, error) {
		cmd := map[string]any{"type": "start", "id": strconv.Itoa(attempt), "job_id": c.job, "session_id": c.job, "agent_id": "calc", "prompt": c.prompt}
		if r.last > 0 {
			cmd = map[string]any{"type": "follow", "id": strconv.Itoa(attempt), "stream_id": streamID, "after_index": r.last}
		}
		err := readSocket(ctx, url, cmd, r)
		return r.ended(), ignoreIf(r.ended(), err)
	})
	read.text, read.flaws = r.text(), r.flaws
	return read, err
}

// readSocket opens a socket, sends cmd and reads events into r until the
// turn ends or the socket breaks.
func readSocket(ctx context.Context, url string, cmd map[string]any, r *logReader) error {
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}, Subprotocols: []string{"agentflow.v1"},
		HTTPClient: httpClient(),
	})
	if err != nil {
		return err
	}
	defer func() { _ = conn.CloseNow() }()
	data, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if err := conn.Write(ctx, websocket.MessageText, data); err != nil {
		return err
	}
	for !r.ended() {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		// Replies have a type, events a kind.
		var msg struct {
			Type    string          `json:"type"`
			Problem json.RawMessage `json:"problem"`
		}
		if err := json.Unmarshal(data, &msg); err != nil {
			return fmt.Errorf("socket message: %w", err)
		}
		switch msg.Type {
		case "ack":
			continue
		case "error":
			return fmt.Errorf("socket error: %s", msg.Problem)
		}
		var e agent.Event
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("socket event: %w", err)
		}
		r.add(e)
	}
	return nil
}

// openAIClient streams a chat completion with openai-go and, when the
// stream breaks, sends the request again with the same Idempotency-Key
// (the turn's job id) and X-Agentflow-Session, which attach to the turn
// the first request started: its answer streams again from the start.
// The door holds a model call's text until the call has answered (a
// chunk cannot be taken back), so a stream cut while the answer is being
// written has none of it: the text of every stream read, one after the
// other, must be the answer once.
func openAIClient(ctx context.Context, _ *env, c doorCall) (doorRead, error) {
	hc := httpClient()
	defer hc.CloseIdleConnections()
	cl := openai.NewClient(option.WithBaseURL(c.base+"/v1"), option.WithAPIKey(token), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	params := openai.ChatCompletionNewParams{Model: "calc", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(c.prompt)}}
	read := doorRead{job: c.job, session: c.job}
	var all strings.Builder
	err := resume(ctx, &read, "stream", func(int) (bool, error) {
		stream := cl.Chat.Completions.NewStreaming(ctx, params,
			option.WithHeader("Idempotency-Key", c.job), option.WithHeader("X-Agentflow-Session", c.job))
		var text strings.Builder
		finished := ""
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				text.WriteString(ch.Delta.Content)
				if ch.FinishReason != "" {
					finished = ch.FinishReason
				}
			}
		}
		err := stream.Err()
		_ = stream.Close()
		all.WriteString(text.String())
		if err != nil {
			return false, err
		}
		if finished == "" {
			return false, errors.New("the stream ended without a finish reason")
		}
		read.text = text.String()
		if all.String() != text.String() {
			read.flaws = append(read.flaws, fmt.Sprintf("the cut streams had text %q before the last one's %q: the answer twice",
				strings.TrimSuffix(all.String(), text.String()), text.String()))
		}
		if finished != "stop" {
			read.flaws = append(read.flaws, "finish reason "+finished)
		}
		return true, nil
	})
	return read, err
}

// resume calls try until it reports the turn read (or a failure that a
// new attempt would not mend), pausing before each attempt after the
// first and counting it in read.resumed. what names the connection in
// the error after maxResumes breaks.
func resume(ctx context.Context, read *doorRead, what string, try func(attempt int) (done bool, err error)) error {
	var lastErr error
	for attempt := range maxResumes {
		if attempt > 0 {
			read.resumed++
			if err := pause(ctx, resumeDelay); err != nil {
				return fmt.Errorf("%w (last error %v)", err, lastErr)
			}
		}
		done, err := try(attempt)
		if done {
			return err
		}
		lastErr = err
	}
	return fmt.Errorf("the %s broke %d times (last error %v)", what, maxResumes, lastErr)
}

// ignoreIf is err, or nil once the turn is read: a connection that
// broke after the end lost nothing.
func ignoreIf(read bool, err error) error {
	if read {
		return nil
	}
	return err
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
