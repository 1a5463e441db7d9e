package knowledge

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// vectorIndex is how chunks' vectors are written and searched: the exact
// scan over bytea every PostgreSQL has, or pgvector where the server has
// it. Vectors are unit length, so cosine similarity is their dot product.
type vectorIndex interface {
	name() string
	// queueInsert queues the insert of a chunk with its unit vector.
	queueInsert(b *pgx.Batch, cid int64, doc string, ch agent.Chunk, metadata []byte, unit []float32)
	// nearest returns the n chunks of the collection, among those whose
	// metadata contains filter, most similar to the unit vector q, most
	// similar first.
	nearest(ctx context.Context, db querier, cid int64, q []float32, filter []byte, n int) ([]chunkKey, error)
}

const sqlInsertChunk = `INSERT INTO knowledge_chunks (collection_id, document_id, position, text, tokens, metadata, embedding)
	VALUES ($1, $2, $3, $4, $5, $6, $7)`

// exactIndex scores every chunk of the collection in Go, reading each
// embedding's bytes as they arrive. Measured at 10,000 chunks of 256
// dims (BENCHMARKS.md, "Knowledge search"): scoring real[] arrays in SQL
// (a sum over unnest of both) took 3.2 times as long as sending them
// and scoring here, and sending real[] at all 15 times as long as
// sending the same floats as bytea, because PostgreSQL encodes an array
// value by value; so embeddings are bytea and scored here.
type exactIndex struct{}

func (exactIndex) name() string { return IndexExact }

func (exactIndex) queueInsert(b *pgx.Batch, cid int64, doc string, ch agent.Chunk, metadata []byte, unit []float32) {
	b.Queue(sqlInsertChunk, cid, doc, ch.Position, ch.Text, ch.Tokens, metadata, vectorBytes(unit))
}

const sqlExactScan = `SELECT document_id, position, embedding FROM knowledge_chunks
	WHERE collection_id = $1 AND metadata @> $2::jsonb`

func (exactIndex) nearest(ctx context.Context, db querier, cid int64, q []float32, filter []byte, n int) ([]chunkKey, error) {
	rows, err := db.Query(ctx, sqlExactScan, cid, filter)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	top := &scored{}
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 3 {
			return nil, fmt.Errorf("scan embeddings: %d columns", len(raw))
		}
		score, err := dotBytes(raw[2], q)
		if err != nil {
			return nil, fmt.Errorf("scan embeddings: %w", err)
		}
		if top.Len() == n && score <= (*top)[0].score {
			continue
		}
		var k chunkKey
		if err := rows.Scan(&k.doc, &k.pos, nil); err != nil {
			return nil, fmt.Errorf("scan embeddings: %w", err)
		}
		heap.Push(top, scoredKey{k, score})
		if top.Len() > n {
			heap.Pop(top)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]chunkKey, top.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(top).(scoredKey).key
	}
	return out, nil
}

// vectorBytes is v as stored: its float32 values, little-endian.
func vectorBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// dotBytes is the dot product of q and a stored vector (vectorBytes).
func dotBytes(raw []byte, q []float32) (float64, error) {
	if len(raw) != 4*len(q) {
		return 0, fmt.Errorf("embedding has %d bytes; the query %d values", len(raw), len(q))
	}
	var s float32
	for i, x := range q {
		s += x * math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return float64(s), nil
}

type scoredKey struct {
	key   chunkKey
	score float64
}

// scored is a min-heap of the best scores seen: its root is the worst
// kept, which the next better one replaces.
type scored []scoredKey

func (h scored) Len() int { return len(h) }
func (h scored) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score < h[j].score
	}
	// Ties: the later key is worse, so results are the same every time.
	a, b := h[i].key, h[j].key
	return a.doc > b.doc || a.doc == b.doc && a.pos > b.pos
}
func (h scored) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *scored) Push(x any)   { *h = append(*h, x.(scoredKey)) }
func (h *scored) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// pgvectorIndex writes each vector to embedding_vec too and searches it
// with pgvector's cosine distance (<=>), which an HNSW or IVFFlat index
// an operator creates on embedding_vec serves. Vectors go as pgvector's
// text form ("[0.1,0.2]"), which needs no client library.
type pgvectorIndex struct{}

func (pgvectorIndex) name() string { return IndexPGVector }

func (pgvectorIndex) queueInsert(b *pgx.Batch, cid int64, doc string, ch agent.Chunk, metadata []byte, unit []float32) {
	b.Queue(`INSERT INTO knowledge_chunks (collection_id, document_id, position, text, tokens, metadata, embedding, embedding_vec)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text::vector)`, cid, doc, ch.Position, ch.Text, ch.Tokens, metadata, vectorBytes(unit), vectorText(unit))
}

func (pgvectorIndex) nearest(ctx context.Context, db querier, cid int64, q []float32, filter []byte, n int) ([]chunkKey, error) {
	rows, err := db.Query(ctx, `SELECT document_id, position FROM knowledge_chunks
		WHERE collection_id = $1 AND metadata @> $2::jsonb
		ORDER BY embedding_vec <=> $3::text::vector, document_id, position LIMIT $4`, cid, filter, vectorText(q), n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanChunkKey)
}

// vectorText is pgvector's text form of v.
func vectorText(v []float32) string {
	var b strings.Builder
	b.Grow(len(v) * 10)
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	b.WriteByte(']')
	return b.String()
}
