package openai

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// chatReply folds a turn's events, in log order, into what an OpenAI
// client reads: the answer, the reasoning, the usage and the finish
// reason, released as deltas once nothing can take them back.
//
// OpenAI's chunks cannot take text back, and a model call that fails
// part-way is retried and streams its reply again (a RETRYING status voids
// what the failed attempt streamed). So the reply renders the turn's
// projection in projection.Held mode: a model call's tokens and reasoning
// come once the call has answered, without what a retry voided, and a
// client never reads text a retry replaces, nor the same text twice.
//
// The answer (content) is the text of the turn's last model call, which
// is the turn's output: text a model call writes before it asks for tools
// is not part of it, as in the turn's result, and neither is an answer
// that did not match the turn's output schema, which the call that
// repairs it replaces. A call's text is therefore held a little longer,
// until the turn shows what follows the call: a tool call or another
// call drops it, the end of the turn releases it.
// Reasoning is released for every call. A turn that streams no tokens
// answers with its content event. Events of delegated child turns are
// not this turn's and are skipped.
type chatReply struct {
	p         *projection.Projection
	text      strings.Builder // the text of the model call in flight
	thought   strings.Builder // its reasoning
	pending   string          // the last call's text, until it is known to be the answer
	answered  bool            // some of the answer was released
	usage     agent.Usage
	finish    string
	failure   *agent.TurnError
	done      bool
	content   strings.Builder // all that was released, for a reply in one piece
	reasoning strings.Builder
	// citations are the chunks the answer cites (its citation blocks),
	// rendered as annotations (annotations.go).
	citations []agent.Citation
}

// chatDelta is what one event releases: text of the answer or of the
// reasoning, or a note on what the turn does (for a stream's comments)
// with the projection's item of the tool call it is about (Tool: its
// start, its result, or its approval or question waiting or resolved),
// which a response renders as items.
type chatDelta struct {
	Content, Reasoning, Note string
	Tool                     *projection.Item
}

// add takes the next event of the turn's log.
func (c *chatReply) add(e agent.Event) []chatDelta {
	if c.p == nil {
		c.p = projection.New(projection.Held)
	}
	var out []chatDelta
	for _, it := range c.p.Add(e) {
		out = append(out, c.item(it)...)
	}
	return out
}

func (c *chatReply) item(it projection.Item) []chatDelta {
	e := it.Event
	switch it.Kind {
	case projection.Delta:
		if it.Part == projection.Reasoning {
			c.thought.WriteString(it.Text)
		} else if e.Kind == agent.EventToken {
			c.text.WriteString(it.Text)
		}
	case projection.Usage:
		return c.answeredCall(it)
	case projection.ToolStart, projection.ToolResult, projection.InputRequired, projection.InputResolved:
		c.pending = "" // the call's step asked for tools: its text is not the answer
		return note(it)
	case projection.StepEnd:
		if it.FinishReason == agent.FinishToolCalls {
			c.pending = ""
			return nil
		}
		// Not released yet: a call that repairs the answer may follow.
		c.finish = it.FinishReason
	case projection.Answer:
		if b, ok := projection.Block(e); ok {
			if cite, ok := b.Citation(); ok {
				c.citations = append(c.citations, cite)
				return nil
			}
		}
		// What streamed without a usage event was not a call that answered.
		c.text.Reset()
		c.thought.Reset()
		out := c.release()
		if !c.answered {
			out = append(out, c.answer(projection.ContentText(e.Content))...)
		}
		return out
	case projection.Status:
		switch it.Status {
		case agent.StreamRetrying:
			return []chatDelta{{Note: fmt.Sprintf("retrying the model call (attempt %d)", e.Attempt)}}
		case agent.StreamWaitingApproval:
			return []chatDelta{{Note: "waiting for approval"}}
		case agent.StreamWaitingInput:
			return []chatDelta{{Note: "waiting for an answer"}}
		}
	case projection.End:
		c.done = true
		if it.Status == agent.StreamCompleted {
			return c.release()
		}
		c.failure = cmp.Or(it.Error, agent.TurnErrorOf(agent.Errorf(agent.CodeInternal, "the turn ended %s without an error", strings.ToLower(it.Status))))
	}
	return nil
}

// answeredCall releases what a model call that has answered streamed
// (the projection gives it once the call has answered, without what a
// retry voided): its reasoning at once, its text once it is known to be
// the answer.
func (c *chatReply) answeredCall(it projection.Item) []chatDelta {
	c.usage = it.Total
	// A text still pending belonged to a call that another call followed.
	c.pending = c.text.String()
	reasoning := c.thought.String()
	c.text.Reset()
	c.thought.Reset()
	if reasoning == "" {
		return nil
	}
	c.reasoning.WriteString(reasoning)
	return []chatDelta{{Reasoning: reasoning}}
}

// release releases the pending text as the answer.
func (c *chatReply) release() []chatDelta {
	text := c.pending
	c.pending = ""
	return c.answer(text)
}

func (c *chatReply) answer(text string) []chatDelta {
	if text == "" {
		return nil
	}
	c.answered = true
	c.content.WriteString(text)
	return []chatDelta{{Content: text}}
}

// finishReason is OpenAI's finish_reason of the answer: the last step's
// (stop, length, content_filter), stop when it gave none.
func (c *chatReply) finishReason() string {
	switch c.finish {
	case agent.FinishLength, agent.FinishContentFilter:
		return c.finish
	}
	return agent.FinishStop
}

// note says what a tool call's item does, in one line.
func note(it projection.Item) []chatDelta {
	e := it.Event
	what := ""
	switch e.Kind {
	case agent.EventToolStart:
		what = "started"
	case agent.EventToolEnd:
		what = "ended " + e.Tool.Status
	case agent.EventApprovalRequired:
		what = "waits for approval"
	case agent.EventQuestion:
		what = "asks: " + gateway.OrEmpty(e.Question).Text
	case agent.EventQuestionAnswered:
		what = gateway.OrEmpty(e.Question).Outcome
	case agent.EventApprovalDecided:
		if e.Approval != nil {
			what = e.Approval.Outcome
		}
	}
	line := fmt.Sprintf("tool %s (call %s) %s", e.Tool.Name, e.Tool.CallID, what)
	return []chatDelta{{Note: strings.Join(strings.Fields(line), " "), Tool: &it}}
}
