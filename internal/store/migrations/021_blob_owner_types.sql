-- A blob's content type is each owner's: the type the tenant first stored
-- the bytes with. Blobs are shared by content (cas_blobs), and the first
-- upload's type used to stand for every tenant, so that a tenant learned
-- another had stored the same bytes, and chose the type they were served
-- with to it. NULL: owned before this column, served with the blob's type.
ALTER TABLE blob_owners ADD COLUMN content_type TEXT;
