package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/words"
)

// replayStored returns the reply an earlier attempt stored but did not
// report, without calling the model.
func (m *modelCall) replayStored(ctx context.Context) (contract.CallModelResult, error) {
	a, in, msg := m.a, m.in, *m.steps.reply
	if msg.Role != agent.RoleAssistant {
		return contract.CallModelResult{}, agent.Errorf(agent.CodeInternal,
			"step %d of job %q is a %s message, not the model's reply", in.Seq, in.JobID, msg.Role)
	}
	res := contract.CallModelResult{Content: msg.Content, ToolCalls: msg.ToolCalls, Model: cmp.Or(msg.Model, m.ag.Model), Stored: true,
		FinishReason: storedFinish(msg), Approvals: a.approvals(ctx, m.ag, in, msg.ToolCalls),
		Reasoning: words.Clip(agent.ReasoningText(msg.Reasoning), agent.MaxResultReasoningBytes)}
	if msg.Usage != nil {
		res.Usage = *msg.Usage
	}
	if in.Stream && in.StreamID != "" && in.TailInResult && a.claims(ctx, in) {
		tail, live, ok, err := a.shownReply(ctx, in, msg)
		if err != nil {
			return contract.CallModelResult{}, err
		}
		if ok {
			res.Tail, res.TailLive = &tail, live
		}
		return checkOutput(res, m.schema), nil
	}
	if in.Stream && in.StreamID != "" && in.TailInResult {
		// The attempt that stored the reply kept its last batch for its
		// result, which the turn never got: stream the whole reply again.
		tail, ok, err := eventlog.Restream(ctx, a.sinks(ctx, in.Notify), a.streamCall(ctx, in), msg.Content, msg.ToolCalls)
		if err != nil {
			return contract.CallModelResult{}, err
		}
		if ok {
			res.Tail = &tail
			if a.liveFirst(in) {
				res.TailLive = tail.First + int64(len(tail.Events)) - 1
			}
		}
	}
	return checkOutput(res, m.schema), nil
}

// shownReply is the last batch of a local live-first call that finds its
// reply stored: it ran to its end before, in a workflow task lost with its
// worker, and the turn runs on from what followers were shown of it
// (eventlog.Shown), at the indices they hold. When that is not the whole
// reply (the live path was down), the call claims the stream and streams
// the reply again, as a retried attempt does; when a later step of the
// lost task owns the stream already, it is logged whole (eventlog.Behind).
// It returns the batch and the index of its last event on the live path.
func (a *Activities) shownReply(ctx context.Context, in contract.CallModelInput, msg agent.Message) (agent.TokenBatch, int64, bool, error) {
	sinks := a.sinks(ctx, in.Notify)
	shown, err := eventlog.Shown(ctx, sinks, a.streamCall(ctx, in))
	if err != nil {
		return agent.TokenBatch{}, 0, false, fmt.Errorf("read what step %d showed: %w", in.Seq, err)
	}
	if !eventlog.ShowsReply(shown, msg.Content, msg.ToolCalls) {
		claimed, err := a.localAttempt(ctx, in)
		switch {
		case err == nil:
			tail, ok, err := eventlog.Restream(ctx, sinks, a.streamCall(ctx, claimed), msg.Content, msg.ToolCalls)
			return tail, tail.First + int64(len(tail.Events)) - 1, ok, err
		case !errors.Is(err, eventlog.ErrFenced):
			return agent.TokenBatch{}, 0, false, err
		}
	}
	tail, live, ok := eventlog.Behind(a.streamCall(ctx, in), shown, msg.Content, msg.ToolCalls)
	return tail, live, ok, nil
}

// storedFinish is why the model stopped, for a reply read back from the
// store (which keeps no finish reason): it asked for tools, or it
// answered.
func storedFinish(m agent.Message) string {
	if len(m.ToolCalls) > 0 {
		return agent.FinishToolCalls
	}
	return agent.FinishStop
}

// localAttempt numbers a live-first call that runs as a local activity
// (agent.ModelLocal) past every attempt of its step that claimed the
// stream: a local activity whose workflow task was lost runs again from
// its first attempt, and its stream must void what the lost one showed
// followers, as a retried attempt's does. It returns in with its
// AttemptBase set so (stepAttempt); other calls as they are.
func (a *Activities) localAttempt(ctx context.Context, in contract.CallModelInput) (contract.CallModelInput, error) {
	if !a.claims(ctx, in) {
		return in, nil
	}
	ap := a.events.(eventlog.Appender)
	var n int
	err := a.db(ctx, "claim stream", func() (err error) {
		n, err = ap.NextAttempt(ctx, in.StreamID, in.Seq, stepAttempt(ctx, in))
		return err
	})
	if err != nil {
		return in, fmt.Errorf("claim stream for step %d: %w", in.Seq, err)
	}
	in.AttemptBase = n - int(activity.GetInfo(ctx).Attempt)
	return in, nil
}

// claims reports whether a call claims its stream for each attempt
// (localAttempt): a live-first call that runs as a local activity.
func (a *Activities) claims(ctx context.Context, in contract.CallModelInput) bool {
	return activity.GetInfo(ctx).IsLocalActivity && in.Stream && in.StreamID != "" && a.liveFirst(in)
}

// streamCall is this attempt of a streaming call, as its events are
// stamped.
func (a *Activities) streamCall(ctx context.Context, in contract.CallModelInput) eventlog.Call {
	return eventlog.Call{StreamID: in.StreamID, Step: in.Seq, Attempt: stepAttempt(ctx, in), First: in.FirstIndex, Live: in.Live,
		LiveFirst: a.liveFirst(in), Local: activity.GetInfo(ctx).IsLocalActivity}
}

// liveFirst says whether a call streams live first (CallModelInput.LiveFirst):
// when the turn asks and the live path stores what it carries.
func (a *Activities) liveFirst(in contract.CallModelInput) bool {
	_, ok := a.events.(eventlog.Appender)
	return in.LiveFirst && in.TailInResult && ok
}

// stepAttempt is this attempt's number among the step's model calls
// (contract.CallModelInput.AttemptBase).
func stepAttempt(ctx context.Context, in contract.CallModelInput) int {
	return in.AttemptBase + int(activity.GetInfo(ctx).Attempt)
}

// hooked runs stages inside the registry's model hooks (internal/hooks),
// the activities' own concerns among them (concerns): what they see of
// the call is what the model reads, and of its reply what is stored,
// past the output guard. A start hook may change the messages, or refuse
// the call. The hooks read the call itself through their context
// (modelCallOf).
func (m *modelCall) hooked(stages ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		in, reg := m.in, m.a.hooks
		call := &hooks.ModelCall{TenantID: in.TenantID, AgentID: in.AgentID, JobID: in.JobID, SessionID: in.SessionID,
			AgentVersion: in.AgentVersion, Step: in.Seq, Model: m.ag.Model, Messages: m.msgs}
		ctx, err := reg.ModelStart(context.WithValue(ctx, modelCallKey{}, m), call)
		if err != nil {
			return err
		}
		m.msgs, m.hook = call.Messages, call
		for _, stage := range stages {
			if err := stage(ctx); err != nil {
				reg.ModelError(ctx, call, err)
				return err
			}
		}
		r := m.resp
		reg.ModelEnd(ctx, call, &hooks.ModelReply{Model: r.Model, Message: r.Message, Reasoning: r.Reasoning, Usage: r.Usage, FinishReason: r.FinishReason})
		return nil
	}
}

// hookChunks hands each chunk of the stream to the hooks that take
// chunks, then to next (nil: none).
func (m *modelCall) hookChunks(next func(context.Context, llm.Chunk) error) func(context.Context, llm.Chunk) error {
	return func(ctx context.Context, c llm.Chunk) error {
		if c.Kind == llm.ChunkText || c.Kind == llm.ChunkReasoning {
			m.a.hooks.ModelChunk(ctx, m.hook, string(c.Kind), c.Text)
		}
		if next == nil {
			return nil
		}
		return next(ctx, c)
	}
}

// modelCallKey keeps the call in its hooks' context, for the hooks of
// this package (concerns), which read what the call pinned and keep what
// they acquire or decide in it.
type modelCallKey struct{}

// modelCallOf is the call whose hooks run under ctx; nil outside
// CallModel.
func modelCallOf(ctx context.Context) *modelCall {
	m, _ := ctx.Value(modelCallKey{}).(*modelCall)
	return m
}

// modelStart is a ModelStart of the activities' own concerns: start runs
// with the call CallModel makes, and a model call made elsewhere (a
// guard's judge, an evaluation's) passes.
func modelStart(start func(ctx context.Context, m *modelCall, c *hooks.ModelCall) error) func(context.Context, *hooks.ModelCall) (context.Context, error) {
	return func(ctx context.Context, c *hooks.ModelCall) (context.Context, error) {
		if m := modelCallOf(ctx); m != nil {
			return ctx, start(ctx, m, c)
		}
		return ctx, nil
	}
}

// inputGuards is the agent's input guards as the first hook of every
// model call: they ask about what is new for the call before anything is
// sent — before its budget is reserved (guardInput).
func (a *Activities) inputGuards() hooks.Handler {
	return hooks.Handler{
		Name: "input guards",
		ModelStart: modelStart(func(ctx context.Context, m *modelCall, c *hooks.ModelCall) error {
			return a.guardInput(ctx, m.ag, m.in, c.Messages)
		}),
	}
}
