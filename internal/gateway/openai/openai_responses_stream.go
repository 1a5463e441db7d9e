package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

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
	ctx, cancel := context.WithCancel(c.r.Context())
	defer cancel()
	events := make(chan agent.Event, followBuffer)
	followed := make(chan error, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		followed <- follow(ctx, func(e agent.Event) error {
			select {
			case events <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	err := c.consume(ctx, events, followed)
	cancel()
	<-ended // the follower ends with ctx, if it has not
	c.finish(err)
}

// consume takes the turn's events until the follower returns or the
// response has ended, and returns what the follower returned; or a
// failed write's error.
func (c *responseCall) consume(ctx context.Context, events <-chan agent.Event, followed <-chan error) error {
	var keepAlive <-chan time.Time
	if c.stream {
		t := time.NewTicker(chatKeepAlive)
		defer t.Stop()
		keepAlive = t.C
	}
	for {
		select {
		case e := <-events:
			if err := c.take(e, len(events) == 0); err != nil || c.fold.ended {
				return err
			}
		case err := <-followed:
			// What the follower sent before it returned is in the buffer.
			for n := len(events); n > 0; n-- {
				if werr := c.take(<-events, n == 1); werr != nil || c.fold.ended {
					return werr
				}
			}
			if err == nil && !c.fold.ended {
				err = agent.Errorf(agent.CodeUnavailable, "response %q ended without a final status", c.fold.resp.ID)
			}
			return err
		case <-keepAlive:
			if c.started {
				if _, err := c.w.Write([]byte(": keep-alive\n\n")); err != nil {
					return err
				}
				if err := http.NewResponseController(c.w).Flush(); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
