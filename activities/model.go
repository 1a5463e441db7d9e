package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/structured"
)

// CallModel sends the turn so far to the agent's model (or to the
// fallback model the input names) and stores the reply as step Seq. A
// reply an earlier attempt stored is returned as it is, without calling
// the model again, whichever model this call names: a fallback never pays
// again for a call that produced an answer. Before the call is sent, its worst
// case is reserved against the tenant's budgets (reserve), or the call is
// refused with BudgetExceeded; storing the reply settles the reservation
// to the call's real usage.
func (a *Activities) CallModel(ctx context.Context, in contract.CallModelInput) (contract.CallModelResult, error) {
	in, err := a.localAttempt(ctx, in)
	if err != nil {
		return contract.CallModelResult{}, err
	}
	var ag agent.Agent
	err = a.db(ctx, "load agent", func() (err error) {
		ag, err = a.store.AgentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion)
		return err
	})
	if err != nil {
		return contract.CallModelResult{}, fmt.Errorf("load agent %q version %d: %w", in.AgentID, in.AgentVersion, agentNotFound(err))
	}
	if in.Model != "" {
		if !ag.Calls(in.Model) {
			return contract.CallModelResult{}, agent.Errorf(agent.CodeInvalid,
				"model %q is neither agent %q's model nor one of its fallback models", in.Model, ag.ID)
		}
		// From here on the call is the fallback's: its price, its span,
		// its ledger row.
		ag.Model = in.Model
	}
	// A thinking model spends its budget inside max_tokens: leave room
	// for the answer (and reserve for it: reserve).
	if b := ag.Thinking.Budget(); b > 0 && ag.Limits.MaxOutputTokens <= b {
		ag.Limits.MaxOutputTokens = b + agent.DefaultReservedOutputTokens
	}
	schema, err := structured.Compile(outputSchema(ag, in))
	if err != nil {
		return contract.CallModelResult{}, err
	}
	var steps []agent.Message
	err = a.db(ctx, "load steps", func() (err error) {
		steps, err = a.turnSoFar(ctx, in)
		return err
	})
	if err != nil {
		return contract.CallModelResult{}, err
	}
	if len(steps) > in.Seq {
		res, err := a.storedReply(ctx, ag, in, steps[in.Seq])
		if err != nil {
			return contract.CallModelResult{}, err
		}
		return checkOutput(res, schema), nil
	}
	// Prices and budgets come with the tenant's cached catalog snapshot,
	// current within moments of a catalog change.
	var billing store.Billing
	err = a.db(ctx, "load prices and budgets", func() error {
		snap, err := a.routes.Routing(ctx, in.TenantID)
		if err == nil {
			billing = snap.Billing
		}
		return err
	})
	if err != nil {
		return contract.CallModelResult{}, err
	}
	var msgs []agent.Message
	err = a.db(ctx, "load session", func() (err error) {
		msgs, err = a.messages(ctx, ag, in, steps)
		return err
	})
	if err != nil {
		return contract.CallModelResult{}, err
	}
	if err := a.guardInput(ctx, ag, in, msgs); err != nil {
		return contract.CallModelResult{}, err
	}
	held, err := a.reserve(ctx, &ag, in, billing, msgs)
	if err != nil {
		return contract.CallModelResult{}, err
	}
	permit, err := a.admit(ctx, ag, in, msgs)
	if err != nil {
		if held {
			a.release(ctx, in)
		}
		return contract.CallModelResult{}, err
	}
	resp, tail, err := a.tracedGenerate(ctx, ag, in, msgs)
	if err != nil {
		permit.Done(ctx, nil)
		a.refused(ctx, ag.Model, err)
		if held {
			a.release(ctx, in)
		}
		return contract.CallModelResult{}, err
	}
	permit.Done(ctx, &resp.Usage)
	reply := resp.Message
	reply.Role = agent.RoleAssistant
	reply.Usage, reply.Model = &resp.Usage, resp.Model
	call := store.ModelCall{TenantID: in.TenantID, JobID: in.JobID, Step: in.Seq, Attempt: stepAttempt(ctx, in),
		AgentID: ag.ID, AgentVersion: ag.Version, SessionID: in.SessionID, Model: cmp.Or(resp.Model, ag.Model), Usage: resp.Usage,
		Unbudgeted: len(billing.Budgets.Periods()) == 0 && !held}
	if p, ok := agent.PriceOf(billing.Prices, call.Model); ok {
		cost := p.Cost(resp.Usage)
		call.Cost = &cost
	}
	// The model has answered (and been paid): wait for the database
	// rather than call it again. The ledger row goes with the reply, so
	// that the call is counted once whichever attempt stores it.
	if err := a.db(ctx, "store reply", func() error { return a.store.PutReply(ctx, call, reply) }); err != nil {
		return contract.CallModelResult{}, fmt.Errorf("store reply: %w", err)
	}
	if tail.tripped != "" {
		// The reply (what was released, then the refusal) is stored and
		// counted; the turn ends here.
		a.log(ctx).Info("output guard tripped", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID),
			zap.String("channel", string(tail.trippedOn.Kind)), zap.String("rule", tail.tripped))
		countGuard(ctx, in.TenantID, "output", "tripped", 1)
		return contract.CallModelResult{}, agent.Errorf(agent.CodeGuardrailTripped,
			"the %s broke the output guard's rule %s: it was cut there, and the refusal sent in its place", tail.trippedOn, tail.tripped)
	}
	return checkOutput(contract.CallModelResult{
		Content:      reply.Content,
		Reasoning:    agent.Clip(resp.Reasoning, agent.MaxResultReasoningBytes),
		ToolCalls:    reply.ToolCalls,
		Usage:        resp.Usage,
		Model:        resp.Model,
		FinishReason: resp.FinishReason,
		Approvals:    a.approvals(ctx, ag, in, reply.ToolCalls),
		Tail:         tail.batch,
		TailLive:     tail.live,
	}, schema), nil
}

// outputSchema is the schema the call's answer must match: the turn's
// own, else its agent's; nil for none.
func outputSchema(ag agent.Agent, in contract.CallModelInput) json.RawMessage {
	return agent.TurnRequest{OutputSchema: in.OutputSchema}.OutputSchemaOf(ag)
}

// checkOutput checks a final answer against the turn's output schema (nil:
// none), for the turn to take it (OutputJSON) or repair it
// (OutputProblems). A reply that asks for tools is not an answer yet.
func checkOutput(res contract.CallModelResult, schema *structured.Schema) contract.CallModelResult {
	if schema == nil || len(res.ToolCalls) > 0 {
		return res
	}
	out, problems := schema.Check(res.Content)
	if len(problems) > 0 {
		res.OutputProblems = problems.String()
		return res
	}
	res.OutputJSON = out
	return res
}

// turnSoFar stores the tool calls that failed for good as their results
// and returns the turn's steps.
func (a *Activities) turnSoFar(ctx context.Context, in contract.CallModelInput) ([]agent.Message, error) {
	if err := a.storeToolFailures(ctx, in.TenantID, in.JobID, in.ToolFailures); err != nil {
		return nil, err
	}
	for _, st := range in.Steer {
		// A message added to the turn while it ran, read in its place.
		if err := a.store.PutStep(ctx, in.TenantID, in.JobID, st.Seq, agent.Message{Role: agent.RoleUser, Content: st.Prompt}); err != nil {
			return nil, fmt.Errorf("store a message added to the turn: %w", err)
		}
	}
	if in.Repair != "" {
		// The answer to repair is step Seq-2; what was wrong with it comes
		// after it, and the repaired answer after that.
		msg := agent.Message{Role: agent.RoleUser, Content: structured.RepairPrompt(in.Repair)}
		if err := a.store.PutStep(ctx, in.TenantID, in.JobID, in.Seq-1, msg); err != nil {
			return nil, fmt.Errorf("store the output's problems: %w", err)
		}
	}
	steps, err := a.store.Steps(ctx, in.TenantID, in.JobID)
	if err != nil {
		return nil, fmt.Errorf("load steps of job %q: %w", in.JobID, err)
	}
	if len(steps) < in.Seq {
		return nil, fmt.Errorf("job %q has %d steps stored, want %d before calling the model", in.JobID, len(steps), in.Seq)
	}
	return steps, nil
}

// storeToolFailures stores the results of tool calls that did not run.
func (a *Activities) storeToolFailures(ctx context.Context, tenantID, jobID string, failures []contract.ToolFailure) error {
	for _, f := range failures {
		msg := agent.Message{Role: agent.RoleTool, ToolCallID: f.CallID, Name: f.Tool, Content: errorPrefix + f.Message}
		if err := a.store.PutStep(ctx, tenantID, jobID, f.Seq, msg); err != nil {
			return fmt.Errorf("store failed tool call %q: %w", f.CallID, err)
		}
	}
	return nil
}

// storedReply is the reply an earlier attempt stored but did not report.
func (a *Activities) storedReply(ctx context.Context, ag agent.Agent, in contract.CallModelInput, m agent.Message) (contract.CallModelResult, error) {
	if m.Role != agent.RoleAssistant {
		return contract.CallModelResult{}, agent.Errorf(agent.CodeInternal,
			"step %d of job %q is a %s message, not the model's reply", in.Seq, in.JobID, m.Role)
	}
	res := contract.CallModelResult{Content: m.Content, ToolCalls: m.ToolCalls, Model: cmp.Or(m.Model, ag.Model), Stored: true,
		FinishReason: storedFinish(m), Approvals: a.approvals(ctx, ag, in, m.ToolCalls),
		Reasoning: agent.Clip(agent.ReasoningText(m.Reasoning), agent.MaxResultReasoningBytes)}
	if m.Usage != nil {
		res.Usage = *m.Usage
	}
	if in.Stream && in.StreamID != "" && in.TailInResult {
		// The attempt that stored the reply kept its last batch for its
		// result, which the turn never got: stream the whole reply again.
		tail, ok, err := eventlog.Restream(ctx, a.sinks(ctx, in.Notify), a.streamCall(ctx, in), m.Content, m.ToolCalls)
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
	return res, nil
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
	info := activity.GetInfo(ctx)
	ap, ok := a.events.(eventlog.Appender)
	if !info.IsLocalActivity || !in.Stream || in.StreamID == "" || !a.liveFirst(in) || !ok {
		return in, nil
	}
	var n int
	err := a.db(ctx, "claim stream", func() (err error) {
		n, err = ap.NextAttempt(ctx, in.StreamID, in.Seq, stepAttempt(ctx, in))
		return err
	})
	if err != nil {
		return in, fmt.Errorf("claim stream for step %d: %w", in.Seq, err)
	}
	in.AttemptBase = n - int(info.Attempt)
	return in, nil
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

// generate calls the model, streaming what it sends — text, reasoning,
// tool-call arguments — to the turn when asked. With in.TailInResult the
// last batch is returned instead of sent.
func (a *Activities) generate(ctx context.Context, ag agent.Agent, in contract.CallModelInput, msgs []agent.Message) (*llm.Response, streamTail, error) {
	// The prompt's prefix — the tools in the version's order, then its
	// system prompt — is the same for every call of the agent version;
	// what varies (the note on data, the session, the turn) follows it.
	// The key lets the provider keep that prefix cached between turns.
	req := llm.Request{
		Model:       ag.Model,
		Messages:    msgs,
		Tools:       ag.Tools,
		MaxTokens:   ag.Limits.MaxOutputTokens,
		Temperature: ag.Temperature,
		CacheKey:    agent.PromptCacheKey(in.TenantID, ag.ID, ag.Version),

		ReasoningBudget: ag.Thinking.Budget(),
		ReasoningEffort: ag.Thinking.EffortLevel(),
		// A message's images and files are sent by their bytes, read from
		// the tenant's blobs: a ref of another tenant's is not found; one
		// larger than a model is sent is refused before it is read.
		Media: func(ctx context.Context, ref string) ([]byte, string, error) {
			b, err := a.store.OpenTenantBlob(ctx, in.TenantID, ref)
			if err != nil {
				return nil, "", err
			}
			defer b.Close()
			info := b.Info()
			if info.Size > llm.MaxMediaBytes {
				return nil, "", agent.Errorf(agent.CodeInvalid, "%s is %d bytes; a model is sent at most %d", ref, info.Size, llm.MaxMediaBytes)
			}
			data := make([]byte, info.Size)
			if _, err := io.ReadFull(b, data); err != nil {
				return nil, "", fmt.Errorf("read %s: %w", ref, err)
			}
			return data, info.ContentType, nil
		},
	}
	if schema := outputSchema(ag, in); schema != nil {
		req.Output = &llm.OutputFormat{Name: ag.ID, Schema: schema}
	}
	guard, err := a.outputGuard(ctx, ag, in)
	if err != nil {
		return nil, streamTail{}, err
	}
	var held *guardpkg.Reply
	if guard != nil {
		held = guard.Reply()
	}
	var st *eventlog.Batcher
	if in.Stream && in.StreamID != "" {
		var err error
		if st, err = eventlog.StartBatcher(ctx, a.sinks(ctx, in.Notify), a.streamCall(ctx, in), a.streamInterval, a.streamMaxBytes); err != nil {
			return nil, streamTail{}, err
		}
		req.OnChunk = func(ctx context.Context, c llm.Chunk) error {
			ch, text := channelOf(c)
			if held == nil {
				return emitReleased(ctx, st, []guardpkg.Release{{Channel: ch, Text: text}})
			}
			// Every channel goes out a window at a time, once the guard
			// has read it; after a broken rule, nothing more does (the
			// model finishes, so that its usage is counted).
			out, _ := held.Add(ch, text)
			return emitReleased(ctx, st, out)
		}
	} else {
		// The batcher heartbeats a streamed call; an unstreamed one needs
		// its own, or a long call is given up for lost while it still runs
		// and is paid for again.
		stop := heartbeat(ctx, time.Second)
		defer stop()
	}
	resp, err := a.model.Generate(ctx, req)
	tripped := ""
	if err == nil && held != nil {
		// What is still held is checked at the reply's end, and so is
		// what will be stored and run where it is not what was released;
		// a broken rule replaces whatever was not released with the
		// refusal.
		var out []guardpkg.Release
		out, tripped = held.End(finalChannels(resp))
		if st != nil {
			err = emitReleased(ctx, st, out)
		}
		if tripped != "" {
			refusal := refuse(resp, held, guard.Refusal)
			if st != nil && err == nil {
				err = st.Add(ctx, refusal)
			}
		}
	}
	var tail streamTail
	if st != nil {
		var serr error
		switch {
		case err != nil:
			st.Abort()
		case in.TailInResult && tripped == "":
			// (A tripped call fails, so its tail cannot ride in its
			// result: it is sent, as a whole stream is.)
			if b, ok, e := st.CloseTail(); e != nil {
				serr = e
			} else if ok {
				tail = streamTail{batch: &b, live: st.Published()}
			}
		default:
			serr = st.Close()
		}
		if serr != nil {
			// The reply is not stored: the retry calls the model again and
			// voids what this attempt streamed.
			return nil, streamTail{}, serr
		}
	}
	if err != nil {
		a.log(ctx).Warn("model call failed", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID),
			zap.String("model", ag.Model), zap.Error(err))
		return nil, streamTail{}, modelError(err)
	}
	if held != nil {
		tail.tripped, tail.trippedOn = held.Tripped()
	}
	return resp, tail, nil
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
func finalChannels(resp *llm.Response) []guardpkg.Release {
	out := []guardpkg.Release{
		{Channel: guardpkg.Channel{Kind: guardpkg.ChannelReasoning}, Text: resp.Reasoning},
		{Channel: guardpkg.Channel{Kind: guardpkg.ChannelText}, Text: resp.Message.Content},
	}
	for _, c := range resp.Message.ToolCalls {
		out = append(out, guardpkg.Release{Channel: guardpkg.Channel{Kind: guardpkg.ChannelArgs, CallID: c.ID, Tool: c.Name}, Text: c.Arguments})
	}
	return out
}

// emitReleased hands what the output guard released (or, without one,
// what the model streamed) to the batcher, each piece as the event kind
// its channel becomes.
func emitReleased(ctx context.Context, st *eventlog.Batcher, out []guardpkg.Release) error {
	for _, r := range out {
		var err error
		switch r.Kind {
		case guardpkg.ChannelReasoning:
			err = st.AddReasoning(ctx, r.Text)
		case guardpkg.ChannelArgs:
			err = st.AddToolArgs(ctx, r.CallID, r.Tool, r.Text)
		default:
			err = st.Add(ctx, r.Text)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// refuse makes a reply that broke the output guard what its clients saw:
// what was released of its text and reasoning, then the refusal (which
// it returns, as it is to be sent), and none of its tool calls, which are
// not run.
func refuse(resp *llm.Response, held *guardpkg.Reply, refusal string) string {
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
	// tripped is the output guard's rule the reply broke ("" for none),
	// trippedOn the channel it broke it on.
	tripped   string
	trippedOn guardpkg.Channel
}

// heartbeat records a heartbeat every interval until stop is called.
func heartbeat(ctx context.Context, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// modelError says what a provider's failure means: retryable failures
// stay retryable (with the provider's Retry-After as the least delay), a
// request refused as over the model's context window is
// ContextLengthExceeded, any other refused request ModelRejected.
func modelError(err error) error {
	var le *llm.Error
	if errors.As(err, &le) {
		code := agent.CodeModelRejected
		if le.Retryable {
			code = agent.CodeModelFailed
		}
		if le.ContextLength {
			code = agent.CodeContextLength
		}
		return &agent.Error{Code: code, Message: "model call failed: " + le.Message, RetryAfter: le.RetryAfter}
	}
	if agent.IsCode(err, agent.CodeInvalid) {
		return agent.WithCode(agent.CodeModelRejected, err)
	}
	return fmt.Errorf("model call: %w", err)
}
