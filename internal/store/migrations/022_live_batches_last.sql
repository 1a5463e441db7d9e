-- A model call reads what its stream's earlier calls stored after an
-- index (pglive's stored: WHERE stream_id = $1 AND last > $2), at every
-- claim. A stream's batches stay until its turn ends, so a long turn
-- holds thousands; read by the primary key's stream_id prefix, each claim
-- scanned them all and a turn's steps slowed as it went. By (stream_id,
-- last) the read takes only the batches it returns.
CREATE INDEX live_batches_stream_last ON live_batches (stream_id, last);
