package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// renderer prints a turn's events as they arrive: the model's text inline,
// tool calls and status changes on lines of their own.
type renderer struct {
	out     io.Writer
	midLine bool // the last thing printed was text without a newline
	// childText: that text is a delegated child turn's.
	childText bool
}

func (r *renderer) line(format string, args ...any) {
	r.endLine()
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *renderer) endLine() {
	if r.midLine {
		fmt.Fprintln(r.out)
	}
	r.midLine, r.childText = false, false
}

// childPrefix marks the lines of a delegated child turn's events.
const childPrefix = "    │ "

func (r *renderer) event(e agent.Event) {
	if e.Child != nil {
		r.child(e)
		return
	}
	switch e.Kind {
	case agent.EventToken:
		if r.childText {
			r.endLine()
		}
		fmt.Fprint(r.out, e.Text)
		r.midLine = true
	case agent.EventToolStart:
		r.line("  tool %s %s", e.Tool.Name, e.Tool.Args)
	case agent.EventToolProgress:
		r.line("  tool %s: %s", e.Tool.Name, e.Tool.Message)
	case agent.EventToolEnd:
		r.line("  tool %s → %s %s", e.Tool.Name, e.Tool.Status, e.Tool.Output)
		if d := e.Tool.Data; d != nil {
			r.line("  data %s", describeData(*d))
		}
	case agent.EventApprovalRequired:
		r.line("  waiting for approval of %s (call %s)", e.Tool.Name, e.Tool.CallID)
	case agent.EventStatus:
		switch e.Status {
		case agent.StreamRetrying:
			r.line("  [the model call failed and is retried: the text since event %d is replaced]", e.VoidFrom)
		case agent.StreamWaitingApproval:
			r.line("  [waiting for approval]")
		case agent.StreamCompleted, agent.StreamFailed:
			if r.midLine {
				fmt.Fprintln(r.out)
				r.midLine = false
			}
		}
	case agent.EventError:
		r.line("  error %s: %s", e.Error.Type, e.Error.Message)
	}
}

// child prints an event of a delegated child turn, indented under the
// delegation call: its text, its tool calls and its approvals (which are
// decided on the child's own stream).
func (r *renderer) child(e agent.Event) {
	switch e.Kind {
	case agent.EventToken:
		if !r.childText {
			r.endLine()
			fmt.Fprint(r.out, childPrefix)
			r.midLine, r.childText = true, true
		}
		fmt.Fprint(r.out, strings.ReplaceAll(e.Text, "\n", "\n"+childPrefix))
	case agent.EventToolStart:
		r.line("%stool %s %s", childPrefix, e.Tool.Name, e.Tool.Args)
	case agent.EventToolEnd:
		r.line("%stool %s → %s %s", childPrefix, e.Tool.Name, e.Tool.Status, e.Tool.Output)
	case agent.EventApprovalRequired:
		r.line("%swaiting for approval of %s (call %s of %s)", childPrefix, e.Tool.Name, e.Tool.CallID, e.Child.StreamID)
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
	fmt.Fprintf(out, "  [%s v%d · %s · %d tokens · %s · %s]\n", m.AgentID, m.AgentVersion, m.LLMModel,
		m.TokensUsed, time.Duration(m.ExecutionTimeMS)*time.Millisecond, ref)
}
