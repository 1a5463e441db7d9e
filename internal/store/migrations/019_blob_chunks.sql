-- Blobs larger than one chunk are stored as rows of blob_chunks, so that
-- they are written and read a chunk at a time (a stream), never whole in
-- memory; a blob's row in cas_blobs then holds no data but names its
-- chunks by content_id. Blobs stored before keep their bytes in data and
-- are served as they were. See internal/store/blobs.go for why chunks
-- rather than large objects.
ALTER TABLE cas_blobs ALTER COLUMN data DROP NOT NULL;
ALTER TABLE cas_blobs ADD COLUMN content_id BIGINT UNIQUE;
ALTER TABLE cas_blobs ADD COLUMN chunk_size INT CHECK (chunk_size > 0);
ALTER TABLE cas_blobs ADD CONSTRAINT cas_blobs_one_body CHECK (
    (data IS NOT NULL AND content_id IS NULL AND chunk_size IS NULL) OR
    (data IS NULL AND content_id IS NOT NULL AND chunk_size IS NOT NULL));

CREATE SEQUENCE blob_content_ids;

-- Chunk seq of a blob: bytes [seq*chunk_size, (seq+1)*chunk_size). Chunks
-- are written in the transaction that adds their blob's row, and the
-- deferred key makes that so: a write that fails midway leaves nothing.
CREATE TABLE blob_chunks (
    content_id BIGINT NOT NULL REFERENCES cas_blobs (content_id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    seq        INT    NOT NULL CHECK (seq >= 0),
    data       BYTEA  NOT NULL,
    PRIMARY KEY (content_id, seq)
);
