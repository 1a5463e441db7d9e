// Package projection is the one view of a turn's events that every door
// of the gateway renders: the log's events, in order, as a typed sequence
// of what a client shows (text, reasoning and tool-argument deltas in
// parts that open and close; a retried model call as a reset; approvals
// and questions as input the turn waits for; usage; the end), and the
// values the doors share (a question's data, a content block's text).
//
// It imports only the domain (internal/agent): it must not import the
// gateway's core or a door, so that every door renders the same view.
//
// A door feeds a Projection the events it follows and renders the items
// it returns in its protocol's shape; what the items mean, and when parts
// open and close, is decided here once.
package projection

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/agentflow/agentflow/internal/agent"
)

// Kind is what an Item says.
type Kind int

// Kinds of Item.
const (
	// StepStart: a step (one model call and the tools it calls) begins.
	StepStart Kind = iota + 1
	// StepEnd: the step ended; FinishReason is its model call's.
	StepEnd
	// PartStart opens a text or reasoning part (Part, PartID): the
	// deltas that follow are its own until PartEnd.
	PartStart
	// Delta is text or reasoning (Part, PartID, Text).
	Delta
	// PartEnd closes the open part (Part, PartID): something else follows.
	PartEnd
	// ToolOpen announces a call (Tool), once, before its arguments.
	ToolOpen
	// ToolArgs is a delta of a call's arguments as the model streams them
	// (Tool, Text).
	ToolArgs
	// ToolInput is a call's complete arguments (Tool.Args), once: at its
	// approval request, its start or its end, whichever comes first.
	// ArgsStreamed says whether ToolArgs carried them before.
	ToolInput
	// ToolStart: a call starts to run (after its approval, when it needed
	// one); its ToolInput came before.
	ToolStart
	// ToolProgress is a message of a call that runs (Tool.Message).
	ToolProgress
	// ToolResult is a call's end (Tool.Status, Tool.Output).
	ToolResult
	// InputRequired: the turn waits for a decision, an approval of a call
	// (Event.Kind approval_required) or an answer to its question
	// (Event.Kind question; Question).
	InputRequired
	// InputResolved: an approval decided (Event.Approval) or a question
	// answered (Question).
	InputResolved
	// Reset, in Live mode, takes back every part and argument delta the
	// step has given since its StepStart, as a client that shows the
	// step drops them (the AI SDK's reset-step): no PartEnd closes the
	// part that was open, and no StepStart follows. What of the step the
	// log still holds (its streamed events before VoidFrom, the first
	// index of the failed attempts) is given again right after it; then
	// the retry streams its reply. A RETRYING status that voids nothing
	// (no VoidFrom) is no Reset.
	Reset
	// Custom is a tool's custom event (Event.Custom).
	Custom
	// Steered is a message of the turn's conversation that the turn took
	// in while it ran (Event.Message.ID, Text: its prompt), which the
	// model reads before its next call; it comes between steps.
	Steered
	// Answer is a content block of the answer (Event.Content: text, JSON,
	// an image or a file).
	Answer
	// Usage is a model call's token usage (Usage) and the turn's so far
	// (Total).
	Usage
	// Status is a status the turn logged that is not its end (Status):
	// running, waiting for approval or input, or, in Held mode, retrying
	// a model call (Event.Attempt).
	Status
	// End: the turn ended with Status (completed, failed, canceled),
	// Error when it failed or was canceled; Total is its usage,
	// FinishReason its last step's, OpenCalls the calls announced that
	// never got their input.
	End
)

// Part is the kind of a part: its text is the answer, or the model's
// reasoning.
type Part string

// Parts.
const (
	Text      Part = "text"
	Reasoning Part = "reasoning"
)

// Item is one element of the projection.
type Item struct {
	Kind Kind
	// Event is the log event the item comes from (its index names parts,
	// as PartID does).
	Event agent.Event
	Part  Part
	// PartID is "<kind>-<index of the part's first event>": the same log
	// projects to the same ids every time it is read. A text part that
	// comes from the answer's content block (nothing was streamed) is
	// "content-<index>".
	PartID       string
	Text         string
	Tool         *agent.ToolEvent
	ArgsStreamed bool
	Question     *agent.QuestionEvent
	Usage, Total agent.Usage
	Status       string
	Error        *agent.TurnError
	FinishReason string
	VoidFrom     int64
	OpenCalls    []string
}

// Mode is how a Projection treats what a model call streams.
type Mode int

const (
	// Held holds what a model call streams until the call has answered
	// (its usage event, after which no attempt of it can run) and then
	// gives only what agent.Unvoided keeps: a client that cannot take
	// anything back never shows text a retry replaces, nor the same text
	// twice. Text arrives a model call at a time.
	Held Mode = iota
	// Live gives every delta as it is logged, and a retry as Reset. Every
	// delta is given inside a step, so that a Reset takes back no more
	// than the step: a log from before step events, whose deltas come
	// outside one, gets a StepStart before a model call's first delta,
	// and that step ends (with no StepEnd) when the call answers.
	Live
)

// Projection projects one turn's events, in log order. Events of
// delegated child turns are not the turn's own and are skipped.
type Projection struct {
	mode Mode
	held []agent.Event
	// The open part, its kind and id.
	part   Part
	partID string
	// Calls: opened (ToolOpen given), argued (ToolArgs given), input
	// (ToolInput given).
	opened, argued, input map[string]bool
	wroteText             bool
	firstText             int64 // the index of the first text delta given
	// Live: a step is open (inStep; implicit when the projection began
	// it, not the log) and the streamed events it has given (stepped),
	// of which a Reset gives again those it does not void.
	inStep, implicit bool
	stepped          []agent.Event
	finish           string
	total            agent.Usage
	failure          *agent.TurnError
}

// New is a projection of one turn in mode.
func New(mode Mode) *Projection {
	return &Projection{mode: mode, opened: map[string]bool{}, argued: map[string]bool{}, input: map[string]bool{}}
}

// Total is the turn's usage so far.
func (p *Projection) Total() agent.Usage { return p.total }

// WroteText reports whether a text part has been given.
func (p *Projection) WroteText() bool { return p.wroteText }

// Add projects the next event of the turn's log.
func (p *Projection) Add(e agent.Event) []Item {
	if e.Child != nil {
		return nil
	}
	switch e.Kind {
	case agent.EventToken, agent.EventReasoning, agent.EventToolArgsDelta:
		if p.mode == Held {
			p.held = append(p.held, e)
			return nil
		}
		return p.live(e)
	case agent.EventUsage:
		out := p.release(nil)
		if p.implicit {
			p.endStep()
		}
		var u agent.Usage
		if e.Usage != nil {
			u = *e.Usage
		}
		p.total = p.total.Add(u)
		return append(out, Item{Kind: Usage, Event: e, Usage: u, Total: p.total})
	case agent.EventStepStart:
		out := p.closePart(p.release(nil))
		p.endStep()
		p.inStep = true
		return append(out, Item{Kind: StepStart, Event: e})
	case agent.EventStepFinish:
		p.finish = e.FinishReason
		p.endStep()
		return append(p.closePart(p.release(nil)), Item{Kind: StepEnd, Event: e, FinishReason: e.FinishReason})
	case agent.EventToolStart, agent.EventApprovalRequired, agent.EventToolEnd, agent.EventToolProgress, agent.EventApprovalDecided:
		return p.tool(e)
	case agent.EventQuestion, agent.EventQuestionAnswered:
		if e.Tool == nil {
			return nil
		}
		kind := InputRequired
		if e.Kind == agent.EventQuestionAnswered {
			kind = InputResolved
		}
		q := cmp.Or(e.Question, &agent.QuestionEvent{})
		return append(p.closePart(p.release(nil)), Item{Kind: kind, Event: e, Tool: e.Tool, Question: q})
	case agent.EventCustom:
		if e.Custom == nil {
			return nil
		}
		return append(p.closePart(p.release(nil)), Item{Kind: Custom, Event: e})
	case agent.EventSteered:
		if e.Message == nil {
			return nil
		}
		return append(p.closePart(p.release(nil)), Item{Kind: Steered, Event: e, Text: e.Text})
	case agent.EventContent:
		out := p.release(nil)
		if b, ok := Block(e); !ok || b.Type != agent.BlockText {
			out = p.closePart(out) // an image or a file: a part of its own
		} else if b.Text != "" && !p.wroteText {
			out = p.delta(out, e, Text, "content-"+strconv.FormatInt(e.Index, 10), b.Text)
		}
		return append(out, Item{Kind: Answer, Event: e})
	case agent.EventError:
		p.failure = e.Error
	case agent.EventStatus:
		return p.status(e)
	}
	return nil
}

// live projects a streamed event in Live mode, inside a step.
func (p *Projection) live(e agent.Event) []Item {
	var out []Item
	if !p.inStep {
		out = append(p.closePart(out), Item{Kind: StepStart, Event: e})
		p.inStep, p.implicit = true, true
	}
	p.stepped = append(p.stepped, e)
	return p.streamed(out, e)
}

// endStep forgets the open step.
func (p *Projection) endStep() {
	p.inStep, p.implicit, p.stepped = false, false, nil
}

// release projects the held events of the model call that has answered.
func (p *Projection) release(out []Item) []Item {
	for _, h := range p.held {
		out = p.streamed(out, h)
	}
	p.held = nil
	return out
}

// streamed projects a token, reasoning or argument delta.
func (p *Projection) streamed(out []Item, e agent.Event) []Item {
	id := strconv.FormatInt(e.Index, 10)
	switch e.Kind {
	case agent.EventToken:
		return p.delta(out, e, Text, "text-"+id, e.Text)
	case agent.EventReasoning:
		return p.delta(out, e, Reasoning, "reasoning-"+id, e.Text)
	case agent.EventToolArgsDelta:
		if e.Tool == nil {
			return out
		}
		out = p.open(p.closePart(out), e, e.Tool)
		if e.Tool.ArgsDelta != "" && !p.input[e.Tool.CallID] {
			p.argued[e.Tool.CallID] = true
			out = append(out, Item{Kind: ToolArgs, Event: e, Tool: e.Tool, Text: e.Tool.ArgsDelta})
		}
	}
	return out
}

// delta adds text to the open part of kind, opening one (id) if none is.
func (p *Projection) delta(out []Item, e agent.Event, kind Part, id, text string) []Item {
	if text == "" {
		return out
	}
	if p.partID != "" && p.part != kind {
		out = p.closePart(out)
	}
	if p.partID == "" {
		p.part, p.partID = kind, id
		out = append(out, Item{Kind: PartStart, Event: e, Part: kind, PartID: id})
	}
	if kind == Text && !p.wroteText {
		p.wroteText, p.firstText = true, e.Index
	}
	return append(out, Item{Kind: Delta, Event: e, Part: kind, PartID: p.partID, Text: text})
}

// closePart ends the open part.
func (p *Projection) closePart(out []Item) []Item {
	if p.partID == "" {
		return out
	}
	out = append(out, Item{Kind: PartEnd, Part: p.part, PartID: p.partID})
	p.part, p.partID = "", ""
	return out
}

// open announces a call, once.
func (p *Projection) open(out []Item, e agent.Event, t *agent.ToolEvent) []Item {
	if p.opened[t.CallID] {
		return out
	}
	p.opened[t.CallID] = true
	return append(out, Item{Kind: ToolOpen, Event: e, Tool: t})
}

// inputOf gives a call's complete arguments, once.
func (p *Projection) inputOf(out []Item, e agent.Event, t *agent.ToolEvent) []Item {
	out = p.open(out, e, t)
	if p.input[t.CallID] {
		return out
	}
	p.input[t.CallID] = true
	return append(out, Item{Kind: ToolInput, Event: e, Tool: t, ArgsStreamed: p.argued[t.CallID]})
}

// tool projects a tool call's events.
func (p *Projection) tool(e agent.Event) []Item {
	t := e.Tool
	if t == nil {
		return nil
	}
	out := p.closePart(p.release(nil))
	switch e.Kind {
	case agent.EventToolStart:
		out = append(p.inputOf(out, e, t), Item{Kind: ToolStart, Event: e, Tool: t})
	case agent.EventApprovalRequired:
		out = append(p.inputOf(out, e, t), Item{Kind: InputRequired, Event: e, Tool: t})
	case agent.EventApprovalDecided:
		out = append(out, Item{Kind: InputResolved, Event: e, Tool: t})
	case agent.EventToolProgress:
		out = append(out, Item{Kind: ToolProgress, Event: e, Tool: t})
	case agent.EventToolEnd:
		out = append(p.inputOf(out, e, t), Item{Kind: ToolResult, Event: e, Tool: t})
	}
	return out
}

// status projects a status event: a retry, or the end of the turn.
func (p *Projection) status(e agent.Event) []Item {
	switch e.Status {
	case agent.StreamRetrying:
		if p.mode == Held {
			// The one rule of what a retry voids: agent.Unvoided.
			p.held = agent.Unvoided(append(p.held, e))
			p.held = p.held[:len(p.held)-1]
			return []Item{{Kind: Status, Event: e, Status: e.Status}}
		}
		if e.VoidFrom <= 0 {
			return nil // nothing is void (agent.Unvoided keeps it all)
		}
		return p.reset(e)
	case agent.StreamCompleted, agent.StreamFailed, agent.StreamCanceled:
		out := p.closePart(p.release(nil))
		end := Item{Kind: End, Event: e, Status: e.Status, Total: p.total, FinishReason: p.finish}
		if e.Status != agent.StreamCompleted {
			end.Error = cmp.Or(e.Error, p.failure)
		}
		for _, id := range slices.Sorted(maps.Keys(p.opened)) {
			if !p.input[id] {
				end.OpenCalls = append(end.OpenCalls, id)
			}
		}
		return append(out, end)
	}
	return []Item{{Kind: Status, Event: e, Status: e.Status}}
}

// reset takes back what the open step has given (Reset), then gives again
// what of it the retry does not void.
func (p *Projection) reset(e agent.Event) []Item {
	// The client forgets what the step opened: the retry opens its parts
	// and calls again. (Calls of earlier steps stay as they are.)
	p.part, p.partID = "", ""
	if p.wroteText && p.firstText >= e.VoidFrom {
		p.wroteText = false
	}
	for _, s := range p.stepped {
		if s.Kind == agent.EventToolArgsDelta && s.Tool != nil && !p.input[s.Tool.CallID] {
			delete(p.opened, s.Tool.CallID)
			delete(p.argued, s.Tool.CallID)
		}
	}
	out := []Item{{Kind: Reset, Event: e, VoidFrom: e.VoidFrom}}
	p.stepped = slices.DeleteFunc(p.stepped, func(s agent.Event) bool { return s.Index >= e.VoidFrom })
	for _, s := range p.stepped {
		out = p.streamed(out, s)
	}
	return out
}

// Block is the content block of an Answer item, decoded; ok is false
// when it is not one.
func Block(e agent.Event) (agent.Block, bool) {
	var b agent.Block
	if json.Unmarshal(e.Content, &b) != nil {
		return b, false
	}
	return b, true
}

// Flush gives what is held and closes the open part: the answer pauses
// here (a door that ends its message while calls wait for approval).
func (p *Projection) Flush() []Item {
	return p.closePart(p.release(nil))
}
