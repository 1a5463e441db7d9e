package knowledge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
)

// Embedder embeds texts with a "provider:model" (llm.Router implements
// it): the vectors in the order of texts, and the tokens the call used.
// dims, when positive, asks for vectors of that length.
type Embedder interface {
	Embed(ctx context.Context, model string, dims int, texts []string) ([][]float32, agent.Usage, error)
}

// DefaultMaxDocumentBytes is the default size limit of a document's text.
const DefaultMaxDocumentBytes = 10 << 20

// embedBatch is how many chunks one Embed call carries.
const embedBatch = 256

// Options configure a Store.
type Options struct {
	// MaxDocumentBytes is the largest text Put and Prepare accept; default
	// DefaultMaxDocumentBytes (10 MiB). A larger one is agent.CodeInvalid
	// and nothing is stored.
	MaxDocumentBytes int
	// Split sizes chunks; its zero value is SplitOptions' defaults.
	Split SplitOptions
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// Store keeps collections, documents and chunks in the tables of
// migration 028 (applied by internal/store). It is safe for concurrent
// use.
type Store struct {
	pool   *pgxpool.Pool
	vec    vectorIndex
	maxDoc int
	split  SplitOptions
	log    *zap.Logger
}

// Vector indexes Store.VectorIndex reports.
const (
	// IndexExact scans the embeddings of a collection exactly.
	IndexExact = "exact"
	// IndexPGVector searches pgvector's column with its cosine distance.
	IndexPGVector = "pgvector"
)

// New returns a Store over pool, whose database has migration 028, and
// detects which vector index the database allows.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	opts.MaxDocumentBytes = agent.OrDefault(opts.MaxDocumentBytes, DefaultMaxDocumentBytes)
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	var hasVec bool
	if err := pool.QueryRow(ctx, sqlHasPGVector).Scan(&hasVec); err != nil {
		return nil, fmt.Errorf("detect vector index: %w", err)
	}
	s := &Store{pool: pool, maxDoc: opts.MaxDocumentBytes, split: opts.Split.withDefaults(), log: opts.Logger,
		vec: exactIndex{}}
	if hasVec {
		s.vec = pgvectorIndex{}
	}
	s.log.Info("knowledge vector index", zap.String("index", s.vec.name()))
	return s, nil
}

const sqlHasPGVector = `SELECT EXISTS (SELECT 1 FROM information_schema.columns
	WHERE table_name = 'knowledge_chunks' AND column_name = 'embedding_vec' AND table_schema = current_schema())`

// VectorIndex says how vectors are searched: IndexExact or IndexPGVector.
func (s *Store) VectorIndex() string { return s.vec.name() }

// CreateCollection creates c (Created is set by the database). Creating a
// collection that exists with the same embedding model and dims returns
// it (a retried create is harmless); with others it is agent.CodeConflict.
func (s *Store) CreateCollection(ctx context.Context, c agent.Collection) (agent.Collection, error) {
	if err := c.Validate(); err != nil {
		return agent.Collection{}, err
	}
	if _, err := s.pool.Exec(ctx, sqlCreateCollection, c.Tenant, c.Name, c.Description, c.EmbeddingModel, c.Dims); err != nil {
		return agent.Collection{}, fmt.Errorf("create collection: %w", err)
	}
	got, _, err := s.collection(ctx, s.pool, c.Tenant, c.Name)
	if err != nil {
		return agent.Collection{}, err
	}
	if got.EmbeddingModel != c.EmbeddingModel || c.Dims != 0 && got.Dims != c.Dims {
		return agent.Collection{}, agent.Errorf(agent.CodeConflict,
			"collection %q exists with embedding model %s (%d dims)", c.Name, got.EmbeddingModel, got.Dims)
	}
	return got, nil
}

const sqlCreateCollection = `INSERT INTO knowledge_collections (tenant_id, name, description, embedding_model, dims)
	VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, name) DO NOTHING`

// Collection returns the tenant's collection; agent.CodeNotFound when the
// tenant has none of that name.
func (s *Store) Collection(ctx context.Context, tenant, name string) (agent.Collection, error) {
	c, _, err := s.collection(ctx, s.pool, tenant, name)
	return c, err
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// list runs a query and scans each of its rows; what names the query in
// its errors.
func list[T any](ctx context.Context, db querier, what string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

const sqlCollection = `SELECT id, tenant_id, name, description, embedding_model, dims, created_at
	FROM knowledge_collections WHERE tenant_id = $1 AND name = $2`

func (s *Store) collection(ctx context.Context, q querier, tenant, name string) (agent.Collection, int64, error) {
	if err := ValidateTenant(tenant); err != nil {
		return agent.Collection{}, 0, err
	}
	if err := agent.ValidateCollectionName(name); err != nil {
		return agent.Collection{}, 0, err
	}
	var c agent.Collection
	var id int64
	err := q.QueryRow(ctx, sqlCollection, tenant, name).Scan(&id, &c.Tenant, &c.Name, &c.Description, &c.EmbeddingModel, &c.Dims, &c.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return agent.Collection{}, 0, agent.Errorf(agent.CodeNotFound, "collection %q not found", name)
	}
	if err != nil {
		return agent.Collection{}, 0, fmt.Errorf("read collection: %w", err)
	}
	return c, id, nil
}

// ValidateTenant checks a tenant id before any query runs.
func ValidateTenant(tenant string) error {
	if tenant == "" {
		return agent.Errorf(agent.CodeInvalid, "tenant_id is required")
	}
	return agent.ValidateID("tenant_id", tenant)
}

// Collections lists the tenant's collections by name.
func (s *Store) Collections(ctx context.Context, tenant string) ([]agent.Collection, error) {
	if err := ValidateTenant(tenant); err != nil {
		return nil, err
	}
	return list(ctx, s.pool, "list collections", func(r pgx.CollectableRow) (agent.Collection, error) {
		var c agent.Collection
		err := r.Scan(&c.Tenant, &c.Name, &c.Description, &c.EmbeddingModel, &c.Dims, &c.Created)
		return c, err
	}, `SELECT tenant_id, name, description, embedding_model, dims, created_at
		FROM knowledge_collections WHERE tenant_id = $1 ORDER BY name`, tenant)
}

// DeleteCollection deletes the tenant's collection with its documents,
// chunks and vectors; agent.CodeNotFound when there is none (a retried
// delete that succeeded before sees NotFound).
func (s *Store) DeleteCollection(ctx context.Context, tenant, name string) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if err := agent.ValidateCollectionName(name); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM knowledge_collections WHERE tenant_id = $1 AND name = $2`, tenant, name)
	if err != nil {
		return fmt.Errorf("delete collection: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return agent.Errorf(agent.CodeNotFound, "collection %q not found", name)
	}
	return nil
}

// Prepare checks a document and its text and splits it: the document
// with its ContentHash, ID, Size and Chunks set, and its chunks (ids,
// positions, text, tokens, metadata). It stores nothing and calls no
// model. Text must be non-empty valid UTF-8 of at most MaxDocumentBytes.
func (s *Store) Prepare(doc agent.Document, text string) (agent.Document, []agent.Chunk, error) {
	if err := doc.Validate(); err != nil {
		return agent.Document{}, nil, err
	}
	switch {
	case len(text) > s.maxDoc:
		return agent.Document{}, nil, agent.Errorf(agent.CodeInvalid, "document is %d bytes; the limit is %d", len(text), s.maxDoc)
	case !validText(text):
		return agent.Document{}, nil, agent.Errorf(agent.CodeInvalid, "document text is not valid UTF-8 text")
	}
	pieces := Split(text, s.split)
	if len(pieces) == 0 {
		return agent.Document{}, nil, agent.Errorf(agent.CodeInvalid, "document text is empty")
	}
	doc.ContentHash = agent.ContentHash(text)
	doc.ID = agent.DocumentID(doc.ContentHash)
	doc.Size = len(text)
	doc.Chunks = len(pieces)
	chunks := make([]agent.Chunk, len(pieces))
	for i, p := range pieces {
		md := make(map[string]string, len(doc.Metadata)+1)
		maps.Copy(md, doc.Metadata)
		if p.Heading != "" {
			md["heading"] = p.Heading
		}
		text := p.Text
		if c := chunkContext(doc.Title, p); c != "" {
			text = c + "\n\n" + text
		}
		chunks[i] = agent.Chunk{ID: agent.ChunkID(doc.ID, i), DocumentID: doc.ID, Position: i, Text: text,
			Tokens: agent.EstimateTokens(text), Metadata: md}
	}
	return doc, chunks, nil
}

// chunkContext is the line a chunk starts with to say where it lies:
// its document's title and the heading it is under, each left out when
// the piece shows it already. A section's later pieces, and every piece
// after the first heading, hold neither: "Customs" alone cannot be found
// by a question that names the place it belongs to, by full text or by
// embedding (measured on the shipped corpus: BENCHMARKS.md, "Knowledge
// retrieval quality"). The line is searched, embedded and handed to the
// model with the piece, as the model needs it too.
func chunkContext(title string, p Piece) string {
	first, _, _ := strings.Cut(p.Text, "\n")
	var parts []string
	if title = strings.Join(strings.Fields(title), " "); title != "" && !strings.Contains(first, title) {
		parts = append(parts, title)
	}
	if h := p.Heading; h != "" && h != title && !strings.Contains(first, h) {
		parts = append(parts, h)
	}
	return strings.Join(parts, " › ")
}

// PutResult is what Put did.
type PutResult struct {
	Document agent.Document
	// Created is false when the collection already held the same text: it
	// was neither embedded nor stored again.
	Created bool
	// Usage is what embedding the chunks used (zero when not Created).
	Usage agent.Usage
}

// Put stores a document's text in the tenant's collection: Prepare, then
// (unless the collection holds the same text already) Embed the chunks
// with the collection's model, then Write. Retried, it stores nothing
// twice.
func (s *Store) Put(ctx context.Context, emb Embedder, tenant, collection string, doc agent.Document, text string) (PutResult, error) {
	c, _, err := s.collection(ctx, s.pool, tenant, collection)
	if err != nil {
		return PutResult{}, err
	}
	doc, chunks, err := s.Prepare(doc, text)
	if err != nil {
		return PutResult{}, err
	}
	if got, err := s.Document(ctx, tenant, collection, doc.ID); err == nil {
		return PutResult{Document: got}, nil
	} else if !agent.IsCode(err, agent.CodeNotFound) {
		return PutResult{}, err
	}
	texts := make([]string, len(chunks))
	for i, ch := range chunks {
		texts[i] = ch.Text
	}
	vecs, usage, err := EmbedAll(ctx, emb, c, texts)
	if err != nil {
		return PutResult{}, err
	}
	stored, created, err := s.Write(ctx, tenant, collection, doc, chunks, vecs)
	return PutResult{Document: stored, Created: created, Usage: usage}, err
}

// EmbedAll embeds texts with the collection's model, in batches.
func EmbedAll(ctx context.Context, emb Embedder, c agent.Collection, texts []string) ([][]float32, agent.Usage, error) {
	var out [][]float32
	var usage agent.Usage
	for i := 0; i < len(texts); i += embedBatch {
		batch := texts[i:min(i+embedBatch, len(texts))]
		vecs, u, err := emb.Embed(ctx, c.EmbeddingModel, c.Dims, batch)
		if err != nil {
			return nil, usage, fmt.Errorf("embed chunks: %w", err)
		}
		if len(vecs) != len(batch) {
			return nil, usage, agent.Errorf(agent.CodeUnavailable, "embed chunks: %d vectors for %d texts", len(vecs), len(batch))
		}
		out = append(out, vecs...)
		usage = usage.Add(u)
	}
	return out, usage, nil
}

// Write stores a prepared document and its chunks with their vectors
// (one per chunk, as EmbedAll returns them), all in one transaction.
// When the collection already holds the document (the same content
// hash), it writes nothing and returns the stored one with created
// false. Vectors are stored normalised to unit length; all must have the
// collection's dims (a collection created with 0 takes the first
// document's).
func (s *Store) Write(ctx context.Context, tenant, collection string, doc agent.Document, chunks []agent.Chunk, vecs [][]float32) (agent.Document, bool, error) {
	if len(chunks) == 0 || len(chunks) != len(vecs) || doc.Chunks != len(chunks) || doc.ID == "" {
		return agent.Document{}, false, agent.Errorf(agent.CodeInvalid, "write document: %d chunks and %d vectors; prepare it first", len(chunks), len(vecs))
	}
	dims := len(vecs[0])
	unit := make([][]float32, len(vecs))
	for i, v := range vecs {
		if len(v) != dims {
			return agent.Document{}, false, agent.Errorf(agent.CodeInvalid, "write document: vector %d has %d values, vector 0 %d", i, len(v), dims)
		}
		if unit[i] = normalize(v); unit[i] == nil {
			return agent.Document{}, false, agent.Errorf(agent.CodeInvalid, "write document: vector %d is zero or not finite", i)
		}
	}
	docMeta, err := json.Marshal(nonNil(doc.Metadata))
	if err != nil {
		return agent.Document{}, false, fmt.Errorf("write document: %w", err)
	}
	created := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		c, cid, err := s.collection(ctx, tx, tenant, collection)
		if err != nil {
			return err
		}
		if c.Dims == 0 {
			if c.Dims, err = recordDims(ctx, tx, cid, dims); err != nil {
				return err
			}
		}
		if dims != c.Dims {
			return agent.Errorf(agent.CodeInvalid, "write document: vectors have %d values; collection %q has %d dims", dims, collection, c.Dims)
		}
		tag, err := tx.Exec(ctx, sqlInsertDocument, cid, doc.ID, doc.Title, doc.Source, docMeta, doc.ContentHash, doc.Size, doc.Chunks)
		if err != nil {
			return fmt.Errorf("write document: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil // stored before: nothing more to write
		}
		created = true
		batch := &pgx.Batch{}
		for i, ch := range chunks {
			md, err := json.Marshal(nonNil(ch.Metadata))
			if err != nil {
				return fmt.Errorf("write chunk: %w", err)
			}
			s.vec.queueInsert(batch, cid, doc.ID, ch, md, unit[i])
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("write chunks: %w", err)
		}
		return nil
	})
	if err != nil {
		return agent.Document{}, false, err
	}
	stored, err := s.Document(ctx, tenant, collection, doc.ID)
	return stored, created, err
}

const sqlInsertDocument = `INSERT INTO knowledge_documents (collection_id, id, title, source, metadata, content_hash, size, chunks)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`

const sqlDocumentColumns = `d.id, c.name, d.title, d.source, d.metadata, d.content_hash, d.size, d.chunks, d.created_at`

func scanDocument(r pgx.Row) (agent.Document, error) {
	var d agent.Document
	var md []byte
	if err := r.Scan(&d.ID, &d.Collection, &d.Title, &d.Source, &md, &d.ContentHash, &d.Size, &d.Chunks, &d.Created); err != nil {
		return d, err
	}
	if err := json.Unmarshal(md, &d.Metadata); err != nil {
		return d, fmt.Errorf("decode metadata: %w", err)
	}
	if len(d.Metadata) == 0 {
		d.Metadata = nil
	}
	d.Created = d.Created.UTC()
	return d, nil
}

// Document returns a document of the tenant's collection;
// agent.CodeNotFound when there is none.
func (s *Store) Document(ctx context.Context, tenant, collection, id string) (agent.Document, error) {
	_, cid, err := s.collection(ctx, s.pool, tenant, collection)
	if err != nil {
		return agent.Document{}, err
	}
	d, err := scanDocument(s.pool.QueryRow(ctx, `SELECT `+sqlDocumentColumns+`
		FROM knowledge_documents d JOIN knowledge_collections c ON c.id = d.collection_id
		WHERE d.collection_id = $1 AND d.id = $2`, cid, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return agent.Document{}, agent.Errorf(agent.CodeNotFound, "document %q not found in collection %q", id, collection)
	}
	if err != nil {
		return agent.Document{}, fmt.Errorf("read document: %w", err)
	}
	return d, nil
}

// MaxList is the most documents one Documents call returns.
const MaxList = 1000

// Documents lists a collection's documents by id, those after the id
// after ("" from the start), at most limit (default and at most MaxList).
func (s *Store) Documents(ctx context.Context, tenant, collection, after string, limit int) ([]agent.Document, error) {
	_, cid, err := s.collection(ctx, s.pool, tenant, collection)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxList {
		limit = MaxList
	}
	return list(ctx, s.pool, "list documents", func(r pgx.CollectableRow) (agent.Document, error) { return scanDocument(r) },
		`SELECT `+sqlDocumentColumns+`
		FROM knowledge_documents d JOIN knowledge_collections c ON c.id = d.collection_id
		WHERE d.collection_id = $1 AND d.id > $2 ORDER BY d.id LIMIT $3`, cid, after, limit)
}

// DeleteDocument deletes a document with its chunks and vectors;
// agent.CodeNotFound when there is none.
func (s *Store) DeleteDocument(ctx context.Context, tenant, collection, id string) error {
	_, cid, err := s.collection(ctx, s.pool, tenant, collection)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM knowledge_documents WHERE collection_id = $1 AND id = $2`, cid, id)
	if err != nil {
		return fmt.Errorf("delete document: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return agent.Errorf(agent.CodeNotFound, "document %q not found in collection %q", id, collection)
	}
	return nil
}

// normalize returns v scaled to unit length, nil when it is zero or not
// finite.
func normalize(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return nil
	}
	inv := 1 / math.Sqrt(n)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// validText reports whether text is valid UTF-8 without NUL bytes, which
// PostgreSQL's text refuses.
func validText(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return false
		}
	}
	return utf8.ValidString(s)
}

// recordDims gives a collection that has no dims yet those of its first
// vectors, and returns the collection's dims: those of a write that
// recorded its own first.
func recordDims(ctx context.Context, tx pgx.Tx, cid int64, dims int) (int, error) {
	if _, err := tx.Exec(ctx, `UPDATE knowledge_collections SET dims = $2 WHERE id = $1 AND dims = 0`, cid, dims); err != nil {
		return 0, fmt.Errorf("record dims: %w", err)
	}
	var got int
	if err := tx.QueryRow(ctx, `SELECT dims FROM knowledge_collections WHERE id = $1`, cid).Scan(&got); err != nil {
		return 0, fmt.Errorf("record dims: %w", err)
	}
	return got, nil
}
