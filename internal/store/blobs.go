package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Ref schemes.
const (
	casRefPrefix      = agent.CASRefPrefix
	artifactRefPrefix = agent.ArtifactRefPrefix
)

// DefaultContentType is stored for blobs put without a content type.
const DefaultContentType = "application/octet-stream"

// DefaultBlobChunkSize is the size of a blob's chunks (the package doc's
// Blobs): what a write or a read holds of a blob at once.
const DefaultBlobChunkSize = 1 << 20

// MaxDataBytes bounds what Data and TenantBlob read whole into memory: a
// blob larger than that is read as a stream (OpenTenantBlob).
const MaxDataBytes = 64 << 20

const (
	sqlInsertBlob = `
INSERT INTO cas_blobs (sha256, content_type, size, data)
VALUES ($1, $2, $3, $4)
ON CONFLICT (sha256) DO NOTHING`

	sqlInsertChunkedBlob = `
INSERT INTO cas_blobs (sha256, content_type, size, content_id, chunk_size)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (sha256) DO NOTHING`

	sqlBlobExists    = `SELECT EXISTS (SELECT 1 FROM cas_blobs WHERE sha256 = $1)`
	sqlNextContentID = `SELECT nextval('blob_content_ids')`

	// A blob's body: its bytes when it is one row (data), else where its
	// chunks are.
	sqlBlobBody       = `SELECT content_type, size, content_id, chunk_size, data, object_key FROM cas_blobs WHERE sha256 = $1`
	sqlTenantBlobBody = `
SELECT COALESCE(o.content_type, b.content_type), b.size, b.content_id, b.chunk_size, b.data, b.object_key
FROM cas_blobs b JOIN blob_owners o USING (sha256)
WHERE o.tenant_id = $1 AND b.sha256 = $2`
	sqlChunk = `SELECT data FROM blob_chunks WHERE content_id = $1 AND seq = $2`

	// A tenant's content type for bytes is the one it first stored them
	// with (blob_owners.content_type), whatever another tenant's was.
	sqlOwnBlob        = `INSERT INTO blob_owners (tenant_id, sha256, content_type) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`
	sqlTenantBlobInfo = `
SELECT COALESCE(o.content_type, b.content_type), b.size
FROM cas_blobs b JOIN blob_owners o USING (sha256)
WHERE o.tenant_id = $1 AND b.sha256 = $2`
)

// PutBlob stores data under its sha256 and returns its ref,
// "cas://sha256:<hex>". Idempotent: identical bytes are stored once, and the
// first content type stands.
func (s *Store) PutBlob(ctx context.Context, data []byte, contentType string) (string, error) {
	sum, err := s.putBlob(ctx, data, contentType)
	if err != nil {
		return "", err
	}
	return casRefPrefix + sum, nil
}

// putBlob stores data and returns its sha256 in hex: in one row when it
// fits in a chunk, else in chunks unless the bytes are stored already.
func (s *Store) putBlob(ctx context.Context, data []byte, contentType string) (string, error) {
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	if len(data) <= s.chunkSize {
		return sum, s.putInline(ctx, sum, data, contentType)
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, sqlBlobExists, sum).Scan(&exists); err != nil {
		return "", fmt.Errorf("put blob %s: %w", sum, err)
	}
	if exists {
		return sum, nil
	}
	_, err := s.writeBlob(ctx, "", bytes.NewReader(data), contentType, 0)
	return sum, err
}

// putInline stores a blob of at most one chunk as one row.
func (s *Store) putInline(ctx context.Context, sum string, data []byte, contentType string) error {
	contentType = cmp.Or(contentType, DefaultContentType)
	if data == nil {
		data = []byte{} // bytea: nil would be NULL
	}
	if _, err := s.pool.Exec(ctx, sqlInsertBlob, sum, contentType, len(data), data); err != nil {
		return fmt.Errorf("put blob %s: %w", sum, err)
	}
	return nil
}

// Blob returns the bytes behind a "cas://sha256:<hex>" ref: agent.CodeInvalid
// for a malformed ref, agent.CodeNotFound when nothing is stored under it.
func (s *Store) Blob(ctx context.Context, ref string) ([]byte, error) {
	sum, err := parseCASRef(ref)
	if err != nil {
		return nil, err
	}
	return s.blob(ctx, sum)
}

func (s *Store) blob(ctx context.Context, sum string) ([]byte, error) {
	r, err := s.open(ctx, "", sum)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.start(); err != nil {
		return nil, err
	}
	return r.readAll(0) // a result's payload, which the store wrote
}

// parseCASRef returns the hex digest of a "cas://sha256:<hex>" ref.
func parseCASRef(ref string) (string, error) {
	sum, ok := agent.CASDigest(ref)
	if !ok {
		return "", agent.Errorf(agent.CodeInvalid, "ref %q: want %s<64 lowercase hex digits>", words.Clip(ref, 100), casRefPrefix)
	}
	return sum, nil
}

// PutTenantBlob stores data for a tenant and returns its ref: only that
// tenant (and others that store the same bytes) may read it, each with
// the content type it first gave. Idempotent. Bytes larger than a chunk
// are written whether or not another tenant stored them (WriteTenantBlob),
// so that how long a store takes says nothing of other tenants' data.
func (s *Store) PutTenantBlob(ctx context.Context, tenantID string, data []byte, contentType string) (string, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return "", err
	}
	if len(data) > s.chunkSize {
		info, err := s.writeBlob(ctx, tenantID, bytes.NewReader(data), contentType, 0)
		return info.Ref, err
	}
	sum, err := s.putBlob(ctx, data, contentType)
	if err != nil {
		return "", err
	}
	if err := s.own(ctx, tenantID, sum, contentType); err != nil {
		return "", err
	}
	return casRefPrefix + sum, nil
}

// own makes a stored blob the tenant's, with the content type it gives
// (DefaultContentType for ""), unless the tenant owns it already.
func (s *Store) own(ctx context.Context, tenantID, sum, contentType string) error {
	contentType = cmp.Or(contentType, DefaultContentType)
	if _, err := s.pool.Exec(ctx, sqlOwnBlob, tenantID, sum, contentType); err != nil {
		return fmt.Errorf("put blob %s for tenant %q: %w", sum, tenantID, err)
	}
	return nil
}

// WriteTenantBlob stores what r yields as a blob of the tenant's, as it
// reads it: a chunk at a time, its sha256 computed on the way, so that a
// blob of any size costs a chunk of memory. A blob larger than one chunk
// is written in one transaction with its row, so that a write that fails
// midway — r's error, ctx's end, a lost connection — leaves nothing
// behind and nothing to read; writing the same bytes again (a retry)
// stores nothing new and gives the same ref. contentType "" is stored as
// DefaultContentType; bytes the tenant stored before keep its first
// type, and another tenant's type is never this tenant's.
// maxBytes, when positive, bounds the blob: past it the write fails with
// agent.CodeInvalid. Errors of r come back wrapped.
func (s *Store) WriteTenantBlob(ctx context.Context, tenantID string, r io.Reader, contentType string, maxBytes int64) (agent.BlobInfo, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return agent.BlobInfo{}, err
	}
	return s.writeBlob(ctx, tenantID, r, contentType, maxBytes)
}

// errBlobStored rolls back a write whose bytes another write stored
// first.
var errBlobStored = errors.New("blob stored already")

// writeBlob is WriteTenantBlob; tenantID "" stores a blob no tenant owns
// (a result's payload).
func (s *Store) writeBlob(ctx context.Context, tenantID string, r io.Reader, contentType string, maxBytes int64) (agent.BlobInfo, error) {
	contentType = cmp.Or(contentType, DefaultContentType)
	src := &chunkSource{r: r, h: sha256.New(), buf: make([]byte, s.chunkSize), max: maxBytes, seq: -1}
	if !src.read() && src.err != nil {
		return agent.BlobInfo{}, src.err
	}
	if src.eof {
		// One chunk or less: one row, as blobs always were.
		sum := hex.EncodeToString(src.h.Sum(nil))
		if err := s.putInline(ctx, sum, src.buf[:src.n], contentType); err != nil {
			return agent.BlobInfo{}, err
		}
		return s.owned(ctx, tenantID, sum, contentType)
	}
	src.pending = true
	if s.objects != nil {
		return s.writeObject(ctx, tenantID, src, contentType)
	}
	return s.writeChunks(ctx, tenantID, src, contentType)
}

// writeChunks stores the blob src reads as rows of blob_chunks, its row
// last, in one transaction.
func (s *Store) writeChunks(ctx context.Context, tenantID string, src *chunkSource, contentType string) (agent.BlobInfo, error) {
	var sum string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlNextContentID).Scan(&src.id); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"blob_chunks"}, []string{"content_id", "seq", "data"}, src); err != nil {
			if src.err != nil {
				return src.err
			}
			return fmt.Errorf("copy chunks: %w", err)
		}
		sum = hex.EncodeToString(src.h.Sum(nil))
		tag, err := tx.Exec(ctx, sqlInsertChunkedBlob, sum, contentType, src.size, src.id, s.chunkSize)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errBlobStored // drops this write's chunks
		}
		if tenantID != "" {
			_, err = tx.Exec(ctx, sqlOwnBlob, tenantID, sum, contentType)
		}
		return err
	})
	switch {
	case errors.Is(err, errBlobStored):
		return s.owned(ctx, tenantID, sum, contentType)
	case src.err != nil && errors.Is(err, src.err):
		return agent.BlobInfo{}, err
	case err != nil:
		return agent.BlobInfo{}, fmt.Errorf("write blob: %w", err)
	}
	return s.info(ctx, tenantID, sum)
}

// owned makes a stored blob the tenant's (when one is named) and
// describes it.
func (s *Store) owned(ctx context.Context, tenantID, sum, contentType string) (agent.BlobInfo, error) {
	if tenantID != "" {
		if err := s.own(ctx, tenantID, sum, contentType); err != nil {
			return agent.BlobInfo{}, err
		}
	}
	return s.info(ctx, tenantID, sum)
}

// info describes a stored blob: with the tenant's first content type for
// it (the blob's first for no tenant), which may not be the one this
// write gave.
func (s *Store) info(ctx context.Context, tenantID, sum string) (agent.BlobInfo, error) {
	if tenantID != "" {
		return s.TenantBlobInfo(ctx, tenantID, casRefPrefix+sum)
	}
	r, err := s.open(ctx, "", sum)
	if err != nil {
		return agent.BlobInfo{}, err
	}
	defer r.Close()
	return r.Info(), nil
}

// chunkSource reads a blob's bytes from r a chunk at a time, hashing
// them, and hands them to COPY as rows of blob_chunks (pgx.CopyFromSource).
// It holds one chunk: COPY encodes each row before it asks for the next.
type chunkSource struct {
	r   io.Reader
	h   hash.Hash
	max int64
	id  int64 // content_id of the chunks
	buf []byte
	n   int // bytes of the current chunk in buf
	seq int // of the current chunk
	// pending says the current chunk is read but not yet handed on.
	pending bool
	size    int64 // bytes read so far
	eof     bool  // r has no more
	err     error
}

// read reads the next chunk into buf; false when r had no more or failed
// (err).
func (c *chunkSource) read() bool {
	if c.eof || c.err != nil {
		return false
	}
	n, err := fill(c.r, c.buf)
	switch {
	case err == io.EOF: //nolint:errorlint // io.EOF is the end, never wrapped; an io.ErrUnexpectedEOF of r is a failure
		c.eof = true
		if n == 0 && c.seq >= 0 {
			return false
		}
	case err != nil:
		c.err = fmt.Errorf("read the blob's bytes: %w", err)
		return false
	}
	c.size += int64(n)
	if c.max > 0 && c.size > c.max {
		c.err = agent.Errorf(agent.CodeInvalid, "the data is larger than %d bytes, the most a blob may hold here", c.max)
		return false
	}
	c.h.Write(c.buf[:n])
	c.n = n
	c.seq++
	return true
}

// fill reads into buf until it is full or r ends: io.EOF only when r
// said so. Unlike io.ReadFull it tells r's own io.ErrUnexpectedEOF (a
// body cut short) from the end of the stream.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (c *chunkSource) Next() bool {
	if c.pending {
		c.pending = false
		return true
	}
	return c.read()
}

func (c *chunkSource) Values() ([]any, error) { return []any{c.id, c.seq, c.buf[:c.n]}, nil }

func (c *chunkSource) Err() error { return c.err }

// TenantBlob returns the bytes and content type behind a cas:// ref the
// tenant stored; a ref of another tenant is agent.CodeNotFound, as one of
// nothing. It reads the blob whole: one larger than MaxDataBytes is
// agent.CodeInvalid, to be read as a stream (OpenTenantBlob) instead.
func (s *Store) TenantBlob(ctx context.Context, tenantID, ref string) ([]byte, string, error) {
	r, err := s.OpenTenantBlob(ctx, tenantID, ref)
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	data, err := r.readAll(MaxDataBytes)
	return data, r.info.ContentType, err
}

// OpenTenantBlob opens the blob behind a cas:// ref the tenant stored, to
// read as a stream: agent.CodeInvalid for a malformed ref,
// agent.CodeNotFound for nothing stored or another tenant's. Close the
// reader when done.
func (s *Store) OpenTenantBlob(ctx context.Context, tenantID, ref string) (*BlobReader, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, err
	}
	sum, err := parseCASRef(ref)
	if err != nil {
		return nil, err
	}
	r, err := s.open(ctx, tenantID, sum)
	if agent.IsCode(err, agent.CodeNotFound) {
		return nil, agent.Errorf(agent.CodeNotFound, "data %s not found", ref)
	}
	if err != nil {
		return nil, err
	}
	if err := r.start(); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// open opens a blob: the tenant's, or any when tenantID is "".
func (s *Store) open(ctx context.Context, tenantID, sum string) (*BlobReader, error) {
	r := &BlobReader{ctx: ctx, s: s, info: agent.BlobInfo{Ref: casRefPrefix + sum}, seq: -1}
	var row pgx.Row
	if tenantID == "" {
		row = s.pool.QueryRow(ctx, sqlBlobBody, sum)
	} else {
		row = s.pool.QueryRow(ctx, sqlTenantBlobBody, tenantID, sum)
	}
	var contentID *int64
	var chunkSize *int32
	var data []byte
	var objectKey *string
	err := row.Scan(&r.info.ContentType, &r.info.Size, &contentID, &chunkSize, &data, &objectKey)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "blob %s%s not found", casRefPrefix, sum), "open blob %s", sum); err != nil {
		return nil, err
	}
	if objectKey != nil {
		if err := r.fromObject(*objectKey, sum); err != nil {
			return nil, err
		}
		return r, nil
	}
	if contentID == nil {
		// Stored in one row (every blob stored before chunks, and every
		// small one): its bytes came with the row.
		r.chunk, r.chunkSize, r.seq = data, max(r.info.Size, 1), 0
		return r, nil
	}
	r.contentID, r.chunkSize = *contentID, int64(*chunkSize)
	return r, nil
}

// BlobReader reads a stored blob's bytes as a stream (io.ReadSeekCloser):
// a blob stored in chunks is fetched a chunk at a time, each by a query
// of its own, so that a reader holds one chunk of memory and no database
// connection between reads, however slowly it is read. A blob stored in
// one row came whole with it. It reads under the context it was opened
// with. Not safe for concurrent use.
type BlobReader struct {
	ctx       context.Context
	s         *Store
	info      agent.BlobInfo
	object    *objectBody // the blob is in the object store
	contentID int64       // 0: one row, held in chunk
	chunkSize int64
	off       int64
	mem       []byte // a chunk's memory, once one is read
	chunk     []byte // the bytes of chunk seq
	seq       int64  // -1: none yet
	closed    bool
}

// Info describes the blob.
func (r *BlobReader) Info() agent.BlobInfo { return r.info }

// Read reads the bytes at the reader's offset.
func (r *BlobReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, fmt.Errorf("read blob %s: the reader is closed", r.info.Ref)
	}
	if r.off >= r.info.Size {
		return 0, io.EOF
	}
	if r.object != nil {
		return r.readObject(p)
	}
	if err := r.load(r.off / r.chunkSize); err != nil {
		return 0, err
	}
	n := copy(p, r.chunk[r.off-r.seq*r.chunkSize:])
	r.off += int64(n)
	return n, nil
}

// load makes chunk seq the one held.
func (r *BlobReader) load(seq int64) error {
	if seq == r.seq {
		return nil
	}
	if r.mem == nil {
		r.mem = make([]byte, r.chunkSize)
	}
	buf := pgtype.PreallocBytes(r.mem)
	err := r.s.pool.QueryRow(r.ctx, sqlChunk, r.contentID, seq).Scan(&buf)
	want := min(r.chunkSize, r.info.Size-seq*r.chunkSize)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("read blob %s: chunk %d is missing", r.info.Ref, seq)
	case err != nil:
		return fmt.Errorf("read blob %s: %w", r.info.Ref, err)
	case int64(len(buf)) != want:
		return fmt.Errorf("read blob %s: chunk %d holds %d bytes, not %d", r.info.Ref, seq, len(buf), want)
	}
	r.chunk, r.seq = buf, seq
	return nil
}

// Seek sets the offset of the next Read (io.Seeker).
func (r *BlobReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.info.Size
	default:
		return 0, fmt.Errorf("seek blob %s: whence %d", r.info.Ref, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("seek blob %s: negative offset %d", r.info.Ref, offset)
	}
	r.off = offset
	return offset, nil
}

// Close lets go of the chunk held; the reader reads no more.
func (r *BlobReader) Close() error {
	r.mem, r.chunk, r.closed = nil, nil, true
	if r.object != nil {
		return r.object.close()
	}
	return nil
}

// readAll reads the rest of the blob, refusing one larger than limit
// when it is positive.
func (r *BlobReader) readAll(limit int64) ([]byte, error) {
	if limit > 0 && r.info.Size > limit {
		return nil, agent.Errorf(agent.CodeInvalid, "%s is %d bytes, more than the %d read whole; it can be read as a stream", r.info.Ref, r.info.Size, limit)
	}
	if r.contentID == 0 && r.object == nil && r.off == 0 && !r.closed {
		return r.chunk, nil // a one-row blob came whole
	}
	data := make([]byte, r.info.Size-min(r.off, r.info.Size))
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	return data, nil
}

// TenantBlobInfo describes the blob behind a cas:// ref the tenant stored,
// without reading its bytes: agent.CodeInvalid for a malformed ref,
// agent.CodeNotFound for nothing stored or another tenant's, as TenantBlob.
func (s *Store) TenantBlobInfo(ctx context.Context, tenantID, ref string) (agent.BlobInfo, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return agent.BlobInfo{}, err
	}
	sum, err := parseCASRef(ref)
	if err != nil {
		return agent.BlobInfo{}, err
	}
	info := agent.BlobInfo{Ref: casRefPrefix + sum}
	err = s.pool.QueryRow(ctx, sqlTenantBlobInfo, tenantID, sum).Scan(&info.ContentType, &info.Size)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "data %s not found", ref), "describe blob %s", sum); err != nil {
		return agent.BlobInfo{}, err
	}
	return info, nil
}
