package gateway

import (
	"context"
	"net/http"

	"github.com/agentflow/agentflow/internal/agent"
)

// The chat doors (the AI SDK's chat, AG-UI's runs) answer one POST with
// the stream of the turn it starts, sends a message for or resumes.
// Before any of that, the same steps may refuse the request, each with a
// problem and its HTTP status, and nothing is started: the caller's
// token for the call whose work the request does, the body (bounded as
// every body is), what the door reads in it, and a slot of the tenant's
// streams for the answer.

// OpenChat opens a chat door's request: r authorized as a call of
// method, its body read (ReadBody) and handed to read, which decodes and
// checks it with the caller's context, and a slot of the tenant's streams
// held, before a turn is started or a message sent, so that every answer
// can stream. A refusal at any step is answered as a problem, and ok is
// false. Else the door answers through the request returned and calls
// release once it has.
func (a *HTTPAPI) OpenChat(w http.ResponseWriter, r *http.Request, method string, read func(ctx context.Context, body []byte) error) (_ *http.Request, release func(), ok bool) {
	r, ok = a.Authorized(w, r, method)
	if !ok {
		return nil, nil, false
	}
	ctx := r.Context()
	body, err := ReadBody(r)
	if err == nil {
		err = read(ctx, body)
	}
	if err == nil {
		ctx, release, err = a.svc.HoldStream(ctx)
	}
	if err != nil {
		a.Refuse(w, r, err)
		return nil, nil, false
	}
	return r.WithContext(ctx), release, true
}

// A ChatStream is a chat door's answer: a turn's events in the door's
// protocol (the AI SDK's chunks, AG-UI's events), written through the
// EventWriter it was made with.
type ChatStream interface {
	// Event writes the door's part of e, and reports whether that ended
	// the answer.
	Event(ctx context.Context, e agent.Event) (end bool, err error)
	// Fail ends, with err, an answer whose events ended before its end
	// (EventAnswer.Fail).
	Fail(err error)
}

// ServeChat answers r, through st, with what cs writes of the events
// follow sends (ServeEvents): until cs writes (or a keep-alive goes out)
// the answer is not begun, so that a refusal is still a problem with its
// HTTP status.
func (a *HTTPAPI) ServeChat(w http.ResponseWriter, r *http.Request, st *EventWriter, cs ChatStream,
	follow func(ctx context.Context, send func(agent.Event) error) error) {
	a.ServeEvents(w, r, st, &chatAnswer{st: st, cs: cs}, follow)
}

// chatAnswer is a ChatStream as an EventAnswer.
type chatAnswer struct {
	st    *EventWriter
	cs    ChatStream
	ended bool
}

// Events writes e, and every event waiting behind it in more, then
// flushes: once per batch the follower hands on, and not before the
// answer has begun.
func (c *chatAnswer) Events(ctx context.Context, e agent.Event, more <-chan agent.Event) error {
	c.st.Deadline()
	for {
		end, err := c.cs.Event(ctx, e)
		if err != nil {
			return err
		}
		if end {
			c.ended = true
			return c.st.Flush()
		}
		select {
		case e = <-more:
		default:
			if !c.st.Started() {
				return nil
			}
			return c.st.Flush()
		}
	}
}

func (c *chatAnswer) Comment(text string) error { return c.st.Comment(text) }
func (c *chatAnswer) Fail(err error)            { c.cs.Fail(err) }
func (c *chatAnswer) Done() bool                { return c.ended }
