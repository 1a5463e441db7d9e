package eventlog

import (
	"context"
	"sync"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// ProgressEvery is the least time between two tool_progress signals of a
// call: progress is batched like tokens, and the latest message wins.
const ProgressEvery = 500 * time.Millisecond

// MaxProgressBytes bounds one progress message.
const MaxProgressBytes = 500

// MaxCustomBytes bounds the values of the custom events one tool call
// emits, all told: the turn's history keeps every one.
const MaxCustomBytes = 1 << 20

// maxSignalCustom bounds the custom values one signal carries; more wait
// for the next.
const maxSignalCustom = 256 << 10

// Progress sends a running tool call's progress and custom events to its
// turn (Sinks.Progress), from a goroutine of its own, so that a tool
// reporting never waits. Progress is batched, the latest message winning;
// custom events are each delivered, in the order emitted, except that one
// not yet sent is replaced, in its place, by a later one of the same name
// and id.
type Progress struct {
	sinks  Sinks
	turnID string
	call   agent.ToolCall

	mu      sync.Mutex
	pending string
	custom  []agent.CustomEvent // emitted, not yet sent
	emitted int                 // bytes of custom values taken so far

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
	p.poke()
}

// Emit queues a custom event of the call for the next send. It refuses
// (agent.CodeInvalid) an event not of its shape and one past the call's
// MaxCustomBytes.
func (p *Progress) Emit(c agent.CustomEvent) error {
	e := agent.Event{Kind: agent.EventCustom, Custom: &c, Tool: &agent.ToolEvent{CallID: p.call.ID, Name: p.call.Name}}
	if err := e.Validate(); err != nil {
		return err
	}
	p.mu.Lock()
	replaced := -1
	if c.ID != "" {
		for i, q := range p.custom {
			if q.Name == c.Name && q.ID == c.ID {
				replaced = i
				break
			}
		}
	}
	size := p.emitted + len(c.Value)
	if replaced >= 0 {
		size -= len(p.custom[replaced].Value)
	}
	if size > MaxCustomBytes {
		p.mu.Unlock()
		return agent.Errorf(agent.CodeInvalid, "custom %q: the call has emitted %d bytes of custom values, and may emit %d in all", c.Name, p.emitted, MaxCustomBytes)
	}
	p.emitted = size
	if replaced >= 0 {
		p.custom[replaced] = c
	} else {
		p.custom = append(p.custom, c)
	}
	p.mu.Unlock()
	p.poke()
	return nil
}

func (p *Progress) poke() {
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

// send sends the pending message and the custom events emitted since
// the last send: one signal, or more when the events are large.
func (p *Progress) send(ctx context.Context) {
	p.mu.Lock()
	msg, custom := p.pending, p.custom
	p.pending, p.custom = "", nil
	p.mu.Unlock()
	for first := true; first || len(custom) > 0; first = false {
		ev := agent.ToolProgress{CallID: p.call.ID, Tool: p.call.Name}
		if first {
			ev.Message = words.Clip(msg, MaxProgressBytes)
		}
		size := 0
		for len(custom) > 0 && (len(ev.Custom) == 0 || size+len(custom[0].Value) <= maxSignalCustom) {
			size += len(custom[0].Value)
			ev.Custom, custom = append(ev.Custom, custom[0]), custom[1:]
		}
		if ev.Message == "" && len(ev.Custom) == 0 {
			return
		}
		if err := p.sinks.Progress(ctx, p.turnID, ev); err != nil {
			p.sinks.Logger.Debug("tool progress not delivered", "turn", p.turnID, "error", err)
		}
	}
}
