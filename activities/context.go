package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/words"
)

// A turn's own context (agent.ContextPolicy). The workflow says which of
// the turn's steps a model call reads whole (CallModelInput.WholeFrom)
// and which as a digest (DigestFrom); the call reads those ranges only —
// never the whole turn, however long — and keeps the request under the
// agent's max_tokens.

// turnSteps is what a model call reads of its turn's steps.
type turnSteps struct {
	// head is the turn's prompt (step 0), when the call does not read
	// every step whole; digest says, a line a step, what the steps from
	// DigestFrom up to WholeFrom did, and how many came before;
	// whole are the steps read whole.
	head   []agent.Message
	digest string
	whole  []agent.Message
	// reply is the call's own reply (its step, Seq), when an earlier
	// attempt stored it.
	reply *agent.Message
}

// messages are the turn's steps as the model reads them: the prompt, the
// digest (as the user's note), then the recent steps.
func (s turnSteps) messages() []agent.Message {
	out := append([]agent.Message(nil), s.head...)
	if s.digest != "" {
		out = append(out, agent.Message{Role: agent.RoleUser, Content: s.digest})
	}
	return append(out, s.whole...)
}

// readSteps reads what the call reads of the turn: every step before its
// own when the turn is short (WholeFrom 0), else the prompt, the steps
// the digest describes and the recent ones; and its own reply, if stored.
func (a *Activities) readSteps(ctx context.Context, in contract.CallModelInput) (turnSteps, error) {
	from := in.WholeFrom
	if from <= 0 || from >= in.Seq {
		from = 0
	}
	var s turnSteps
	whole, err := a.store.StepsBetween(ctx, in.TenantID, in.JobID, from, in.Seq+1)
	if err != nil {
		return s, err
	}
	if len(whole) < in.Seq-from || (len(whole) > 0 && whole[0].Seq != from) {
		return s, fmt.Errorf("job %q has %d of its steps %d to %d stored, want every one before calling the model", in.JobID, len(whole), from, in.Seq-1)
	}
	if n := len(whole); n > 0 && whole[n-1].Seq == in.Seq {
		s.reply = &whole[n-1].Message
		whole = whole[:n-1]
	}
	s.whole = messagesOf(whole)
	if from == 0 {
		return s, nil
	}
	head, err := a.store.StepsBetween(ctx, in.TenantID, in.JobID, 0, 1)
	if err != nil {
		return s, err
	}
	s.head = messagesOf(head)
	dfrom := min(max(in.DigestFrom, 1), from)
	digest, err := a.store.StepsBetween(ctx, in.TenantID, in.JobID, dfrom, from)
	if err != nil {
		return s, err
	}
	s.digest = digestOf(dfrom, digest)
	return s, nil
}

// messagesOf are the steps as the model reads them: the results of the
// calls programs made are left out, as the model made one call, its
// run_program, and reads one result, the program's.
func messagesOf(steps []store.Step) []agent.Message {
	out := make([]agent.Message, 0, len(steps))
	for _, st := range steps {
		if st.Program != "" {
			continue
		}
		m := st.Message
		if m.Partial {
			// An answer a steered message cut short: the model is told.
			m.Content += agent.InterruptedNote
		}
		out = append(out, m)
	}
	return out
}

// Digest lines: what each kind of step is cut to.
const (
	digestText = 200 // an answer's, a message's text
	digestArgs = 120 // a tool call's arguments
	digestOut  = 200 // a tool's output
)

// digestOf describes the steps from seq from on, a line each, after a
// line saying how many steps before them it leaves out. It depends on
// those steps only: the calls of a block read the same bytes.
func digestOf(from int, steps []store.Step) string {
	var b strings.Builder
	b.WriteString("[Earlier steps of this turn, in short; the latest steps follow whole.")
	if from > 1 {
		fmt.Fprintf(&b, " Steps 1 to %d are left out.", from-1)
	}
	b.WriteString("]\n")
	for _, st := range steps {
		m := st.Message
		if m.Program != "" {
			continue // the model reads its program's result, not its calls'
		}
		switch m.Role {
		case agent.RoleAssistant:
			fmt.Fprintf(&b, "- step %d, you:", st.Seq)
			if t := strings.TrimSpace(m.Content); t != "" {
				fmt.Fprintf(&b, " said %q", words.Clip(t, digestText))
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, " called %s(%s)", c.Name, words.Clip(c.Arguments, digestArgs))
			}
		case agent.RoleTool:
			out := m.Text()
			fmt.Fprintf(&b, "- step %d, %s answered: %s", st.Seq, m.Name, words.Clip(out, digestOut))
			if len(out) > digestOut {
				fmt.Fprintf(&b, " (%d bytes in all)", len(out))
			}
		default:
			fmt.Fprintf(&b, "- step %d, %s: %s", st.Seq, m.Role, words.Clip(m.Text(), digestText))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// bound keeps a request under max tokens (estimated): while it is over,
// the longest of the turn's messages after its prompt — a long tool
// output, most often — is cut to half, down to a floor; the system prompt,
// the session and the turn's prompt are never cut.
func bound(msgs []agent.Message, fixed, maxTokens int) []agent.Message {
	const floor = 1024 // bytes a cut message keeps at least
	total := 0
	for _, m := range msgs {
		total += messageTokens(m)
	}
	for total > maxTokens {
		longest := -1
		for i := fixed; i < len(msgs); i++ {
			if len(msgs[i].Content) > floor && (longest < 0 || len(msgs[i].Content) > len(msgs[longest].Content)) {
				longest = i
			}
		}
		if longest < 0 {
			return msgs
		}
		m := &msgs[longest]
		before := messageTokens(*m)
		keep := max(len(m.Content)/2, floor)
		m.Content = words.Clip(m.Content, keep) + fmt.Sprintf("\n[cut to keep the request under %d tokens: %d bytes not shown]", maxTokens, len(m.Content)-keep)
		total += messageTokens(*m) - before
	}
	return msgs
}

// messageTokens estimates what a message costs a request.
func messageTokens(m agent.Message) int {
	n := agent.EstimateTokens(m.Content)
	for _, c := range m.ToolCalls {
		n += agent.EstimateTokens(c.Name) + agent.EstimateTokens(c.Arguments)
	}
	return n
}

// recallStep answers agent.RecallStepTool: a piece of an earlier step of
// the calling turn, read from the turn's own steps (the same tenant and
// job), so it reaches nothing the turn does not hold.
func (a *Activities) recallStep(ctx context.Context, in contract.ExecuteToolInput) (agent.Message, string) {
	var args struct {
		Step   *int `json:"step"`
		Offset int  `json:"offset"`
	}
	if err := json.Unmarshal([]byte(in.Call.Arguments), &args); err != nil || args.Step == nil {
		return agent.Message{Content: `the arguments must be {"step": N} or {"step": N, "offset": bytes}`}, agent.ToolError
	}
	step := *args.Step
	if step < 0 || step >= in.Seq {
		return agent.Message{Content: fmt.Sprintf("step %d: this turn's steps so far are 0 to %d", step, in.Seq-1)}, agent.ToolError
	}
	var msg agent.Message
	err := a.db(ctx, "read a step", func() (err error) {
		msg, err = a.store.Step(ctx, in.TenantID, in.JobID, step)
		return err
	})
	if err != nil {
		return agent.Message{Content: fmt.Sprintf("step %d could not be read: %s", step, contract.ErrorOf(err).Message)}, agent.ToolError
	}
	text := msg.Text()
	for _, c := range msg.ToolCalls {
		text += fmt.Sprintf("\n[called %s with %s]", c.Name, c.Arguments)
	}
	if args.Offset < 0 || args.Offset > len(text) {
		return agent.Message{Content: fmt.Sprintf("offset %d: step %d is %d bytes", args.Offset, step, len(text))}, agent.ToolError
	}
	end := min(args.Offset+agent.RecallStepBytes, len(text))
	for end < len(text) && end > args.Offset && !utf8.RuneStart(text[end]) {
		end-- // a piece ends between runes, so each piece is valid text
	}
	out := fmt.Sprintf("[step %d, %s, bytes %d to %d of %d]\n%s", step, msg.Role, args.Offset, end, len(text), text[args.Offset:end])
	if end < len(text) {
		out += fmt.Sprintf("\n[%d bytes more: read them with offset %d]", len(text)-end, end)
	}
	return agent.Message{Content: out}, agent.ToolOK
}
