-- Knowledge: a tenant's collections, their documents and the documents'
-- chunks, searched by full text (the generated tsv column and its GIN
-- index) and by embedding (internal/knowledge).
--
-- Embeddings are unit vectors. They are kept in embedding as their
-- float32 values, little-endian (4 bytes a dimension), which every
-- PostgreSQL has and internal/knowledge scans exactly: sending bytea is
-- 15 times faster than sending a real[], which PostgreSQL encodes value
-- by value (BENCHMARKS.md, "Knowledge search"). Where the server has
-- pgvector, the block at the end adds embedding_vec (vector), which
-- internal/knowledge then searches instead; it detects the column at
-- start.
CREATE TABLE knowledge_collections (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    name            TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    embedding_model TEXT NOT NULL,
    dims            INT NOT NULL DEFAULT 0, -- 0 until the first document when the model's own length is taken
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

-- A document's id is derived from its content hash, so (collection_id,
-- content_hash) is unique too: storing the same text again stores nothing.
CREATE TABLE knowledge_documents (
    collection_id BIGINT NOT NULL REFERENCES knowledge_collections (id) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    title         TEXT NOT NULL DEFAULT '',
    source        TEXT NOT NULL DEFAULT '',
    metadata      JSONB NOT NULL DEFAULT '{}',
    content_hash  TEXT NOT NULL,
    size          INT NOT NULL,
    chunks        INT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, id),
    UNIQUE (collection_id, content_hash)
);

-- A chunk's metadata is its document's plus its own (heading), so that a
-- search filters chunks without a join.
CREATE TABLE knowledge_chunks (
    collection_id BIGINT NOT NULL,
    document_id   TEXT NOT NULL,
    position      INT NOT NULL,
    text          TEXT NOT NULL,
    tokens        INT NOT NULL,
    metadata      JSONB NOT NULL DEFAULT '{}',
    embedding     BYTEA NOT NULL,
    tsv           TSVECTOR GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED,
    PRIMARY KEY (collection_id, document_id, position),
    FOREIGN KEY (collection_id, document_id) REFERENCES knowledge_documents (collection_id, id) ON DELETE CASCADE
);
CREATE INDEX knowledge_chunks_tsv ON knowledge_chunks USING GIN (tsv);
CREATE INDEX knowledge_chunks_metadata ON knowledge_chunks USING GIN (metadata jsonb_path_ops);

-- pgvector, where the server has it: the extension may be missing (Debian's
-- PostgreSQL) or not allowed to this role; either way the exact path over
-- embedding serves.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS vector;
    ALTER TABLE knowledge_chunks ADD COLUMN embedding_vec vector;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pgvector unavailable (%): knowledge search scans embeddings exactly', SQLERRM;
END
$$;
