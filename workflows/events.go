package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// eventLog is a turn's event log (agent.Event). The workflow appends its
// own events (status, tools, usage); a streaming CallModel appends token
// events through contract.SignalTokens, fenced by step and attempt so that a late
// or repeated batch of a failed attempt never enters the log.
type eventLog struct {
	streamID string
	events   []agent.Event
	// step is the CallModel whose batches are accepted (0: none); attempt
	// is the highest attempt of it seen so far.
	step    int
	attempt int
	dropped int // batches refused, for the logs
}

func (l *eventLog) next() int64 { return int64(len(l.events)) + 1 }

func (l *eventLog) add(e agent.Event) {
	e.StreamID = l.streamID
	e.Index = l.next()
	l.events = append(l.events, e)
}

// accept appends a batch if it continues the log for the current step and
// is not from an attempt older than one already seen.
func (l *eventLog) accept(b agent.TokenBatch) bool {
	if b.Step != l.step || b.Attempt < l.attempt || b.First != l.next() || len(b.Events) == 0 {
		l.dropped++
		return false
	}
	for i, e := range b.Events {
		if e.Index != b.First+int64(i) || e.Kind == agent.EventStatus && e.Status != agent.StreamRetrying {
			l.dropped++
			return false
		}
	}
	l.attempt = b.Attempt
	for _, e := range b.Events {
		l.add(e)
	}
	return true
}

func (l *eventLog) page(q agent.EventsQuery) agent.EventsPage {
	p := agent.EventsPage{Next: l.next(), Done: l.done()}
	if q.HeadOnly || q.AfterIndex < 0 || q.AfterIndex >= int64(len(l.events)) {
		return p
	}
	evs := l.events[q.AfterIndex:]
	if q.Limit > 0 && len(evs) > q.Limit {
		evs = evs[:q.Limit]
		p.Done = false
	}
	p.Events = append([]agent.Event(nil), evs...)
	return p
}

func (l *eventLog) done() bool {
	return len(l.events) > 0 && l.events[len(l.events)-1].Terminal()
}

// startEvents registers the events query and the token signal. Batches are
// only ever received by the workflow's main coroutine (see awaitModel and
// emit): a second coroutine blocked in Receive would take a batch off the
// channel and might run only after the main one had closed the step.
func (t *turn) startEvents(ctx workflow.Context) error {
	t.log.streamID = t.workflowID
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryEvents, func(q agent.EventsQuery) (agent.EventsPage, error) {
		p := t.log.page(q)
		p.TenantID = t.req.TenantID
		return p, nil
	}, workflow.QueryHandlerOptions{Description: `events after {"after_index": N}; {"head_only": true} for the next index only`}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryStatus, func() (agent.TurnStatus, error) {
		return t.status(), nil
	}, workflow.QueryHandlerOptions{Description: "where the turn is: status, agent, step, tool calls, tokens, approvals waiting"}); err != nil {
		return err
	}
	t.tokens = workflow.GetSignalChannelWithOptions(ctx, contract.SignalTokens, workflow.SignalChannelOptions{
		Description: "token batches of a streaming model call (sent by CallModel)",
	})
	t.progress = workflow.GetSignalChannelWithOptions(ctx, contract.SignalToolProgress, workflow.SignalChannelOptions{
		Description: "what a running tool call is doing (sent by ExecuteTool)",
	})
	t.children = workflow.GetSignalChannelWithOptions(ctx, contract.SignalNotifyTokens, workflow.SignalChannelOptions{
		Description: "token batches and tool events of the turn's child turns (delegate_to_agent calls)",
	})
	return nil
}

// status is the turn at a glance, for the status query.
func (t *turn) status() agent.TurnStatus {
	st := agent.TurnStatus{
		TenantID: t.req.TenantID, JobID: t.req.JobID, AgentID: t.agent.ID, AgentVersion: t.agent.Version,
		Step: t.seq, ToolCalls: len(t.calls), TokensUsed: t.usage.TotalTokens,
		PendingApprovals: len(t.appr.pending), CancelRequested: t.canceled != nil, LastEventIndex: t.log.next() - 1,
	}
	for i := len(t.log.events) - 1; i >= 0; i-- {
		if e := t.log.events[i]; e.Kind == agent.EventStatus && e.Status != agent.StreamRetrying && e.Child == nil {
			st.Status = e.Status
			break
		}
	}
	return st
}

func (t *turn) acceptBatch(ctx workflow.Context, b agent.TokenBatch) {
	if !t.log.accept(b) {
		workflow.GetLogger(ctx).Debug("token batch refused", "step", b.Step, "attempt", b.Attempt, "first", b.First, "next", t.log.next())
		return
	}
	// CallModel publishes a batch once the turn has taken it.
	if b.First == int64(t.handed)+1 {
		t.handed += len(b.Events)
	}
}

// maxLiveBytes bounds the events handed to one activity: they travel in
// its input (the history) and in one notification.
const maxLiveBytes = 6 << 10

// handOn is what the next activity publishes live (contract.Live): the
// events logged since the last hand-on, or a wake-up when they are too
// large. Followers of a streamed turn then read nothing while it runs: the
// turn's own events (status, usage, tools) reach them from the activity
// that follows, its tokens from CallModel. An unstreamed turn hands on
// nothing and its tool calls wake followers, if any, to read the log.
func (t *turn) handOn() contract.Live {
	evs := t.log.events[t.handed:]
	t.handed = len(t.log.events)
	if len(evs) == 0 {
		return contract.Live{}
	}
	if !t.req.Streaming() {
		return contract.Live{Wake: true}
	}
	size := 0
	for _, e := range evs {
		size += liveSize(e)
	}
	if size > maxLiveBytes {
		return contract.Live{Wake: true}
	}
	return contract.Live{Events: slices.Clone(evs)}
}

// liveSize is a bound on an event's size as JSON, from its strings (each
// counted twice, for escapes) and a fixed allowance for the rest; without
// encoding it, which workflow code must not (encoding/json caches by type).
// Events with a data preview or of a child turn count as too large: they
// are read from the log. The publisher checks the real size again.
func liveSize(e agent.Event) int {
	if e.Child != nil || e.Tool != nil && e.Tool.Data != nil {
		return maxLiveBytes + 1
	}
	n := len(e.StreamID) + len(e.Text) + len(e.Content)
	if t := e.Tool; t != nil {
		n += len(t.CallID) + len(t.Name) + len(t.Args) + len(t.Output) + len(t.Reason) + len(t.Message) + len(t.Source) + len(t.FromToolkit)
	}
	if e.Error != nil {
		n += len(e.Error.Type) + len(e.Error.Message) + len(e.Error.Tool)
	}
	return 2*n + 400
}

// emit appends a workflow event after the batches and progress already
// received, so that the log keeps the order in which things happened.
func (t *turn) emit(ctx workflow.Context, e agent.Event) {
	t.drainTokens(ctx)
	t.drainProgress(ctx)
	t.drainChildren(ctx)
	t.log.add(e)
	t.forward(ctx, t.log.events[len(t.log.events)-1])
}

// awaitTool waits for a tool call, logging the progress of running calls
// and the events of child turns as they arrive.
func (t *turn) awaitTool(ctx workflow.Context, f workflow.Future) {
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(f, func(workflow.Future) { done = true })
	// ReceiveAsync, not Receive: a signal whose payload does not decode is
	// dropped, and Receive would then wait for the next signal inside this
	// callback, with the call's completion unseen until one came.
	sel.AddReceive(t.progress, func(c workflow.ReceiveChannel, _ bool) {
		var p agent.ToolProgress
		if c.ReceiveAsync(&p) {
			t.addProgress(p)
		}
	})
	sel.AddReceive(t.children, func(c workflow.ReceiveChannel, _ bool) {
		var b agent.TokenBatch
		if c.ReceiveAsync(&b) {
			t.acceptChild(ctx, b)
		}
	})
	for !done {
		sel.Select(ctx)
	}
}

// drainProgress logs the progress already received.
func (t *turn) drainProgress(ctx workflow.Context) {
	for {
		var p agent.ToolProgress
		if !t.progress.ReceiveAsync(&p) {
			return
		}
		t.addProgress(p)
	}
}

func (t *turn) addProgress(p agent.ToolProgress) {
	t.log.add(agent.Event{Kind: agent.EventToolProgress, Tool: &agent.ToolEvent{CallID: p.CallID, Name: p.Tool, Message: p.Message}})
}

// awaitModel waits for a CallModel, taking its token batches as they
// arrive, then those that came with its completion.
func (t *turn) awaitModel(ctx workflow.Context, f workflow.Future, reply *contract.CallModelResult) error {
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(f, func(workflow.Future) { done = true })
	sel.AddReceive(t.tokens, func(c workflow.ReceiveChannel, _ bool) {
		var b agent.TokenBatch
		if c.ReceiveAsync(&b) { // see awaitTool
			t.acceptBatch(ctx, b)
		}
	})
	for !done {
		sel.Select(ctx)
	}
	t.drainTokens(ctx)
	if err := f.Get(ctx, reply); err != nil {
		return err
	}
	// The call's last batch, kept for its result: logged as its signal
	// would have been, and published by the activity that follows.
	if reply.Tail != nil && !t.log.accept(*reply.Tail) {
		workflow.GetLogger(ctx).Debug("last token batch refused", "step", reply.Tail.Step, "attempt", reply.Tail.Attempt, "first", reply.Tail.First, "next", t.log.next())
	}
	return nil
}

// drainTokens takes the batches already received.
func (t *turn) drainTokens(ctx workflow.Context) {
	for {
		var b agent.TokenBatch
		if !t.tokens.ReceiveAsync(&b) {
			return
		}
		t.acceptBatch(ctx, b)
	}
}
