package metered

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/store"
)

// Scope is whose the embeddings made under a context are, and the ledger
// key they are counted under (Call's fields of the same names): each
// Embed call under it is the next Seq, from 0. Work that is retried
// makes its Embed calls in the same order again, so a retry's calls get
// the same keys and add no second row.
type Scope struct {
	TenantID     string
	Key          string
	AgentID      string
	AgentVersion int
	SessionID    string
	Channel      string
	Priority     int
	Hold         time.Duration
	Waiting      func(governor.Wait)
}

type scopeKey struct{}

// scope is a Scope with the count of its calls so far.
type scope struct {
	Scope
	next atomic.Int64
}

// WithScope returns a context whose embeddings (Embedder) are charged to
// s. It starts the count of s's calls at 0: set it once per unit of work
// (an activity's attempt, an HTTP request).
func WithScope(ctx context.Context, s Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, &scope{Scope: s})
}

// Embedder is a knowledge.Embedder whose every Embed call passes Gates
// as a store.KindEmbedding call of the context's Scope; a context with
// none is refused (agent.CodeInternal), never embedded uncounted.
type Embedder struct {
	Gates *Gates
	Inner knowledge.Embedder
}

// Embed implements knowledge.Embedder.
func (e Embedder) Embed(ctx context.Context, model string, dims int, texts []string) ([][]float32, agent.Usage, error) {
	s, _ := ctx.Value(scopeKey{}).(*scope)
	if s == nil || s.TenantID == "" || s.Key == "" {
		return nil, agent.Usage{}, agent.Errorf(agent.CodeInternal, "embed with %s: no tenant to charge the call to", model)
	}
	input := 0
	for _, t := range texts {
		input += agent.EstimateTokens(t)
	}
	c := Call{TenantID: s.TenantID, Key: s.Key, Seq: int(s.next.Add(1) - 1), Kind: store.KindEmbedding, Model: model,
		AgentID: s.AgentID, AgentVersion: s.AgentVersion, SessionID: s.SessionID, Channel: s.Channel,
		Priority: s.Priority, Input: input, Hold: s.Hold, Waiting: s.Waiting}
	var vecs [][]float32
	var usage agent.Usage
	err := e.Gates.Do(ctx, c, func(ctx context.Context) (agent.Usage, error) {
		var err error
		vecs, usage, err = e.Inner.Embed(ctx, model, dims, texts)
		return usage, err
	})
	return vecs, usage, err
}
