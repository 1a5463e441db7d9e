package timeline

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/store"
)

// page reads the items of the steps from <= seq < to of a turn.
type page struct {
	src      Store
	turn     store.TimelineTurn
	from, to int
}

// items reads the page's steps (and the one before, whose end is the
// first item's start), then the ledger rows, approvals and deliveries
// of those steps, and makes an item of each step.
func (p page) items(ctx context.Context) ([]Item, error) {
	tenant, job := p.turn.TenantID, p.turn.JobID
	steps, err := p.src.DatedSteps(ctx, tenant, job, max(p.from-1, 0), p.to)
	if err != nil {
		return nil, err
	}
	b := &itemBuilder{turn: p.turn, prevAt: p.turn.CreatedAt}
	if len(steps) > 0 && steps[0].Seq < p.from {
		b.see(steps[0])
		steps = steps[1:]
	}
	if len(steps) == 0 {
		return []Item{}, nil
	}
	if err := p.findAsker(ctx, b, steps[0]); err != nil {
		return nil, err
	}
	if err := p.readExtras(ctx, b, steps); err != nil {
		return nil, err
	}
	items := make([]Item, 0, len(steps))
	for _, st := range steps {
		items = append(items, b.item(st))
	}
	return items, nil
}

// findAsker finds the reply that asked for the calls whose results the
// page begins with, when it is on an earlier page: a bounded walk back
// from the page's first step.
func (p page) findAsker(ctx context.Context, b *itemBuilder, first store.DatedStep) error {
	if first.Role != agent.RoleTool || b.asker != nil {
		return nil
	}
	st, err := p.src.AssistantBefore(ctx, p.turn.TenantID, p.turn.JobID, first.Seq, maxRound)
	switch {
	case agent.IsCode(err, agent.CodeNotFound):
		return nil
	case err != nil:
		return err
	}
	b.asker = &st
	return nil
}

// readExtras reads what the page's steps need beside their messages:
// the ledger rows of its replies, the approvals and deliveries of its
// tool calls.
func (p page) readExtras(ctx context.Context, b *itemBuilder, steps []store.DatedStep) error {
	tenant, job := p.turn.TenantID, p.turn.JobID
	calls, err := p.src.ChatCalls(ctx, tenant, job, p.from, p.to)
	if err != nil {
		return err
	}
	b.ledger = make(map[int]store.ModelCall, len(calls))
	for _, c := range calls {
		b.ledger[c.Step] = c
	}
	var callIDs []string
	var seqs []int
	for _, st := range steps {
		if st.Role == agent.RoleTool {
			seqs = append(seqs, st.Seq)
			if st.ToolCallID != "" {
				callIDs = append(callIDs, st.ToolCallID)
			}
		}
	}
	if b.approvals, err = p.src.CallApprovals(ctx, tenant, job, callIDs); err != nil {
		return err
	}
	b.effects, err = p.src.StepEffects(ctx, tenant, job, seqs)
	return err
}

// itemBuilder makes the items of a page's steps, one after the other.
type itemBuilder struct {
	turn store.TimelineTurn
	// prevAt is when the step before was stored (the turn's start before
	// its first step); asker is the last reply, whose calls the tool
	// results after it answer.
	prevAt    time.Time
	asker     *store.DatedStep
	ledger    map[int]store.ModelCall
	approvals map[string]agent.ApprovalRecord
	effects   map[int]effects.Intent
}

// see moves the builder past a step.
func (b *itemBuilder) see(st store.DatedStep) {
	b.prevAt = st.CreatedAt
	if st.Role == agent.RoleAssistant {
		b.asker = &st
	}
}

// item is a step's item; the builder moves past it.
func (b *itemBuilder) item(st store.DatedStep) Item {
	it := Item{Seq: st.Seq, Run: -1, StartedAt: b.prevAt, EndedAt: st.CreatedAt}
	switch {
	case st.Seq == 0 && st.Role == agent.RoleUser:
		it.Kind, it.Text = KindPrompt, st.Text()
	case st.Role == agent.RoleAssistant:
		b.modelCall(&it, st)
	case st.Role == agent.RoleTool:
		b.toolCall(&it, st)
	default:
		it.Kind, it.Text = KindMessage, st.Text()
	}
	it.DurationMs = max(it.EndedAt.Sub(it.StartedAt).Milliseconds(), 0)
	b.see(st)
	return it
}

// modelCall fills a reply's item, with its ledger row when it has one
// (else what the stored message says of its call).
func (b *itemBuilder) modelCall(it *Item, st store.DatedStep) {
	m := st.Message
	it.Kind, it.Text, it.Model = KindModelCall, m.Content, m.Model
	for _, r := range m.Reasoning {
		if r.Text != "" {
			it.Reasoning = append(it.Reasoning, r.Text)
		}
	}
	for _, c := range m.ToolCalls {
		it.Calls = append(it.Calls, CallRef{CallID: c.ID, Name: c.Name})
	}
	u := m.Usage
	if c, ok := b.ledger[st.Seq]; ok {
		u = &c.Usage
		it.Model = cmp.Or(c.Model, it.Model)
		it.CostUSD = c.Cost
		it.Attempt, it.Retries = c.Attempt, max(c.Attempt-1, 0)
		it.Request = &RequestShape{WholeFrom: c.WholeFrom, DigestFrom: c.DigestFrom}
	}
	if u != nil {
		it.InputTokens, it.OutputTokens = int64(u.PromptTokens), int64(u.CompletionTokens)
		it.CachedTokens, it.ReasoningTokens = int64(u.CachedTokens), int64(u.ReasoningTokens)
	}
}

// toolErrorPrefix marks a stored tool result as an error (the
// activities' errorPrefix: the model reads it so).
const toolErrorPrefix = "error: "

// toolCall fills a tool result's item: the call's arguments from the
// reply that asked for it (or, for a call a program made, from the
// result itself), which is also when the call started.
func (b *itemBuilder) toolCall(it *Item, st store.DatedStep) {
	m := st.Message
	text := m.Text()
	tc := &ToolCall{CallID: m.ToolCallID, Name: m.Name, CacheHit: m.CacheHit, Program: m.Program,
		Error: strings.HasPrefix(m.Content, toolErrorPrefix)}
	tc.Result, tc.ResultClipped = clip(text, MaxResultPreview)
	if call, asked, ok := b.callOf(m); ok {
		tc.Args, tc.Name = argsJSON(call.Arguments), cmp.Or(tc.Name, call.Name)
		if asked {
			it.StartedAt = b.asker.CreatedAt
		}
	}
	if m.Data != nil && m.Data.Ref != "" {
		tc.ResultRef = m.Data.Ref
	}
	if in, ok := b.effects[st.Seq]; ok {
		d := &Delivery{State: "sending", Status: in.Status, Target: in.Target}
		if in.Delivered {
			d.State = "delivered"
		}
		tc.Delivery = d
	}
	if r, ok := b.approvals[m.ToolCallID]; ok && m.ToolCallID != "" {
		tc.Approval = &Approval{Outcome: r.Outcome, Approver: r.Approver, Via: r.Via, Reason: r.Reason, GrantID: r.GrantID,
			RequestedAt: r.RequestedAt, DecidedAt: r.DecidedAt}
	}
	it.Kind, it.Tool = KindToolCall, tc
}

// callOf is the call a tool result answers: asked says the last reply
// asked for it; a call a program made carries its own call.
func (b *itemBuilder) callOf(m agent.Message) (call agent.ToolCall, asked, ok bool) {
	if m.Program != "" {
		for _, c := range m.ToolCalls {
			if c.ID == m.ToolCallID || m.ToolCallID == "" {
				return c, false, true
			}
		}
		return agent.ToolCall{}, false, false
	}
	if b.asker == nil {
		return agent.ToolCall{}, false, false
	}
	for _, c := range b.asker.ToolCalls {
		if c.ID == m.ToolCallID {
			return c, true, true
		}
	}
	return agent.ToolCall{}, false, false
}

// argsJSON is a call's arguments as JSON: as the model wrote them when
// they are JSON, else as a JSON string of what it wrote.
func argsJSON(args string) json.RawMessage {
	if args == "" {
		return nil
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	raw, _ := json.Marshal(args)
	return raw
}

// clip cuts s to at most n bytes, between runes, and says whether it
// did.
func clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n], true
}
