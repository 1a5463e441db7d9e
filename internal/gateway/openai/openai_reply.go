package openai

import (
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
// what the failed attempt streamed). So a model call's token and
// reasoning events are held until the call has answered — its usage
// event, which the turn logs once the call has completed, after which no
// attempt of it can run — and only the unvoided ones are released: a
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
	held      []agent.Event // the token and reasoning events of the model call in flight
	pending   string        // the last call's text, until it is known to be the answer
	answered  bool          // some of the answer was released
	usage     agent.Usage
	finish    string
	failure   *agent.TurnError
	done      bool
	content   strings.Builder // all that was released, for a reply in one piece
	reasoning strings.Builder
}

// chatDelta is what one event releases: text of the answer or of the
// reasoning, or a note on what the turn does (for a stream's comments).
type chatDelta struct {
	Content, Reasoning, Note string
}

// add takes the next event of the turn's log.
func (c *chatReply) add(e agent.Event) []chatDelta {
	if e.Child != nil {
		return nil
	}
	switch e.Kind {
	case agent.EventToken, agent.EventReasoning:
		c.held = append(c.held, e)
	case agent.EventUsage:
		return c.answeredCall(e)
	case agent.EventToolStart, agent.EventApprovalRequired, agent.EventToolEnd, agent.EventApprovalDecided,
		agent.EventQuestion, agent.EventQuestionAnswered:
		c.pending = "" // the call asked for tools: its text is not the answer
		return note(e)
	case agent.EventStepFinish:
		if e.FinishReason == agent.FinishToolCalls {
			c.pending = ""
			return nil
		}
		// Not released yet: a call that repairs the answer may follow.
		c.finish = e.FinishReason
		return nil
	case agent.EventContent:
		out := c.release()
		if !c.answered {
			out = append(out, c.answer(projection.ContentText(e.Content))...)
		}
		return out
	case agent.EventError:
		c.failure = e.Error
	case agent.EventStatus:
		return c.status(e)
	}
	return nil
}

// answeredCall releases what a model call that has answered streamed,
// without what a RETRYING status voided: its reasoning at once, its text
// once it is known to be the answer.
func (c *chatReply) answeredCall(e agent.Event) []chatDelta {
	if e.Usage != nil {
		c.usage = c.usage.Add(*e.Usage)
	}
	var text, reasoning strings.Builder
	for _, h := range c.held {
		if h.Kind == agent.EventToken {
			text.WriteString(h.Text)
		} else {
			reasoning.WriteString(h.Text)
		}
	}
	c.held = nil
	// A text still pending belonged to a call that another call followed.
	c.pending = text.String()
	if reasoning.Len() == 0 {
		return nil
	}
	c.reasoning.WriteString(reasoning.String())
	return []chatDelta{{Reasoning: reasoning.String()}}
}

func (c *chatReply) status(e agent.Event) []chatDelta {
	switch e.Status {
	case agent.StreamRetrying:
		if e.VoidFrom > 0 {
			kept := c.held[:0]
			for _, h := range c.held {
				if h.Index < e.VoidFrom {
					kept = append(kept, h)
				}
			}
			c.held = kept
		}
		return []chatDelta{{Note: fmt.Sprintf("retrying the model call (attempt %d)", e.Attempt)}}
	case agent.StreamWaitingApproval:
		return []chatDelta{{Note: "waiting for approval"}}
	case agent.StreamWaitingInput:
		return []chatDelta{{Note: "waiting for an answer"}}
	case agent.StreamCompleted:
		c.done = true
		return c.release()
	case agent.StreamFailed, agent.StreamCanceled:
		c.done = true
		if e.Error != nil {
			c.failure = e.Error
		}
		if c.failure == nil {
			c.failure = agent.TurnErrorOf(agent.Errorf(agent.CodeInternal, "the turn ended %s without an error", strings.ToLower(e.Status)))
		}
	}
	return nil
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

// note says what a tool event does, in one line.
func note(e agent.Event) []chatDelta {
	if e.Tool == nil {
		return nil
	}
	what := ""
	switch e.Kind {
	case agent.EventToolStart:
		what = "started"
	case agent.EventToolEnd:
		what = "ended " + e.Tool.Status
	case agent.EventApprovalRequired:
		what = "waits for approval"
	case agent.EventQuestion:
		what = "asks: " + gateway.QuestionOrEmpty(e.Question).Text
	case agent.EventQuestionAnswered:
		what = gateway.QuestionOrEmpty(e.Question).Outcome
	case agent.EventApprovalDecided:
		if e.Approval != nil {
			what = e.Approval.Outcome
		}
	}
	line := fmt.Sprintf("tool %s (call %s) %s", e.Tool.Name, e.Tool.CallID, what)
	return []chatDelta{{Note: strings.Join(strings.Fields(line), " ")}}
}
