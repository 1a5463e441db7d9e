package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// renderer prints a turn's events as they arrive: the model's text inline,
// its reasoning on lines of their own (prefixed, and dimmed on a
// terminal), tool calls, approvals, step ends and status changes on lines
// of their own. Tool-call argument fragments are not printed: tool_start
// shows the call's arguments whole.
type renderer struct {
	out io.Writer
	// dim marks reasoning with the terminal's faint style.
	dim bool
	// inline is what the last thing printed was, when it ended without a
	// newline.
	inline inlineText
	// calls counts the turn's model calls ended so far: a step_finish's
	// step is the turn's step sequence, which tool calls share (1, 3, …),
	// so the renderer numbers the model calls itself.
	calls int
}

// inlineText is what a line being printed holds.
type inlineText int

const (
	inlineNone      inlineText = iota
	inlineAnswer               // the model's text
	inlineReasoning            // the model's reasoning
	inlineChild                // a delegated child turn's text
)

const (
	// reasoningPrefix starts each line of the model's reasoning.
	reasoningPrefix = "  thinking: "
	// childPrefix marks the lines of a delegated child turn's events.
	childPrefix = "    │ "
	faint       = "\x1b[2m"
	plain       = "\x1b[0m"
)

// faintOK reports whether out shows the faint style: a terminal, and
// NO_COLOR (no-color.org) not set.
func faintOK(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (r *renderer) line(format string, args ...any) {
	r.endLine()
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *renderer) endLine() {
	if r.inline == inlineNone {
		return
	}
	if r.inline == inlineReasoning && r.dim {
		fmt.Fprint(r.out, plain)
	}
	fmt.Fprintln(r.out)
	r.inline = inlineNone
}

// inlineStart ends the line being printed unless it holds kind, and
// starts one with prefix if it ended.
func (r *renderer) inlineStart(kind inlineText, prefix string) {
	if r.inline == kind {
		return
	}
	r.endLine()
	if kind == inlineReasoning && r.dim {
		fmt.Fprint(r.out, faint)
	}
	fmt.Fprint(r.out, prefix)
	r.inline = kind
}

func (r *renderer) event(e agent.Event) {
	if e.Child != nil {
		r.child(e)
		return
	}
	switch e.Kind {
	case agent.EventToken:
		r.inlineStart(inlineAnswer, "")
		fmt.Fprint(r.out, e.Text)
	case agent.EventReasoning:
		r.inlineStart(inlineReasoning, reasoningPrefix)
		fmt.Fprint(r.out, strings.ReplaceAll(e.Text, "\n", "\n"+reasoningPrefix))
	case agent.EventStepStart:
		// A new step's text starts on a line of its own.
		r.endLine()
	case agent.EventStepFinish:
		tokens := 0
		if e.Usage != nil {
			tokens = e.Usage.TotalTokens
		}
		r.calls++
		r.line("  [model call %d: %s, %d tokens]", r.calls, e.FinishReason, tokens)
	case agent.EventToolStart:
		r.line("  tool %s %s", e.Tool.Name, e.Tool.Args)
	case agent.EventToolProgress:
		r.line("  tool %s: %s", e.Tool.Name, e.Tool.Message)
	case agent.EventToolEnd:
		r.line("  tool %s → %s %s", e.Tool.Name, e.Tool.Status, e.Tool.Output)
		if d := e.Tool.Data; d != nil {
			r.line("  data %s", describeData(*d))
		}
	case agent.EventCustom:
		r.line("  %s%s %s", customOf(e), e.Custom.Name, words.Clip(string(e.Custom.Value), 120))
	case agent.EventApprovalRequired:
		if e.Tool.ApprovalID == "" {
			r.line("  waiting for approval of %s (call %s)", e.Tool.Name, e.Tool.CallID)
			break
		}
		// The approval id is what `starter approve --approval` takes.
		r.line("  waiting for approval of %s (call %s, approval %s)", e.Tool.Name, e.Tool.CallID, e.Tool.ApprovalID)
	case agent.EventApprovalDecided:
		r.line("  %s (call %s) %s", e.Tool.Name, e.Tool.CallID, describeDecision(*e.Approval))
	case agent.EventQuestion:
		r.line("  question (call %s): %s%s", e.Tool.CallID, e.Question.Text, describeChoices(e.Question.Choices, e.Question.AllowOther))
		r.line("  answer it: starter answer --stream %s --call %s \"…\"", e.StreamID, e.Tool.CallID)
	case agent.EventQuestionAnswered:
		if e.Question.Outcome == agent.QuestionAnswered {
			r.line("  question (call %s) answered by %s", e.Tool.CallID, e.Question.Answerer)
		} else {
			r.line("  question (call %s) %s", e.Tool.CallID, e.Question.Outcome)
		}
	case agent.EventStatus:
		switch e.Status {
		case agent.StreamRetrying:
			r.line("  [the model call failed and is retried: what it streamed since event %d is replaced]", e.VoidFrom)
		case agent.StreamWaitingApproval:
			r.line("  [waiting for approval]")
		case agent.StreamWaitingInput:
			r.line("  [waiting for an answer]")
		case agent.StreamCompleted, agent.StreamFailed:
			r.endLine()
		}
	case agent.EventError:
		r.line("  error %s: %s", e.Error.Type, e.Error.Message)
	}
}

// customOf names the tool call that emitted a custom event, if any.
func customOf(e agent.Event) string {
	if e.Tool == nil {
		return "data "
	}
	return "tool " + e.Tool.Name + " data "
}

// describeDecision says in a few words how a waiting call was decided.
func describeDecision(a agent.ApprovalEvent) string {
	switch a.Outcome {
	case agent.ApprovalApproved, agent.ApprovalRejected:
		s := a.Outcome + " by " + a.Approver
		if a.Reason != "" {
			s += ": " + words.Clip(a.Reason, 80)
		}
		return s
	case agent.ApprovalTimedOut:
		return "not decided in time: not run"
	default:
		return "not run: the turn was cancelled"
	}
}

// child prints an event of a delegated child turn, indented under the
// delegation call: its text, its tool calls and its approvals (which are
// decided on the child's own stream).
func (r *renderer) child(e agent.Event) {
	switch e.Kind {
	case agent.EventToken:
		r.inlineStart(inlineChild, childPrefix)
		fmt.Fprint(r.out, strings.ReplaceAll(e.Text, "\n", "\n"+childPrefix))
	case agent.EventToolStart:
		r.line("%stool %s %s", childPrefix, e.Tool.Name, e.Tool.Args)
	case agent.EventToolEnd:
		r.line("%stool %s → %s %s", childPrefix, e.Tool.Name, e.Tool.Status, e.Tool.Output)
	case agent.EventApprovalRequired:
		r.line("%swaiting for approval of %s (call %s of %s)", childPrefix, e.Tool.Name, e.Tool.CallID, e.Child.StreamID)
	case agent.EventApprovalDecided:
		r.line("%s%s (call %s) %s", childPrefix, e.Tool.Name, e.Tool.CallID, describeDecision(*e.Approval))
	case agent.EventQuestion:
		r.line("%squestion (call %s of %s): %s%s", childPrefix, e.Tool.CallID, e.Child.StreamID, e.Question.Text,
			describeChoices(e.Question.Choices, e.Question.AllowOther))
	case agent.EventStatus:
		if e.Status == agent.StreamRetrying {
			r.line("%s[the model call failed and is retried: the text above is replaced]", childPrefix)
		}
	}
}

// describeData says in a few words what a tool's data is and where it is kept.
func describeData(d agent.DataPreview) string {
	switch d.Type {
	case agent.DataDataset:
		return fmt.Sprintf("%s: a dataset of %d rows", d.Ref, d.RowCount)
	default:
		return fmt.Sprintf("%s: a %s of %d bytes", d.Ref, d.Type, d.Bytes)
	}
}

// summary prints the result's one-line account.
func summary(out io.Writer, res agent.TurnResult) {
	m := res.Metadata
	ref := res.ResultRef
	if res.DataRef != "" {
		ref += " · data " + res.DataRef
	}
	if m.CacheHit {
		ref += " · from the cache"
	}
	if !res.CompletedAt.IsZero() {
		ref += " · completed " + res.CompletedAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(out, "  [%s v%d · %s · %d tokens · %s · %s]\n", m.AgentID, m.AgentVersion, m.LLMModel,
		m.TokensUsed, time.Duration(m.ExecutionTimeMS)*time.Millisecond, ref)
}
