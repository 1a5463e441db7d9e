-- A blob larger than the object store's threshold is kept in an
-- S3-compatible object store (internal/objstore) under object_key, its
-- content-addressed key; its row keeps the hash, the size and the content
-- type, and blob_owners its owners, as for every blob. The object is
-- written before the row, and the row with its first owner in one
-- transaction: no row names an object that is not whole. An object
-- without a row (a write that failed after its upload) is garbage a sweep
-- may delete; a row is never without its object.
ALTER TABLE cas_blobs ADD COLUMN object_key TEXT CHECK (object_key <> '');
ALTER TABLE cas_blobs DROP CONSTRAINT cas_blobs_one_body;
ALTER TABLE cas_blobs ADD CONSTRAINT cas_blobs_one_body CHECK (
    (data IS NOT NULL AND content_id IS NULL AND chunk_size IS NULL AND object_key IS NULL) OR
    (data IS NULL AND content_id IS NOT NULL AND chunk_size IS NOT NULL AND object_key IS NULL) OR
    (data IS NULL AND content_id IS NULL AND chunk_size IS NULL AND object_key IS NOT NULL));
