package activities

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/tools"
)

// recallNote is what a turn of an agent whose memory says recall reads
// of its caller's long-term memories: those most relevant to the turn's
// prompt, at most the agent's top_k within its budget of tokens, marked
// as data (tools.MemoryContext) and screened by the agent's injection
// guard, sent as a user message (never with a system prompt's
// authority); "" when there are none, the turn has no
// authenticated caller, or the recall fails — a turn goes on without its
// memories rather than fail for them, and the log says why.
func (a *Activities) recallNote(ctx context.Context, ag agent.Agent, in contract.CallModelInput, turn []agent.Message) string {
	if !ag.Memory.Recall || a.memories == nil || len(turn) == 0 || turn[0].Content == "" {
		return ""
	}
	log := a.logger.With(zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID), zap.String("agent_id", ag.ID))
	t, err := a.store.Turn(ctx, in.TenantID, in.JobID)
	if err != nil {
		log.Warn("memory recall skipped: the turn's request could not be read", zap.Error(err))
		return ""
	}
	user := t.Request.Caller.Principal()
	if user == "" {
		return ""
	}
	prompt := turn[0].Content
	if len(prompt) > maxRecallQuery {
		prompt = strings.ToValidUTF8(prompt[:maxRecallQuery], "")
	}
	// The recall's query embedding is charged to the turn's tenant, under
	// the step's key: the same for every attempt of the step.
	ctx = withScope(ctx, metered.Scope{TenantID: in.TenantID, Key: fmt.Sprintf("%s:recall:%d", in.JobID, in.Seq),
		AgentID: ag.ID, AgentVersion: ag.Version, SessionID: in.SessionID, Channel: in.Channel}, nil)
	found, _, err := a.memories.Recall(ctx, agent.MemoryScope{Tenant: in.TenantID, AgentID: ag.ID, User: user}, prompt, ag.Memory.RecallTopK())
	if err != nil {
		log.Warn("memory recall failed; the turn goes on without memories", zap.Error(err))
		return ""
	}
	found = agent.FitMemories(found, ag.Memory.RecallBudget())
	if len(found) == 0 {
		return ""
	}
	note := tools.MemoryContext(found)
	// What users wrote (or a model extracted from what they wrote) is
	// screened as a tool's output is: the agent's injection guard acts on
	// what reads as instructions.
	if g := ag.InjectionGuard(); g != nil {
		inj, err := guardpkg.NewInjection(*g)
		if err != nil {
			inj, _ = guardpkg.NewInjection(agent.InjectionGuard{Action: g.Action})
		}
		s := inj.Screen("recall", "memories", note)
		countGuard(ctx, in.TenantID, "injection", s.Action, s.Found)
		note = s.Text
	}
	return note
}

// maxRecallQuery bounds the prompt text a recall searches with (the
// knowledge search's own bound is 8 KiB).
const maxRecallQuery = 4 << 10
