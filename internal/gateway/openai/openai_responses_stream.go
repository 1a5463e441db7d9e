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
	answer
	stream bool
	after  int64 // the sequence number after which a stream starts; -1: from the first
	fold   *responseFold

	last int64 // the sequence number of the last event written
}

// run follows the turn to its end, or until the client leaves or a write
// fails, and answers.
func (c *responseCall) run(follow func(ctx context.Context, send func(agent.Event) error) error) {
	c.finish(pump(c.r.Context(), follow, c, c.stream))
}

// ended: the response has its final status, or, whole (not a stream),
// waits for an approval nobody has decided: it answers then with the
// approval request, to be decided with an mcp_approval_response.
func (c *responseCall) ended() bool { return c.fold.ended || !c.stream && c.fold.waits() }

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
		c.begin(c.fold.resp.ID)
		out = append(c.fold.start(), out...)
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
		return c.flush()
	}
	return nil
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
	if c.failed(err, c.streamError) || c.stream {
		return
	}
	c.w.Header().Set(gateway.HeaderStreamID, c.fold.resp.ID)
	gateway.WriteJSON(c.w, http.StatusOK, c.fold.resp)
}

// streamError ends a stream with an error event; it is no event of the
// log, and a client resumes after the last event it read before it.
func (c *responseCall) streamError(p gateway.Problem, err error) {
	e := toOpenAIError(p, err)
	if c.event(responseEvent{Type: "error", SequenceNumber: c.last + 1, Code: e.Code, Message: e.Message, Param: e.Param}) == nil {
		_ = c.flush()
	}
}
