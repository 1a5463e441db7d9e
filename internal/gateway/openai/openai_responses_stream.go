package openai

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// responseCall answers one response: it follows the turn, folds its
// events (responseFold), and writes either the response object when the
// turn has ended, or the response's events as Server-Sent Events while
// it runs, those numbered after `after` only.
type responseCall struct {
	o      openAI
	w      http.ResponseWriter
	r      *http.Request
	stream bool
	after  int64 // the sequence number after which a stream starts; -1: from the first
	fold   *responseFold

	started bool  // a stream's answer has begun: its status and headers are sent
	last    int64 // the sequence number of the last event written
}

// run follows the turn to its end, or until the client leaves or a write
// fails, and answers.
func (c *responseCall) run(follow func(ctx context.Context, send func(agent.Event) error) error) {
	c.finish(pump(c.r.Context(), follow, c, c.stream))
}

// ended: the response has its final status.
func (c *responseCall) ended() bool { return c.fold.ended }

// keepAlive writes a keep-alive comment, once the stream has begun.
func (c *responseCall) keepAlive() error {
	if !c.started {
		return nil
	}
	if _, err := c.w.Write([]byte(": keep-alive\n\n")); err != nil {
		return err
	}
	return http.NewResponseController(c.w).Flush()
}

// endless is what the follower's end without a final status is.
func (c *responseCall) endless() error {
	return agent.Errorf(agent.CodeUnavailable, "response %q ended without a final status", c.fold.resp.ID)
}

// take folds one event and, in a stream, writes the events it gives;
// flush at the end of what has arrived.
func (c *responseCall) take(e agent.Event, flush bool) error {
	out := c.fold.add(e)
	if !c.stream {
		return nil
	}
	if !c.started {
		out = append(c.begin(), out...)
	}
	for _, ev := range out {
		if ev.SequenceNumber <= c.after {
			continue
		}
		if err := c.event(ev); err != nil {
			return err
		}
	}
	if flush || c.fold.ended {
		return http.NewResponseController(c.w).Flush()
	}
	return nil
}

// begin starts a stream: its headers, and the events that open it.
func (c *responseCall) begin() []responseEvent {
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on as it comes
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(gateway.HeaderStreamID, c.fold.resp.ID)
	c.w.WriteHeader(http.StatusOK)
	c.started = true
	return c.fold.start()
}

// event writes one event of the stream: its type, and its JSON (which has
// no newline) on one data line.
func (c *responseCall) event(ev responseEvent) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	c.last = ev.SequenceNumber
	_, err = c.w.Write([]byte("event: " + ev.Type + "\ndata: " + string(b) + "\n\n"))
	return err
}

// finish answers once the turn has ended (err nil), or the follower or a
// write failed.
func (c *responseCall) finish(err error) {
	ctx := c.r.Context()
	switch {
	case ctx.Err() != nil:
		return // the client has gone; the turn goes on
	case err != nil && !c.started:
		c.o.fail(c.w, c.r, err)
	case err != nil:
		// An error event ends the stream; it is no event of the log, and
		// a client resumes after the last event it read before it.
		e := toOpenAIError(c.o.problem(ctx, err), err)
		if c.event(responseEvent{Type: "error", SequenceNumber: c.last + 1, Code: e.Code, Message: e.Message, Param: e.Param}) == nil {
			_ = http.NewResponseController(c.w).Flush()
		}
	case !c.stream:
		c.w.Header().Set(gateway.HeaderStreamID, c.fold.resp.ID)
		gateway.WriteJSON(c.w, http.StatusOK, c.fold.resp)
	}
}
