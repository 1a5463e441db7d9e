package main

import (
	"fmt"
	"io"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// renderer prints a turn's events as they arrive: the model's text inline,
// tool calls and status changes on lines of their own.
type renderer struct {
	out     io.Writer
	midLine bool // the last thing printed was text without a newline
}

func (r *renderer) line(format string, args ...any) {
	if r.midLine {
		fmt.Fprintln(r.out)
		r.midLine = false
	}
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *renderer) event(e agent.Event) {
	switch e.Kind {
	case agent.EventToken:
		fmt.Fprint(r.out, e.Text)
		r.midLine = true
	case agent.EventToolStart:
		r.line("  tool %s %s", e.Tool.Name, e.Tool.Args)
	case agent.EventToolEnd:
		r.line("  tool %s → %s %s", e.Tool.Name, e.Tool.Status, e.Tool.Output)
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

// summary prints the result's one-line account.
func summary(out io.Writer, res agent.TurnResult) {
	m := res.Metadata
	fmt.Fprintf(out, "  [%s v%d · %s · %d tokens · %s · %s]\n", m.AgentID, m.AgentVersion, m.LLMModel,
		m.TokensUsed, time.Duration(m.ExecutionTimeMS)*time.Millisecond, res.ResultRef)
}
