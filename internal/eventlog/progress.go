package eventlog

import (
	"context"
	"sync"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// ProgressEvery is the least time between two tool_progress signals of a
// call: progress is batched like tokens, and the latest message wins.
const ProgressEvery = 500 * time.Millisecond

// MaxProgressBytes bounds one progress message.
const MaxProgressBytes = 500

// Progress sends a running tool call's progress to its turn
// (Sinks.Progress), from a goroutine of its own, so that a tool reporting
// never waits.
type Progress struct {
	sinks  Sinks
	turnID string
	call   agent.ToolCall

	mu      sync.Mutex
	pending string

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// StartProgress starts reporting the progress of call, a tool call of the
// turn turnID; ctx is the activity's. Close it before the call returns.
func StartProgress(ctx context.Context, sinks Sinks, turnID string, call agent.ToolCall) *Progress {
	p := &Progress{sinks: sinks, turnID: turnID, call: call,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(ctx)
	return p
}

// Report keeps the latest message for the next send.
func (p *Progress) Report(message string) {
	p.mu.Lock()
	p.pending = message
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Close sends what is pending, before the call's result, and stops.
func (p *Progress) Close() {
	close(p.stop)
	<-p.done
}

func (p *Progress) run(ctx context.Context) {
	defer close(p.done)
	var last time.Time
	for {
		select {
		case <-p.kick:
		case <-p.stop:
			p.send(ctx)
			return
		case <-ctx.Done():
			return
		}
		if wait := ProgressEvery - time.Since(last); wait > 0 {
			select {
			case <-time.After(wait):
			case <-p.stop:
				p.send(ctx)
				return
			case <-ctx.Done():
				return
			}
		}
		p.send(ctx)
		last = time.Now()
	}
}

func (p *Progress) send(ctx context.Context) {
	p.mu.Lock()
	msg := p.pending
	p.pending = ""
	p.mu.Unlock()
	if msg == "" {
		return
	}
	ev := agent.ToolProgress{CallID: p.call.ID, Tool: p.call.Name, Message: agent.Clip(msg, MaxProgressBytes)}
	if err := p.sinks.Progress(ctx, p.turnID, ev); err != nil {
		p.sinks.Logger.Debug("tool progress not delivered", "turn", p.turnID, "error", err)
	}
}
