package activities

import (
	"context"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/eventlog"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/llm"
)

// replyOut takes a reply as the model sends it to where it goes: through
// the agent's output guard, which holds every channel back a window at a
// time until it has read it (held; nil: the agent has no output guard),
// and on to the turn's stream when the call streams (st). While it is
// open it keeps the attempt alive: the batcher heartbeats a streamed
// call, and an unstreamed one has a heartbeat of its own, or a long call
// would be given up for lost while it still runs, and paid for again.
type replyOut struct {
	held      *guardpkg.Reply
	refusal   string            // the output guard's, sent in place of what broke it
	st        *eventlog.Batcher // nil: not streamed, or closed
	stopBeats func()            // nil: no heartbeat of its own, or stopped
}

// openReply opens the call's stream, or its heartbeat. The output
// guard, when the agent has one, holds the reply already
// (outputGuardHook).
func (m *modelCall) openReply(ctx context.Context) error {
	a, in := m.a, m.in
	if !in.Stream || in.StreamID == "" {
		m.out.stopBeats = heartbeat(ctx, time.Second)
		return nil
	}
	st, err := eventlog.StartBatcher(ctx, a.sinks(ctx, in.Notify), a.streamCall(ctx, in), a.streamInterval, a.streamMaxBytes)
	if err != nil {
		return err
	}
	m.out.st = st
	m.streamed.Store(st)
	return nil
}

// chunk takes a piece of a streamed reply (llm.Request.OnChunk). Every
// channel goes out a window at a time, once the guard has read it; after
// a broken rule, nothing more does (the model finishes, so that its usage
// is counted).
func (o *replyOut) chunk(ctx context.Context, c llm.Chunk) error {
	ch, text := channelOf(c)
	if o.held == nil {
		return o.emit(ctx, []guardpkg.Release{{Channel: ch, Text: text}})
	}
	out, _ := o.held.Add(ch, text)
	return o.emit(ctx, out)
}

// end checks the reply's end with the output guard (guard.Reply.End):
// what it still holds, and what will be stored and run where that is not
// what was released. A broken rule replaces whatever was not released
// with the refusal (refuse), which is streamed after what was. It returns
// the rule broken ("" for none) and the channel it was broken on.
func (o *replyOut) end(ctx context.Context, resp *hooks.ModelReply) (string, guardpkg.Channel, error) {
	if o.held == nil {
		return "", guardpkg.Channel{}, nil
	}
	out, tripped := o.held.End(finalChannels(resp))
	if err := o.emit(ctx, out); err != nil {
		return "", guardpkg.Channel{}, err
	}
	if tripped == "" {
		return "", guardpkg.Channel{}, nil
	}
	refusal := refuse(resp, o.held, o.refusal)
	if o.st != nil {
		if err := o.st.Add(ctx, refusal); err != nil {
			return "", guardpkg.Channel{}, err
		}
	}
	rule, on := o.held.Tripped()
	return rule, on, nil
}

// close sends what the stream still holds and closes it, and stops the
// heartbeat. With keepTail the last batch is not sent but returned, for
// the call's result (streamTail).
func (o *replyOut) close(keepTail bool) (streamTail, error) {
	o.stopHeartbeat()
	st := o.st
	if st == nil {
		return streamTail{}, nil
	}
	o.st = nil
	if !keepTail {
		return streamTail{}, st.Close()
	}
	b, ok, err := st.CloseTail()
	if err != nil || !ok {
		return streamTail{}, err
	}
	return streamTail{batch: &b, live: st.Published()}, nil
}

// abort stops the stream without sending what it holds, and the
// heartbeat: the attempt failed, and the next one voids what this one
// streamed. What is closed stays closed.
func (o *replyOut) abort() {
	o.stopHeartbeat()
	if o.st != nil {
		o.st.Abort()
		o.st = nil
	}
}

func (o *replyOut) stopHeartbeat() {
	if o.stopBeats != nil {
		o.stopBeats()
		o.stopBeats = nil
	}
}

// emit hands what the output guard released (or, without one, what the
// model streamed) to the stream, each piece as the event kind its
// channel becomes; an unstreamed call emits nothing.
func (o *replyOut) emit(ctx context.Context, out []guardpkg.Release) error {
	if o.st == nil {
		return nil
	}
	for _, r := range out {
		var err error
		switch r.Kind {
		case guardpkg.ChannelReasoning:
			err = o.st.AddReasoning(ctx, r.Text)
		case guardpkg.ChannelArgs:
			err = o.st.AddToolArgs(ctx, r.CallID, r.Tool, r.Text)
		default:
			err = o.st.Add(ctx, r.Text)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// channelOf is the guard's channel of a streamed chunk, and its text.
func channelOf(c llm.Chunk) (guardpkg.Channel, string) {
	switch c.Kind {
	case llm.ChunkReasoning:
		return guardpkg.Channel{Kind: guardpkg.ChannelReasoning}, c.Text
	case llm.ChunkToolCall:
		return guardpkg.Channel{Kind: guardpkg.ChannelArgs, CallID: c.ToolCall.ID, Tool: c.ToolCall.Name}, c.ToolCall.Args
	}
	return guardpkg.Channel{Kind: guardpkg.ChannelText}, c.Text
}

// finalChannels is a reply as it is stored and run, by the guard's
// channels, in the order a model streams them.
func finalChannels(resp *hooks.ModelReply) []guardpkg.Release {
	out := []guardpkg.Release{
		{Channel: guardpkg.Channel{Kind: guardpkg.ChannelReasoning}, Text: resp.Reasoning},
		{Channel: guardpkg.Channel{Kind: guardpkg.ChannelText}, Text: resp.Message.Content},
	}
	for _, c := range resp.Message.ToolCalls {
		out = append(out, guardpkg.Release{Channel: guardpkg.Channel{Kind: guardpkg.ChannelArgs, CallID: c.ID, Tool: c.Name}, Text: c.Arguments})
	}
	return out
}

// refuse makes a reply that broke the output guard what its clients saw:
// what was released of its text and reasoning, then the refusal (which
// it returns, as it is to be sent), and none of its tool calls, which are
// not run.
func refuse(resp *hooks.ModelReply, held *guardpkg.Reply, refusal string) string {
	released := held.Released(guardpkg.Channel{Kind: guardpkg.ChannelText})
	if released != "" && !strings.HasSuffix(released, " ") && !strings.HasSuffix(released, "\n") {
		refusal = " " + refusal
	}
	resp.Message.Content = released + refusal
	resp.Reasoning = held.Released(guardpkg.Channel{Kind: guardpkg.ChannelReasoning})
	if len(resp.Message.Reasoning) > 0 {
		// Cut, it is no longer what the provider signed: it is kept for
		// people, unsigned, and so never sent back.
		resp.Message.Reasoning = nil
		if resp.Reasoning != "" {
			resp.Message.Reasoning = []agent.Reasoning{{Text: resp.Reasoning}}
		}
	}
	resp.Message.ToolCalls = nil
	resp.FinishReason = agent.FinishContentFilter
	return refusal
}

// streamTail is a streamed reply's last batch, when the turn asks for it in
// the result (contract.CallModelResult.Tail), and the index of the last of
// its events that a live-first call has published (0: none).
type streamTail struct {
	batch *agent.TokenBatch
	live  int64
}
