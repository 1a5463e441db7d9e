// Package knowledge keeps a tenant's collections of documents in
// PostgreSQL, split into chunks that are searched by full text, by
// embedding, or both fused (hybrid). It is the storage and search under
// ingestion, the retrieve tool and long-term memory; it never calls a
// model itself except through the Embedder it is handed.
//
// It owns its tables' SQL (their migration is internal/store's) and must
// not import the store, the activities or a model provider: the Embedder is
// handed in.
//
// # Chunking
//
// Split cuts a text into chunks of at most SplitOptions.ChunkTokens
// tokens, counted as agentflow counts them everywhere
// (agent.EstimateTokens: a token per four bytes, rounded up), each
// starting with the last OverlapTokens of the one before. A Markdown
// heading starts a new chunk, and the chunks under it carry it as
// metadata "heading"; within a section a chunk ends at a paragraph break,
// else at a sentence's end, else between words, and never inside a UTF-8
// character.
//
// # Storage
//
// Migration 028_knowledge.sql: knowledge_collections (unique name per
// tenant), knowledge_documents (a document's id is derived from its
// content hash: storing the same text in a collection again stores
// nothing), knowledge_chunks (text, a generated English tsvector with a
// GIN index, metadata as JSONB, the unit-length embedding). A document
// and all its chunks are written in one transaction: never half-stored.
// Deleting a collection or a document deletes its rows and vectors.
//
// Vectors are kept as their float32 bytes (bytea: sent as stored, where
// PostgreSQL encodes a real[] value by value, 15 times slower) and
// searched by an exact scan in Go (the "exact" index), or, where the server has pgvector (the migration adds the
// column embedding_vec when CREATE EXTENSION vector succeeds), by
// pgvector's cosine distance (the "pgvector" index). New detects which at
// start; Store.VectorIndex reports it.
//
// # Search
//
// A Query is answered by full text (PostgreSQL's English text search: the
// question's words, any of them, ranked by ts_rank_cd), by vector
// similarity (cosine, the query embedded by the collection's model), or
// both fused by reciprocal rank (agent.RRFK = 60): each ranker proposes
// its best candidates and a chunk's score is the sum of 1/(60 + rank)
// over the rankers that found it. Filters match chunks' metadata exactly,
// key by key. Collections are looked up by tenant and name: another
// tenant's collection is agent.CodeNotFound, as a missing one is.
package knowledge
