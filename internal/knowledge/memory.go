package knowledge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// Long-term memory (agent.MemoryRecord) is kept in the tables of collections,
// so that it is searched exactly as documents are: each tenant has one
// memory collection, its tenant_id the tenant's with memoryTenantSuffix.
// No tenant id holds a '/' (agent.ValidateID), so no collection route,
// listing or tool of the tenant's ever names it, and no name a tenant
// chooses collides with it. A memory is a document of one chunk whose
// metadata names its scope (agent_id, user), which every query filters
// on; its id and content hash cover the scope, so that one fact of two
// users is two memories, and the same fact remembered twice in one scope
// is one.
const (
	memoryTenantSuffix = "/memory"
	memoryCollection   = "memory"
)

// Metadata keys of a memory's document and chunk.
const (
	memAgent  = "agent_id"
	memUser   = "user"
	memSource = "source"
	memTags   = "tags"
)

// MaxMemoryList is the most memories one List call returns.
const MaxMemoryList = 1000

// Memories keeps long-term memories in a Store, embedded by one model.
type Memories struct {
	s     *Store
	emb   Embedder
	model string
}

// Memories returns the memories of s, embedded by model ("provider:model")
// through emb. A tenant's memory collection takes model when its first
// memory is stored, and keeps it: later memories and recalls use the
// collection's.
func (s *Store) Memories(emb Embedder, model string) *Memories {
	return &Memories{s: s, emb: emb, model: model}
}

const sqlEnsureMemoryCollection = `INSERT INTO knowledge_collections (tenant_id, name, description, embedding_model)
	VALUES ($1, $2, 'long-term memory', $3) ON CONFLICT (tenant_id, name) DO NOTHING`

// collection returns the tenant's memory collection, created when create
// is set; agent.CodeNotFound when it has none and create is not.
func (m *Memories) collection(ctx context.Context, q querier, tenant string, create bool) (agent.Collection, int64, error) {
	if create {
		if _, _, err := agent.ParseModel(m.model); err != nil {
			return agent.Collection{}, 0, fmt.Errorf("memory embedding model: %w", err)
		}
		if _, err := q.Exec(ctx, sqlEnsureMemoryCollection, tenant+memoryTenantSuffix, memoryCollection, m.model); err != nil {
			return agent.Collection{}, 0, fmt.Errorf("create memory collection: %w", err)
		}
	}
	var c agent.Collection
	var id int64
	err := q.QueryRow(ctx, sqlCollection, tenant+memoryTenantSuffix, memoryCollection).
		Scan(&id, &c.Tenant, &c.Name, &c.Description, &c.EmbeddingModel, &c.Dims, &c.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return agent.Collection{}, 0, agent.Errorf(agent.CodeNotFound, "no memories")
	}
	if err != nil {
		return agent.Collection{}, 0, fmt.Errorf("read memory collection: %w", err)
	}
	c.Tenant = tenant
	return c, id, nil
}

func scopeFilter(s agent.MemoryScope) []byte {
	f := map[string]string{memUser: s.User}
	if s.AgentID != "" {
		f[memAgent] = s.AgentID
	}
	b, _ := json.Marshal(f) // a map of strings always marshals
	return b
}

// Remember stores mem's text and tags in scope (whose AgentID is
// required), unless the scope holds the same text already: then it
// returns the stored memory and created false, having embedded nothing.
// Retried, it stores nothing twice.
func (m *Memories) Remember(ctx context.Context, scope agent.MemoryScope, mem agent.MemoryRecord) (agent.MemoryRecord, bool, error) {
	got, created, err := m.RememberAll(ctx, scope, []agent.MemoryRecord{mem})
	if err != nil {
		return agent.MemoryRecord{}, false, err
	}
	return got[0], created > 0, nil
}

// RememberAll stores mems in scope as Remember does, all in one
// transaction: all of them or none. It returns them as stored, in order,
// and how many were new.
func (m *Memories) RememberAll(ctx context.Context, scope agent.MemoryScope, mems []agent.MemoryRecord) ([]agent.MemoryRecord, int, error) {
	if err := scope.Validate(); err != nil {
		return nil, 0, err
	}
	if scope.AgentID == "" {
		return nil, 0, agent.Errorf(agent.CodeInvalid, "a memory belongs to an agent: agent_id is required")
	}
	if len(mems) == 0 || len(mems) > embedBatch {
		return nil, 0, agent.Errorf(agent.CodeInvalid, "remember %d memories at once: want 1 to %d", len(mems), embedBatch)
	}
	ids := make([]string, len(mems))
	var fresh []int // indexes of mems the scope does not hold yet
	for i := range mems {
		mem := &mems[i]
		text, tags, err := agent.NormalizeMemory(mem.Text, mem.Tags)
		if err != nil {
			return nil, 0, err
		}
		mem.Text, mem.Tags = text, tags
		if mem.Source != agent.MemoryRemembered && mem.Source != agent.MemoryExtracted {
			return nil, 0, agent.Errorf(agent.CodeInvalid, "memory source %q: want %s or %s", mem.Source, agent.MemoryRemembered, agent.MemoryExtracted)
		}
		if len(mem.Origin) > agent.MaxMemoryOrigin || !validText(mem.Origin) {
			return nil, 0, agent.Errorf(agent.CodeInvalid, "memory origin: want UTF-8 text of at most %d bytes", agent.MaxMemoryOrigin)
		}
		ids[i] = agent.MemoryID(scope, text)
		if _, err := m.get(ctx, scope, ids[i]); agent.IsCode(err, agent.CodeNotFound) {
			fresh = append(fresh, i)
		} else if err != nil {
			return nil, 0, err
		}
	}
	created := 0
	if len(fresh) > 0 {
		n, err := m.write(ctx, scope, mems, ids, fresh)
		if err != nil {
			return nil, 0, err
		}
		created = n
	}
	out := make([]agent.MemoryRecord, len(mems))
	for i, id := range ids {
		got, err := m.get(ctx, scope, id)
		if err != nil {
			return nil, 0, err
		}
		out[i] = got
	}
	return out, created, nil
}

// write embeds the memories of mems at the indexes fresh and stores
// those the scope does not hold, in one transaction; it says how many it
// stored.
func (m *Memories) write(ctx context.Context, scope agent.MemoryScope, mems []agent.MemoryRecord, ids []string, fresh []int) (int, error) {
	c, _, err := m.collection(ctx, m.s.pool, scope.Tenant, true)
	if err != nil {
		return 0, err
	}
	texts := make([]string, len(fresh))
	for j, i := range fresh {
		texts[j] = mems[i].Text
	}
	vecs, _, err := EmbedAll(ctx, m.emb, c, texts)
	if err != nil {
		return 0, err
	}
	units := make([][]float32, len(vecs))
	for j, v := range vecs {
		if units[j] = normalize(v); units[j] == nil || len(v) != len(vecs[0]) {
			return 0, agent.Errorf(agent.CodeUnavailable, "embed memory: vector %d is zero, not finite or of another length", j)
		}
	}
	created := 0
	err = pgx.BeginFunc(ctx, m.s.pool, func(tx pgx.Tx) error {
		created = 0
		c, cid, err := m.collection(ctx, tx, scope.Tenant, false)
		if err != nil {
			return err
		}
		dims := len(units[0])
		if c.Dims == 0 {
			if c.Dims, err = recordDims(ctx, tx, cid, dims); err != nil {
				return err
			}
		}
		if dims != c.Dims {
			return agent.Errorf(agent.CodeInvalid, "remember: vectors have %d values; memories have %d dims", dims, c.Dims)
		}
		for j, i := range fresh {
			mem := mems[i]
			md := map[string]string{memAgent: scope.AgentID, memUser: scope.User, memSource: mem.Source}
			if len(mem.Tags) > 0 {
				md[memTags] = strings.Join(mem.Tags, ",")
			}
			mdJSON, err := json.Marshal(md)
			if err != nil {
				return fmt.Errorf("remember: %w", err)
			}
			tag, err := tx.Exec(ctx, sqlInsertDocument, cid, ids[i], "", mem.Origin, mdJSON,
				"sha256:"+agent.MemoryHash(scope, mem.Text), len(mem.Text), 1)
			if err != nil {
				return fmt.Errorf("remember: %w", err)
			}
			if tag.RowsAffected() == 0 {
				continue // stored meanwhile by a retry, a twin, or earlier in mems
			}
			created++
			b := &pgx.Batch{}
			m.s.vec.queueInsert(b, cid, ids[i], agent.Chunk{Position: 0, Text: mem.Text, Tokens: agent.EstimateTokens(mem.Text)}, mdJSON, units[j])
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return fmt.Errorf("remember: %w", err)
			}
		}
		return nil
	})
	return created, err
}

// HasOrigin reports whether the scope holds a memory written by origin
// (agent.MemoryRecord.Origin): an extraction that stored its facts.
func (m *Memories) HasOrigin(ctx context.Context, scope agent.MemoryScope, origin string) (bool, error) {
	if err := scope.Validate(); err != nil {
		return false, err
	}
	var found bool
	err := m.s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1`+sqlMemoryFrom+` AND d.source = $3)`,
		scope.Tenant+memoryTenantSuffix, scopeFilter(scope), origin).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("read memories: %w", err)
	}
	return found, nil
}

const sqlMemoryColumns = `d.id, d.metadata, d.source, d.created_at, k.text`

const sqlMemoryFrom = ` FROM knowledge_documents d
	JOIN knowledge_collections c ON c.id = d.collection_id
	JOIN knowledge_chunks k ON k.collection_id = d.collection_id AND k.document_id = d.id AND k.position = 0
	WHERE c.tenant_id = $1 AND c.name = 'memory' AND d.metadata @> $2::jsonb`

func scanMemory(r pgx.Row) (agent.MemoryRecord, error) {
	var mem agent.MemoryRecord
	var md []byte
	if err := r.Scan(&mem.ID, &md, &mem.Origin, &mem.Created, &mem.Text); err != nil {
		return mem, err
	}
	var meta map[string]string
	if err := json.Unmarshal(md, &meta); err != nil {
		return mem, fmt.Errorf("decode memory metadata: %w", err)
	}
	mem.AgentID, mem.Source = meta[memAgent], meta[memSource]
	if t := meta[memTags]; t != "" {
		mem.Tags = strings.Split(t, ",")
	}
	mem.Created = mem.Created.UTC()
	return mem, nil
}

// get returns a memory of the scope (of any of the user's agents when
// scope.AgentID is ""); agent.CodeNotFound when there is none.
func (m *Memories) get(ctx context.Context, scope agent.MemoryScope, id string) (agent.MemoryRecord, error) {
	mem, err := scanMemory(m.s.pool.QueryRow(ctx, `SELECT `+sqlMemoryColumns+sqlMemoryFrom+` AND d.id = $3`,
		scope.Tenant+memoryTenantSuffix, scopeFilter(scope), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return agent.MemoryRecord{}, agent.Errorf(agent.CodeNotFound, "memory %q not found", id)
	}
	if err != nil {
		return agent.MemoryRecord{}, fmt.Errorf("read memory: %w", err)
	}
	return mem, nil
}

// List lists the scope's memories (of all the user's agents when
// scope.AgentID is ""), newest first, those stored before the memory
// before ("" from the newest), at most limit (default and at most
// MaxMemoryList).
func (m *Memories) List(ctx context.Context, scope agent.MemoryScope, before string, limit int) ([]agent.MemoryRecord, error) {
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	if before != "" && !agent.ValidMemoryID(before) {
		return nil, agent.Errorf(agent.CodeInvalid, "before %q is not a memory id", before)
	}
	if limit <= 0 || limit > MaxMemoryList {
		limit = MaxMemoryList
	}
	return list(ctx, m.s.pool, "list memories", func(r pgx.CollectableRow) (agent.MemoryRecord, error) { return scanMemory(r) },
		`SELECT `+sqlMemoryColumns+sqlMemoryFrom+`
		AND ($3 = '' OR (d.created_at, d.id) < (SELECT created_at, id FROM knowledge_documents WHERE collection_id = c.id AND id = $3))
		ORDER BY d.created_at DESC, d.id DESC LIMIT $4`,
		scope.Tenant+memoryTenantSuffix, scopeFilter(scope), before, limit)
}

// Forget deletes one memory of the scope (of any of the user's agents
// when scope.AgentID is "") with its vector; agent.CodeNotFound when the
// scope has none of that id, another user's included.
func (m *Memories) Forget(ctx context.Context, scope agent.MemoryScope, id string) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if !agent.ValidMemoryID(id) {
		return agent.Errorf(agent.CodeInvalid, "%q is not a memory id", id)
	}
	tag, err := m.s.pool.Exec(ctx, `DELETE FROM knowledge_documents d USING knowledge_collections c
		WHERE c.id = d.collection_id AND c.tenant_id = $1 AND c.name = 'memory' AND d.metadata @> $2::jsonb AND d.id = $3`,
		scope.Tenant+memoryTenantSuffix, scopeFilter(scope), id)
	if err != nil {
		return fmt.Errorf("forget memory: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return agent.Errorf(agent.CodeNotFound, "memory %q not found", id)
	}
	return nil
}

// Erase deletes every memory of the scope (of all the user's agents when
// scope.AgentID is ""), rows and vectors, in one statement (one
// transaction), and says how many there were. Erasing nothing is no
// error: a retried erase is harmless.
func (m *Memories) Erase(ctx context.Context, scope agent.MemoryScope) (int, error) {
	if err := scope.Validate(); err != nil {
		return 0, err
	}
	tag, err := m.s.pool.Exec(ctx, `DELETE FROM knowledge_documents d USING knowledge_collections c
		WHERE c.id = d.collection_id AND c.tenant_id = $1 AND c.name = 'memory' AND d.metadata @> $2::jsonb`,
		scope.Tenant+memoryTenantSuffix, scopeFilter(scope))
	if err != nil {
		return 0, fmt.Errorf("erase memories: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// Recall returns the scope's memories most relevant to text, best
// first, at most topK (1 to MaxTopK), by the hybrid search of
// collections; the usage is what embedding text used. A scope with no
// memories recalls nothing.
func (m *Memories) Recall(ctx context.Context, scope agent.MemoryScope, text string, topK int) ([]agent.MemoryRecord, agent.Usage, error) {
	if err := scope.Validate(); err != nil {
		return nil, agent.Usage{}, err
	}
	q, err := Query{Text: text, TopK: topK}.normalize()
	if err != nil {
		return nil, agent.Usage{}, err
	}
	c, cid, err := m.collection(ctx, m.s.pool, scope.Tenant, false)
	if agent.IsCode(err, agent.CodeNotFound) {
		return nil, agent.Usage{}, nil
	}
	if err != nil {
		return nil, agent.Usage{}, err
	}
	filter := scopeFilter(scope)
	n := candidates(q.TopK)
	textRanked, err := m.s.textRank(ctx, cid, q.Text, filter, n)
	if err != nil {
		return nil, agent.Usage{}, err
	}
	var vecRanked []chunkKey
	vecs, usage, err := m.emb.Embed(ctx, c.EmbeddingModel, c.Dims, []string{q.Text})
	if err != nil {
		return nil, usage, fmt.Errorf("embed query: %w", err)
	}
	if len(vecs) != 1 || c.Dims != 0 && len(vecs[0]) != c.Dims {
		return nil, usage, agent.Errorf(agent.CodeUnavailable, "embed query: want one vector of %d values", c.Dims)
	}
	if unit := normalize(vecs[0]); unit != nil && c.Dims != 0 {
		if vecRanked, err = m.s.vec.nearest(ctx, m.s.pool, cid, unit, filter, n); err != nil {
			return nil, usage, fmt.Errorf("vector search: %w", err)
		}
	}
	hits := fuse(textRanked, vecRanked, q.TopK)
	out := make([]agent.MemoryRecord, 0, len(hits))
	for _, h := range hits {
		mem, err := m.get(ctx, scope, h.Chunk.DocumentID)
		if agent.IsCode(err, agent.CodeNotFound) {
			continue // forgotten during the search
		}
		if err != nil {
			return nil, usage, err
		}
		mem.Score = h.Score
		out = append(out, mem)
	}
	return out, usage, nil
}
