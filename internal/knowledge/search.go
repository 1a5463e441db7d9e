package knowledge

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// Mode says which rankers answer a Query.
type Mode string

const (
	// ModeHybrid fuses full text and vectors by reciprocal rank (default).
	ModeHybrid Mode = "hybrid"
	// ModeText ranks by full-text search alone.
	ModeText Mode = "text"
	// ModeVector ranks by vector similarity alone.
	ModeVector Mode = "vector"
)

// Limits of a Query.
const (
	DefaultTopK = 5
	MaxTopK     = 100
	// MaxQueryBytes bounds a query's text.
	MaxQueryBytes = 8 << 10
)

// Query is a search of one collection.
type Query struct {
	Text string
	Mode Mode // default ModeHybrid
	TopK int  // default DefaultTopK, at most MaxTopK
	// Filter keeps the chunks whose metadata has each key with exactly
	// that value.
	Filter map[string]string
	// Vector, when set, is the query's embedding (by the collection's
	// model), so that Search does not embed Text again.
	Vector []float32
}

// candidates is how many each ranker proposes for fusion: enough below
// the top k that a chunk ranked low by one and high by the other is seen.
func candidates(topK int) int { return max(4*topK, 40) }

// Search answers q over the tenant's collection: its best TopK chunks,
// best first. Vector and hybrid modes embed q.Text with emb unless
// q.Vector is set; the usage is what that used. Another tenant's
// collection is agent.CodeNotFound.
func (s *Store) Search(ctx context.Context, emb Embedder, tenant, collection string, q Query) ([]agent.Hit, agent.Usage, error) {
	q, err := q.normalize()
	if err != nil {
		return nil, agent.Usage{}, err
	}
	c, cid, err := s.collection(ctx, s.pool, tenant, collection)
	if err != nil {
		return nil, agent.Usage{}, err
	}
	filter, err := json.Marshal(nonNil(q.Filter))
	if err != nil {
		return nil, agent.Usage{}, fmt.Errorf("search: %w", err)
	}
	n := candidates(q.TopK)
	var textRanked, vecRanked []chunkKey
	var usage agent.Usage
	if q.Mode != ModeVector {
		if textRanked, err = s.textRank(ctx, cid, q.Text, filter, n); err != nil {
			return nil, usage, err
		}
	}
	if q.Mode != ModeText {
		vec := q.Vector
		if vec == nil {
			if emb == nil {
				return nil, usage, agent.Errorf(agent.CodeInvalid, "search: a %s search needs an embedder or a query vector", q.Mode)
			}
			vecs, u, err := emb.Embed(ctx, c.EmbeddingModel, c.Dims, []string{q.Text})
			if err != nil {
				return nil, usage, fmt.Errorf("embed query: %w", err)
			}
			if len(vecs) != 1 {
				return nil, usage, agent.Errorf(agent.CodeUnavailable, "embed query: %d vectors for one text", len(vecs))
			}
			vec, usage = vecs[0], u
		}
		if c.Dims != 0 && len(vec) != c.Dims {
			return nil, usage, agent.Errorf(agent.CodeInvalid, "search: query vector has %d values; collection %q has %d dims", len(vec), collection, c.Dims)
		}
		if unit := normalize(vec); unit != nil && c.Dims != 0 {
			if vecRanked, err = s.vec.nearest(ctx, s.pool, cid, unit, filter, n); err != nil {
				return nil, usage, fmt.Errorf("vector search: %w", err)
			}
		}
	}
	hits := fuse(textRanked, vecRanked, q.TopK)
	if err := s.load(ctx, cid, hits); err != nil {
		return nil, usage, err
	}
	return hits, usage, nil
}

func (q Query) normalize() (Query, error) {
	q.Text = strings.TrimSpace(q.Text)
	switch {
	case q.Text == "" && q.Vector == nil:
		return q, agent.Errorf(agent.CodeInvalid, "query text is empty")
	case len(q.Text) > MaxQueryBytes:
		return q, agent.Errorf(agent.CodeInvalid, "query is %d bytes; the limit is %d", len(q.Text), MaxQueryBytes)
	case !validText(q.Text):
		return q, agent.Errorf(agent.CodeInvalid, "query is not valid UTF-8 text")
	}
	switch q.Mode {
	case "":
		q.Mode = ModeHybrid
	case ModeHybrid, ModeText, ModeVector:
	default:
		return q, agent.Errorf(agent.CodeInvalid, "search mode %q: want hybrid, text or vector", q.Mode)
	}
	if q.Mode == ModeText && q.Text == "" {
		return q, agent.Errorf(agent.CodeInvalid, "query text is empty")
	}
	switch {
	case q.TopK == 0:
		q.TopK = DefaultTopK
	case q.TopK < 0 || q.TopK > MaxTopK:
		return q, agent.Errorf(agent.CodeInvalid, "top_k %d: want 1 to %d", q.TopK, MaxTopK)
	}
	return q, agent.ValidateMetadata("filter", q.Filter)
}

// chunkKey names a chunk within its collection.
type chunkKey struct {
	doc string
	pos int
}

// scanChunkKey reads a row of (document_id, position).
func scanChunkKey(r pgx.CollectableRow) (chunkKey, error) {
	var k chunkKey
	err := r.Scan(&k.doc, &k.pos)
	return k, err
}

// textRank ranks the collection's chunks by full text: any of the
// query's words (stemmed, stop words dropped, as plainto_tsquery does),
// by ts_rank_cd. plainto_tsquery alone would ask for all of them, which a
// question rarely matches.
func (s *Store) textRank(ctx context.Context, cid int64, text string, filter []byte, n int) ([]chunkKey, error) {
	return list(ctx, s.pool, "text search", scanChunkKey, sqlTextRank, cid, text, filter, n)
}

const sqlTextRank = `WITH q AS (
	SELECT NULLIF(replace(plainto_tsquery('english', $2)::text, ' & ', ' | '), '')::tsquery AS query)
	SELECT k.document_id, k.position FROM knowledge_chunks k, q
	WHERE k.collection_id = $1 AND q.query IS NOT NULL AND k.tsv @@ q.query AND k.metadata @> $3::jsonb
	ORDER BY ts_rank_cd(k.tsv, q.query) DESC, k.document_id, k.position LIMIT $4`

// fuse merges the rankers' lists by reciprocal rank: the topK best, each
// with its ranks. Ties go to the text ranker's order, then the vector's.
func fuse(text, vec []chunkKey, topK int) []agent.Hit {
	byKey := map[chunkKey]*agent.Hit{}
	var order []chunkKey
	add := func(k chunkKey) *agent.Hit {
		h, ok := byKey[k]
		if !ok {
			h = &agent.Hit{Chunk: agent.Chunk{DocumentID: k.doc, Position: k.pos}}
			byKey[k] = h
			order = append(order, k)
		}
		return h
	}
	for i, k := range text {
		add(k).TextRank = i + 1
	}
	for i, k := range vec {
		add(k).VectorRank = i + 1
	}
	hits := make([]agent.Hit, len(order))
	for i, k := range order {
		h := byKey[k]
		h.Score = agent.HybridScore(h.TextRank, h.VectorRank)
		hits[i] = *h
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	return hits[:min(topK, len(hits))]
}

// load fills the hits' chunks and document titles.
func (s *Store) load(ctx context.Context, cid int64, hits []agent.Hit) error {
	if len(hits) == 0 {
		return nil
	}
	docs := make([]string, len(hits))
	positions := make([]int32, len(hits))
	for i, h := range hits {
		docs[i], positions[i] = h.Chunk.DocumentID, int32(h.Chunk.Position)
	}
	rows, err := s.pool.Query(ctx, sqlLoadChunks, cid, docs, positions)
	if err != nil {
		return fmt.Errorf("load hits: %w", err)
	}
	type loaded struct {
		text, title string
		tokens      int
		md          map[string]string
	}
	got := map[chunkKey]loaded{}
	var k chunkKey
	var l loaded
	var md []byte
	_, err = pgx.ForEachRow(rows, []any{&k.doc, &k.pos, &l.text, &l.tokens, &md, &l.title}, func() error {
		l.md = nil // a map of its own for each row
		if err := json.Unmarshal(md, &l.md); err != nil {
			return fmt.Errorf("decode metadata: %w", err)
		}
		if len(l.md) == 0 {
			l.md = nil
		}
		got[k] = l
		return nil
	})
	if err != nil {
		return fmt.Errorf("load hits: %w", err)
	}
	for i := range hits {
		c := &hits[i].Chunk
		l, ok := got[chunkKey{c.DocumentID, c.Position}]
		if !ok {
			// Deleted between ranking and loading.
			return agent.Errorf(agent.CodeUnavailable, "search: chunk %s changed during the search; try again", agent.ChunkID(c.DocumentID, c.Position))
		}
		c.ID = agent.ChunkID(c.DocumentID, c.Position)
		c.Text, c.Tokens, c.Metadata = l.text, l.tokens, l.md
		hits[i].DocumentTitle = l.title
	}
	return nil
}

const sqlLoadChunks = `SELECT k.document_id, k.position, k.text, k.tokens, k.metadata, d.title
	FROM unnest($2::text[], $3::int[]) AS want(doc, pos)
	JOIN knowledge_chunks k ON k.collection_id = $1 AND k.document_id = want.doc AND k.position = want.pos
	JOIN knowledge_documents d ON d.collection_id = k.collection_id AND d.id = k.document_id`
