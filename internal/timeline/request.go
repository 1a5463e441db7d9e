package timeline

import (
	"cmp"
	"context"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// RequestQuery names a model call of a turn: the step its reply is
// stored as. Admin says the caller may read the system prompt.
type RequestQuery struct {
	TenantID, JobID string
	Seq             int
	Admin           bool
}

// BuildRequest returns what the model call whose reply is step q.Seq
// read (Request): agent.CodeNotFound when the tenant has no such turn or
// the step is not a reply.
func BuildRequest(ctx context.Context, st Store, q RequestQuery) (Request, error) {
	if q.Seq < 0 {
		return Request{}, agent.Errorf(agent.CodeInvalid, "seq %d: want a step's seq, 0 or more", q.Seq)
	}
	turn, err := st.TimelineTurn(ctx, q.TenantID, q.JobID)
	if err != nil {
		return Request{}, err
	}
	reply, err := st.DatedSteps(ctx, q.TenantID, q.JobID, q.Seq, q.Seq+1)
	if err != nil {
		return Request{}, err
	}
	if len(reply) == 0 || reply[0].Role != agent.RoleAssistant {
		return Request{}, agent.Errorf(agent.CodeNotFound, "step %d of turn %q is not a model call", q.Seq, q.JobID)
	}
	calls, err := st.ChatCalls(ctx, q.TenantID, q.JobID, q.Seq, q.Seq+1)
	if err != nil {
		return Request{}, err
	}
	var call store.ModelCall
	if len(calls) > 0 {
		call = calls[0]
	}
	ag, err := st.AgentVersion(ctx, q.TenantID, turn.AgentID, turn.AgentVersion)
	if err != nil {
		return Request{}, fmt.Errorf("load agent %q version %d: %w", turn.AgentID, turn.AgentVersion, err)
	}
	out := Request{Seq: q.Seq, Model: cmp.Or(call.Model, reply[0].Model, ag.Model), Tools: []ToolOffered{}}
	if q.Admin {
		out.SystemPrompt = ag.SystemPrompt
	} else {
		out.SystemPromptHidden = ag.SystemPrompt != ""
	}
	for _, t := range ag.Tools {
		out.Tools = append(out.Tools, ToolOffered{Name: t.Name, Description: t.Description})
	}
	if out.Messages, out.Digest, err = readMessages(ctx, st, q, call); err != nil {
		return Request{}, err
	}
	return out, nil
}

// readMessages are the steps the call read, as the activity that made
// it read them (activities.readSteps): every step before its own when it
// read the turn whole (WholeFrom 0), else the prompt and the steps from
// WholeFrom, the ones between named by digest.
func readMessages(ctx context.Context, st Store, q RequestQuery, call store.ModelCall) ([]agent.Message, string, error) {
	from := call.WholeFrom
	if from <= 0 || from >= q.Seq {
		from = 0
	}
	var head []store.DatedStep
	digest := ""
	if from > 0 {
		var err error
		if head, err = st.DatedSteps(ctx, q.TenantID, q.JobID, 0, 1); err != nil {
			return nil, "", err
		}
		digest = digestNote(min(max(call.DigestFrom, 1), from), from)
	}
	whole, err := st.DatedSteps(ctx, q.TenantID, q.JobID, from, q.Seq)
	if err != nil {
		return nil, "", err
	}
	msgs := make([]agent.Message, 0, len(head)+len(whole))
	for _, s := range append(head, whole...) {
		if s.Program != "" {
			continue // the model read its program's result, not its calls'
		}
		msgs = append(msgs, s.Message)
	}
	return msgs, digest, nil
}

// digestNote names the steps a digest described (dfrom to from-1) and
// those it only counted (1 to dfrom-1).
func digestNote(dfrom, from int) string {
	note := ""
	if dfrom < from {
		note = span(dfrom, from-1) + " described in a digest"
	}
	if dfrom > 1 {
		if note != "" {
			note += "; "
		}
		note += span(1, dfrom-1) + " left out"
	}
	return note
}

// span names the steps a to b.
func span(a, b int) string {
	if a == b {
		return fmt.Sprintf("step %d", a)
	}
	return fmt.Sprintf("steps %d to %d", a, b)
}
