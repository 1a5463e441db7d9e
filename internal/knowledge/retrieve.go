package knowledge

import (
	"strings"

	"cmp"
	"context"
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Searcher is a Store with the Embedder its searches embed queries with:
// what turns retrieve through (the retrieve tool, the prepare phase).
type Searcher struct {
	Store    *Store
	Embedder Embedder
}

// Collection returns the tenant's collection (agent.CodeNotFound for
// another tenant's, as for a missing one).
func (s Searcher) Collection(ctx context.Context, tenant, name string) (agent.Collection, error) {
	return s.Store.Collection(ctx, tenant, name)
}

// Retrieve answers query over the retrieval's collections of the tenant:
// each is searched for r.TopK chunks, and the best r.TopK of them all, by
// fused score, are kept, each chunk once, while their text fits
// r.Budget (the first is cut to fit when it alone does not). The
// usage is what embedding the query took.
func (s Searcher) Retrieve(ctx context.Context, tenant, query string, r agent.Retrieval) ([]agent.Hit, agent.Usage, error) {
	r = r.WithDefaults()
	if err := r.Validate("retrieve"); err != nil {
		return nil, agent.Usage{}, err
	}
	var all []agent.Hit
	var usage agent.Usage
	for _, name := range r.Collections {
		hits, u, err := s.Store.Search(ctx, s.Embedder, tenant, name, Query{Text: query, Mode: Mode(r.Mode), TopK: r.TopK, Filter: r.Filter})
		usage = usage.Add(u)
		if err != nil {
			return nil, usage, err
		}
		all = append(all, hits...)
	}
	// Stable: among equal scores, the order the collections were named.
	slices.SortStableFunc(all, func(a, b agent.Hit) int { return cmp.Compare(b.Score, a.Score) })
	return budget(all, r.TopK, r.Budget), usage, nil
}

// budget keeps the first topK hits, each chunk once, while their text
// fits maxTokens.
func budget(hits []agent.Hit, topK, maxTokens int) []agent.Hit {
	var out []agent.Hit
	seen := map[string]bool{}
	used := 0
	for _, h := range hits {
		if len(out) == topK {
			break
		}
		if seen[h.Chunk.ID] {
			continue
		}
		// A passage is handed back under its document's title, so the
		// chunk's own title line (chunkContext) is left out of it and of
		// the budget.
		h.Chunk.Text = strings.TrimPrefix(h.Chunk.Text, h.DocumentTitle+"\n\n")
		t := agent.EstimateTokens(h.Chunk.Text)
		if used+t > maxTokens {
			if len(out) == 0 {
				h.Chunk.Text = words.Clip(h.Chunk.Text, 4*maxTokens-len("…"))
				out = append(out, h)
			}
			break
		}
		seen[h.Chunk.ID] = true
		used += t
		out = append(out, h)
	}
	return out
}
