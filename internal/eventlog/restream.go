package eventlog

import (
	"context"
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
)

// Restream is the batch that replaces whatever earlier attempts of a call
// streamed with its stored reply: a RETRYING event voiding their events,
// if the log has any, then the reply's text as one token event and each
// of its tool calls' arguments as one tool_args_delta event. (The reply's
// reasoning is not stored: what the log held of it is voided, and not
// replaced.) The call returns it as its last batch
// (contract.CallModelResult.Tail); false when there is nothing to send.
func Restream(ctx context.Context, sink Sink, c Call, content string, calls []agent.ToolCall) (agent.TokenBatch, bool, error) {
	if c.LiveFirst {
		return restreamLive(ctx, sink, c, content, calls)
	}
	head, err := fencedHead(ctx, sink, c)
	if err != nil {
		return agent.TokenBatch{}, false, err
	}
	first := max(head, c.First)
	events := replyEvents(c, head > c.First, content, calls)
	if len(events) == 0 {
		return agent.TokenBatch{}, false, nil
	}
	for i := range events {
		events[i].StreamID, events[i].Index = c.StreamID, first+int64(i)
	}
	return agent.TokenBatch{StreamID: c.StreamID, Step: c.Step, Attempt: c.Attempt, First: first, Events: events}, true, nil
}

// restreamLive is Restream for a live-first call: what earlier attempts
// stored, then the replacement, which is appended to the live path too.
func restreamLive(ctx context.Context, sink Sink, c Call, content string, calls []agent.ToolCall) (agent.TokenBatch, bool, error) {
	first, prefix, err := claim(ctx, sink, c)
	if err != nil {
		return agent.TokenBatch{}, false, err
	}
	next := first + int64(len(prefix))
	events := replyEvents(c, next > c.First, content, calls)
	for i := range events {
		events[i].StreamID, events[i].Index = c.StreamID, next+int64(i)
	}
	if len(events) > 0 {
		// The claim made the stream the attempt's.
		if err := sink.Append(ctx, agent.TokenBatch{StreamID: c.StreamID, Step: c.Step, Attempt: c.Attempt, First: next, Events: events}, true); err != nil {
			return agent.TokenBatch{}, false, err
		}
	}
	all := append(prefix, events...)
	if len(all) == 0 {
		return agent.TokenBatch{}, false, nil
	}
	return agent.TokenBatch{StreamID: c.StreamID, Step: c.Step, Attempt: c.Attempt, First: first, Events: all}, true, nil
}

// Shown is what the attempts of a live-first call stored from its first
// index on, in order, claiming nothing: the events its followers were
// shown. A local call that runs again after its workflow task was lost
// with its worker, and finds its reply stored, takes them as they were
// (Behind): the turn runs on from there and logs what comes after at
// the indices followers already hold. Claiming the stream instead would
// void them after what followers saw since, and a later step may have
// claimed it already.
func Shown(ctx context.Context, sink Sink, c Call) ([]agent.Event, error) {
	stored, err := sink.Stored(ctx, c.StreamID, c.First-1)
	if err != nil {
		return nil, err
	}
	shown := make([]agent.Event, 0, len(stored))
	for i, e := range stored {
		// The call's own: what the turn handed on after it is not.
		if e.Index != c.First+int64(i) || e.Step != c.Step || !batched(e) {
			break
		}
		shown = append(shown, e)
	}
	return shown, nil
}

// ShowsReply reports whether events show a reply whole: its text and
// each of its tool calls' arguments, without what a RETRYING voided.
func ShowsReply(events []agent.Event, content string, calls []agent.ToolCall) bool {
	if agent.ReplayText(events) != content {
		return false
	}
	args := map[string]string{}
	for _, e := range agent.Unvoided(events) {
		if e.Kind == agent.EventToolArgsDelta && e.Tool != nil {
			args[e.Tool.CallID] += e.Tool.ArgsDelta
		}
	}
	return !slices.ContainsFunc(calls, func(tc agent.ToolCall) bool { return args[tc.ID] != tc.Arguments })
}

// Behind is the batch of a live-first call whose reply is stored, made of
// what it showed (Shown), and the index of its last event on the live
// path. When what was shown is not the whole reply (the live path was
// down while the call streamed) and the stream cannot be claimed (a later
// step owns it), the batch voids it and carries the reply whole, off the
// live path, as Restream's does.
func Behind(c Call, shown []agent.Event, content string, calls []agent.ToolCall) (agent.TokenBatch, int64, bool) {
	for _, e := range shown {
		c.Attempt = max(c.Attempt, e.Attempt)
	}
	live := c.First + int64(len(shown)) - 1
	events := slices.Clone(shown)
	if !ShowsReply(shown, content, calls) {
		replay := replyEvents(c, len(shown) > 0, content, calls)
		for i := range replay {
			replay[i].StreamID, replay[i].Index = c.StreamID, live+1+int64(i)
		}
		events = append(events, replay...)
	}
	if len(events) == 0 {
		return agent.TokenBatch{}, 0, false
	}
	if len(shown) == 0 {
		live = 0
	}
	return agent.TokenBatch{StreamID: c.StreamID, Step: c.Step, Attempt: c.Attempt, First: c.First, Events: events}, live, true
}

// replyEvents are a stored reply's events: a RETRYING that voids what
// earlier attempts streamed when void, the text as one token event and
// each tool call's arguments as one tool_args_delta event.
func replyEvents(c Call, void bool, content string, calls []agent.ToolCall) []agent.Event {
	var events []agent.Event
	if void {
		events = append(events, retrying(c))
	}
	if content != "" {
		events = append(events, agent.Event{Kind: agent.EventToken, Text: content, Step: c.Step, Attempt: c.Attempt})
	}
	for _, tc := range calls {
		events = append(events, agent.Event{Kind: agent.EventToolArgsDelta, Step: c.Step, Attempt: c.Attempt,
			Tool: &agent.ToolEvent{CallID: tc.ID, Name: tc.Name, ArgsDelta: tc.Arguments}})
	}
	return events
}
