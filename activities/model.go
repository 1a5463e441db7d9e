package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/governor"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/words"
)

// CallModel sends the turn so far to the agent's model (or to the
// fallback model the input names) and stores the reply as step Seq. A
// reply an earlier attempt stored is returned as it is, without calling
// the model again, whichever model this call names: a fallback never pays
// again for a call that produced an answer.
//
// It runs as named stages over one modelCall, in order: load, then —
// unless an earlier attempt stored the reply (replayStored) — prompt,
// stream inside the registry's hooks (hooked), price and store. What
// runs around the call is a hook (concerns): the agent's input guards,
// tracing and the worker's own, the budget reservation (settled when the
// reply is stored), the output guard and the provider governor's
// admission. What the stages and hooks acquire (the stream or a
// heartbeat, what a hook gives back: giveBack) is given back by one
// clean-up, once, whichever stage fails (modelCall.cleanUp).
func (a *Activities) CallModel(ctx context.Context, in contract.CallModelInput) (contract.CallModelResult, error) {
	if in.HandOffAfterMs > 0 && activity.GetInfo(ctx).IsLocalActivity {
		return a.callHandingOff(ctx, in)
	}
	return a.callWatched(ctx, in, nil)
}

// callWatched is CallModel under the interruption watch. numbered, when
// not nil, is sent the step's attempt the call runs as once it is known
// (handoff.go).
func (a *Activities) callWatched(ctx context.Context, in contract.CallModelInput, numbered chan<- int) (contract.CallModelResult, error) {
	if a.interrupts != nil && in.StreamID != "" {
		var stop func()
		ctx, stop = a.interrupts.Watch(ctx, in.StreamID)
		defer stop()
	}
	res, err := a.callModel(ctx, in, numbered)
	if err != nil && errors.Is(context.Cause(ctx), eventlog.ErrInterrupted) {
		// Not retried: the turn acts on what interrupted the call, a
		// cancellation or a message steered in.
		return contract.CallModelResult{}, contract.Interrupted()
	}
	return res, err
}

// InterruptModel stops the model call in flight of a turn a message was
// steered into, on the live path (Interrupt): the worker running it ends
// it at once, and the turn goes on with the message. Sending it twice, or
// when no call runs, is harmless; when it is lost the call runs to its end
// and the turn takes the message after it, as it would without.
func (a *Activities) InterruptModel(ctx context.Context, in contract.InterruptModelInput) error {
	if a.interrupt == nil || in.StreamID == "" {
		return nil
	}
	if err := a.interrupt(ctx, in.StreamID); err != nil {
		return fmt.Errorf("interrupt the model call: %w", err)
	}
	return nil
}

// Interrupts stops the model calls of turns interrupted on the live path
// (pglive.Interrupts). A call runs under the context Watch returns, which
// ends with the cause eventlog.ErrInterrupted when its turn is cancelled:
// the only way a cancellation reaches a local call sooner than its
// workflow task's heartbeat, and a regular one sooner than its next
// heartbeat's answer.
type Interrupts interface {
	Watch(ctx context.Context, streamID string) (context.Context, func())
}

// callModel is CallModel under the interruption watch.
func (a *Activities) callModel(ctx context.Context, in contract.CallModelInput, numbered chan<- int) (contract.CallModelResult, error) {
	m := &modelCall{a: a, in: in}
	defer m.keepAlive(ctx)()
	if err := m.load(ctx); err != nil {
		return contract.CallModelResult{}, err
	}
	if numbered != nil {
		numbered <- stepAttempt(ctx, m.in)
	}
	if m.steps.reply != nil {
		return m.replayStored(ctx)
	}
	defer m.cleanUp(ctx)
	for _, stage := range []func(context.Context) error{
		m.prompt, m.hooked(m.stream), m.price, m.store,
	} {
		if err := stage(ctx); err != nil {
			return contract.CallModelResult{}, err
		}
	}
	return m.result(ctx)
}

// modelCall is one attempt of CallModel as its stages fill it in: what
// each stage found or acquired, for the stages after it and for the
// clean-up.
type modelCall struct {
	a  *Activities
	in contract.CallModelInput // numbered (localAttempt) by load

	// load
	ag       agent.Agent        // the pinned version, calling the model this call names
	compiled *agent.Compiled    // the pinned version as its model receives it (compiledAgent)
	schema   *structured.Schema // the answer's; nil for none
	steps    turnSteps          // what the call reads of the turn's steps, stored
	// prompt
	billing store.Billing   // the tenant's prices and budgets
	msgs    []agent.Message // what the model reads
	// the hooks' start (concerns), given back by cleanUp
	held     bool                    // a budget reservation may be held under the attempt's key (budgets)
	permit   *governor.Permit        // the governor's admission; nil: none, or ended (endAdmission)
	giveBack []func(context.Context) // what the hooks acquired, given back last first by cleanUp
	// stream, inside the hooks (hooked)
	hook      *hooks.ModelCall
	out       replyOut
	streamed  atomic.Pointer[eventlog.Batcher] // the call's stream once open, for its heartbeats (beat)
	waiting   atomic.Pointer[string]           // what the governor holds the call for, for its heartbeats
	resp      *llm.Response                    // the reply; nil until the model answered
	tail      streamTail
	tripped   string           // the output guard's rule the reply broke ("" for none; outputGuardHook)
	trippedOn guardpkg.Channel // the channel it broke it on
	// price and store
	ledger    store.ModelCall // the call's ledger row
	stored    bool            // the reply and its ledger row are stored: the reservation is settled
	uncounted bool            // a paid reply was neither stored nor counted (cleanUp)
}

// load reads what every attempt needs: the agent version the turn
// pinned, with the model this call names (a fallback's from here on: its
// price, its span, its ledger row) and room for a thinking model's
// answer; the output schema; and the turn's steps, what the turn hands
// the call stored first (turnSoFar).
func (m *modelCall) load(ctx context.Context) error {
	a, in := m.a, m.in
	var err error
	if m.ag, err = a.agentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion); err != nil {
		return err
	}
	compiled, _ := a.compiledAgent(ctx, m.ag, false)
	m.compiled = &compiled
	if in.Model != "" {
		if !m.ag.Calls(in.Model) {
			return agent.Errorf(agent.CodeInvalid, "model %q is neither agent %q's model nor one of its fallback models", in.Model, m.ag.ID)
		}
		m.ag.Model = in.Model
	}
	// A thinking model spends its budget inside max_tokens: leave room
	// for the answer (and reserve for it: reserve).
	if b := m.ag.Thinking.Budget(); b > 0 && m.ag.Limits.MaxOutputTokens <= b {
		m.ag.Limits.MaxOutputTokens = b + agent.DefaultReservedOutputTokens
	}
	if m.schema, err = structured.Compile(outputSchema(m.ag, in)); err != nil {
		return err
	}
	err = a.db(ctx, "load steps", func() (err error) {
		m.steps, err = a.turnSoFar(ctx, in)
		return err
	})
	if err != nil || m.steps.reply != nil {
		// A stored reply claims nothing (replayStored).
		return err
	}
	m.in, err = a.localAttempt(ctx, in)
	return err
}

// prompt reads the tenant's prices and budgets, which come with its
// cached settings (current within moments of a catalog change),
// and composes what the model reads (messages).
func (m *modelCall) prompt(ctx context.Context) error {
	a, in := m.a, m.in
	err := a.db(ctx, "load prices and budgets", func() error {
		settings, err := a.tenants.Settings(ctx, in.TenantID)
		if err == nil {
			m.billing = settings.Billing
		}
		return err
	})
	if err != nil {
		return err
	}
	return a.db(ctx, "load session", func() (err error) {
		m.msgs, err = a.messages(ctx, m.ag, in, m.steps)
		return err
	})
}

// stream sends the request and takes the reply as the model sends it
// (replyOut: through the output guard, to the turn's stream when the
// call streams), then ends the reply (endReply). A failed call fails the
// stage: the hooks see it (ModelError; the governor's admission ends
// there, as it does on the reply's return).
func (m *modelCall) stream(ctx context.Context) error {
	req := m.request()
	if err := m.openReply(ctx); err != nil {
		return err
	}
	if m.out.st != nil {
		req.OnChunk = m.out.chunk
	}
	if m.a.hooks.Chunks() {
		req.OnChunk = m.hookChunks(req.OnChunk)
	}
	resp, err := m.a.model.Generate(ctx, req)
	if err != nil {
		m.out.abort()
		log := m.a.log(ctx).Warn
		if errors.Is(ctx.Err(), context.Canceled) {
			// Stopped because its turn was cancelled, which the workflow
			// logs once: a person's choice, not the model's failure.
			log = m.a.log(ctx).Debug
		}
		log("model call failed", zap.String("tenant", m.in.TenantID), zap.String("job_id", m.in.JobID),
			zap.String("model", m.ag.Model), zap.Error(err))
		return modelError(err)
	}
	restoreArgs(resp, req.Tools)
	m.resp = resp
	return m.endReply(ctx)
}

// endReply ends the reply: the hooks see it as soon as the model has
// returned it (ModelReturn: the governor's admission ends, with what the
// provider counted, so the stages after it take no provider capacity;
// the output guard checks its end), and what they leave of it is the
// reply. Then the stream is closed, its last batch kept for the result
// when the turn asks (TailInResult). A reply that broke the guard fails
// its call, so its tail cannot ride in its result: it is sent, as a
// whole stream is. When the stream fails, the reply is not stored: the
// retry calls the model again and voids what this attempt streamed.
func (m *modelCall) endReply(ctx context.Context) error {
	r := replyOf(m.resp)
	if err := m.a.hooks.ModelReturn(ctx, m.hook, r); err != nil {
		return err
	}
	m.resp.Message, m.resp.Reasoning, m.resp.FinishReason = r.Message, r.Reasoning, r.FinishReason
	var err error
	m.tail, err = m.out.close(m.in.TailInResult && m.tripped == "")
	return err
}

// replyOf is the model's reply as hooks see it.
func replyOf(r *llm.Response) *hooks.ModelReply {
	return &hooks.ModelReply{Model: r.Model, Message: r.Message, Reasoning: r.Reasoning, Usage: r.Usage, FinishReason: r.FinishReason}
}

// price is the call's ledger row: what the provider counted, under the
// model that answered, at the tenant's price for it.
func (m *modelCall) price(ctx context.Context) error {
	m.ledger = m.ledgerRow(ctx)
	return nil
}

// ledgerRow is the ledger's row of the call the model answered, under
// the attempt's key (store.ModelCall).
func (m *modelCall) ledgerRow(ctx context.Context) store.ModelCall {
	in, resp := m.in, m.resp
	call := store.ModelCall{TenantID: in.TenantID, JobID: in.JobID, Step: in.Seq, Attempt: stepAttempt(ctx, in),
		AgentID: m.ag.ID, AgentVersion: m.ag.Version, SessionID: in.SessionID, Model: cmp.Or(resp.Model, m.ag.Model), Usage: resp.Usage, Channel: in.Channel,
		Unbudgeted: len(m.billing.Budgets.Periods()) == 0 && !m.held, WholeFrom: in.WholeFrom, DigestFrom: in.DigestFrom}
	if p, ok := agent.PriceOf(m.billing.Prices, call.Model); ok {
		cost := p.Cost(resp.Usage)
		call.Cost = &cost
	}
	return call
}

// store stores the reply as step Seq with its ledger row, in the one
// statement that settles the step's reservations (store.PutReply): the
// call is counted once, whichever attempt stores it. The model has
// answered (and been paid): it waits for the database rather than call
// the model again.
func (m *modelCall) store(ctx context.Context) error {
	reply := m.resp.Message
	reply.Role = agent.RoleAssistant
	reply.Usage, reply.Model = &m.resp.Usage, m.resp.Model
	if err := m.a.db(ctx, "store reply", func() error { return m.a.store.PutReply(ctx, m.ledger, reply) }); err != nil {
		return fmt.Errorf("store reply: %w", err)
	}
	m.stored = true
	return nil
}

// result is what the turn is told: the reply, checked against the output
// schema, with the approvals its tool calls need; or, for a reply that
// broke the output guard (stored and counted all the same: what was
// released, then the refusal), GuardrailTripped, and the turn ends here.
func (m *modelCall) result(ctx context.Context) (contract.CallModelResult, error) {
	in, resp := m.in, m.resp
	if m.tripped != "" {
		m.a.log(ctx).Info("output guard tripped", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID),
			zap.String("channel", string(m.trippedOn.Kind)), zap.String("rule", m.tripped))
		countGuard(ctx, in.TenantID, "output", "tripped", 1)
		return contract.CallModelResult{}, agent.Errorf(agent.CodeGuardrailTripped,
			"the %s broke the output guard's rule %s: it was cut there, and the refusal sent in its place", m.trippedOn, m.tripped)
	}
	return checkOutput(contract.CallModelResult{
		Content:      resp.Message.Content,
		Reasoning:    words.Clip(resp.Reasoning, agent.MaxResultReasoningBytes),
		ToolCalls:    resp.Message.ToolCalls,
		Usage:        resp.Usage,
		Model:        resp.Model,
		FinishReason: resp.FinishReason,
		Approvals:    m.a.approvals(ctx, m.ag, in, resp.Message.ToolCalls),
		Tail:         m.tail.batch,
		TailLive:     m.tail.live,
	}, m.schema), nil
}

// cleanUp gives back, once, what the stages and the hooks acquired and
// did not hand on, whichever stage failed, or none; CallModel defers it.
//
//   - The stream, or the heartbeat, still open is stopped (replyOut.abort).
//   - A reply the model gave that was not stored — the stream or the
//     database failed after it answered — was paid for all the same: it
//     is counted in the ledger, under the attempt's key, so that the
//     tenant's budgets and usage see it (a retry that calls the model
//     again is counted under its own). When the ledger cannot count it,
//     the call is uncounted: the budget reservation stands for it.
//   - What the hooks acquired is given back, last first (giveBack): the
//     governor's admission ends, the budget reservation is released
//     unless the stored reply settled it or it stands for an uncounted
//     reply (budgets).
func (m *modelCall) cleanUp(ctx context.Context) {
	m.out.abort()
	if !m.stored && m.resp != nil {
		m.countUnstored(ctx)
	}
	for i := len(m.giveBack) - 1; i >= 0; i-- {
		m.giveBack[i](ctx)
	}
}

// countUnstored counts a paid reply that was not stored in the ledger,
// under the attempt's key, or marks the call uncounted.
func (m *modelCall) countUnstored(ctx context.Context) {
	// The stage may have failed because ctx was cancelled.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := m.a.store.PutUsage(ctx, m.ledgerRow(ctx)); err != nil {
		m.a.log(ctx).Warn("model reply not stored nor counted; its budget reservation stands for it until it expires",
			zap.String("tenant", m.in.TenantID), zap.String("job_id", m.in.JobID), zap.Int("step", m.in.Seq), zap.Error(err))
		m.uncounted = true
	}
}
