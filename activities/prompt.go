package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/memory"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/words"
)

// messages is what the model reads: first what every call of the agent
// version sends alike — its system prompt, then its few-shot examples —,
// then what varies: the note on the data the turn may use, the session's
// recent messages when the turn loads history, and the turn (as much of
// it as the call reads: turnSteps). The stable
// prefix first is what lets a provider serve it from its prompt cache.
func (a *Activities) messages(ctx context.Context, ag agent.Agent, in contract.CallModelInput, steps turnSteps) ([]agent.Message, error) {
	var msgs []agent.Message
	if ag.SystemPrompt != "" {
		msgs = append(msgs, agent.Message{Role: agent.RoleSystem, Content: ag.SystemPrompt})
	}
	for _, ex := range ag.Examples {
		msgs = append(msgs, agent.Message{Role: agent.RoleUser, Content: ex.User}, agent.Message{Role: agent.RoleAssistant, Content: ex.Assistant})
	}
	note, err := a.dataNote(ctx, in)
	if err != nil {
		return nil, err
	}
	if note != "" {
		msgs = append(msgs, agent.Message{Role: agent.RoleSystem, Content: note})
	}
	turn := steps.messages()
	if rn := a.recallNote(ctx, ag, in, turn); rn != "" {
		msgs = append(msgs, agent.Message{Role: agent.RoleUser, Content: rn})
	}
	if in.History == agent.HistoryLoad && in.SessionID != "" {
		mem, err := a.store.SessionMemory(ctx, in.TenantID, in.SessionID, a.sessionWindow)
		if err != nil {
			return nil, fmt.Errorf("load session %q: %w", in.SessionID, err)
		}
		if mem.Summary != "" {
			msgs = append(msgs, agent.Message{Role: agent.RoleSystem, Content: SummaryPreamble + mem.Summary})
		}
		for _, m := range memory.Recent(sessionMessages(mem.Recent), ag.Memory.Window()) {
			if m.Partial {
				// The model is told the answer was cut short, not left to
				// take it for the whole of what it meant to say.
				m.Content += agent.InterruptedNote
			}
			msgs = append(msgs, m)
		}
	}
	// What may be cut to keep under the agent's bound is the turn's,
	// after its prompt: what comes before is the agent's and the
	// session's, bounded on their own (the memory window).
	fixed := len(msgs) + min(1, len(turn))
	return bound(append(msgs, turn...), fixed, ag.Context.WithDefaults().MaxTokens), nil
}

// SummaryPreamble introduces a session's summary to the model.
const SummaryPreamble = "Summary of the conversation before the messages that follow:\n"

// sessionMessages is a session's messages without their positions.
func sessionMessages(msgs []store.SessionMessage) []agent.Message {
	out := make([]agent.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.Message
	}
	return out
}

// sessionData is how many of a session's latest data results the model
// is told about.
const sessionData = 5

// dataNote tells the model what data it can use by reference: the
// results of earlier process steps the request names
// (context.previous_results, each with its index, by which tools take it
// too) and the data of the session's latest turns.
func (a *Activities) dataNote(ctx context.Context, in contract.CallModelInput) (string, error) {
	var lines []string
	for i, p := range in.Context.PreviousResults {
		res, err := a.store.ResultByRef(ctx, in.TenantID, p.ResultRef)
		switch {
		case agent.IsCode(err, agent.CodeNotFound), agent.IsCode(err, agent.CodeInvalid):
			lines = append(lines, fmt.Sprintf("- previous_results[%d]: %s (step %s): not found", i, p.ResultRef, p.NodeID))
			continue
		case err != nil:
			return "", fmt.Errorf("load previous result %s: %w", p.ResultRef, err)
		}
		lines = append(lines, fmt.Sprintf("- previous_results[%d]: %s (step %s): %s", i, p.ResultRef, p.NodeID, describePreview(res.ResultPreview, res.Output)))
	}
	if in.SessionID != "" && in.History == agent.HistoryLoad {
		data, err := a.store.SessionData(ctx, in.TenantID, in.SessionID, sessionData)
		if err != nil {
			return "", err
		}
		for _, d := range data {
			lines = append(lines, fmt.Sprintf("- %s (from turn %s): %s", d.Ref, d.JobID, describePreview(d.Preview, "")))
		}
	}
	if len(lines) == 0 {
		return "", nil
	}
	return "Data you can use by reference (pass a ref as input_ref to a tool that reads data; a previous result also by its index, as previous_results[0]):\n" + strings.Join(lines, "\n"), nil
}

// describePreview says in one line what a result_preview describes.
func describePreview(raw json.RawMessage, output string) string {
	var p agent.DataPreview
	if len(raw) == 0 || json.Unmarshal(raw, &p) != nil {
		return "text: " + words.Clip(output, 200)
	}
	switch p.Type {
	case agent.DataDataset:
		var fields []string
		for _, f := range p.Fields {
			fields = append(fields, f.Name)
		}
		return fmt.Sprintf("dataset, %d rows; fields: %s", p.RowCount, strings.Join(fields, ", "))
	case agent.DataDocument:
		return fmt.Sprintf("JSON document, %d bytes", p.Bytes)
	}
	return "text: " + words.Clip(output, 200)
}
