package store

import (
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5, which S3-compatible stores check uploads with; not for security
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/objstore"
)

// Blobs in the object store.
//
// A blob larger than the store's threshold (Options.Objects) is written
// to a spool file as it is read, so that its SHA-256 — its object's key —
// and its size are known before it is uploaded; then uploaded under that
// key (a retry, or another writer of the same bytes, writes the same
// object again: S3 replaces an object whole, and content addressing
// makes it the same); then its row and its owner are added in one
// transaction. Nothing is referenced before its object is whole, and a
// write that fails at any step leaves no row (at most an object no row
// names, which a sweep may delete). Reads go through BlobReader like
// every blob's: the object's bytes are streamed, and checked against the
// row's size and hash as they end (objstore.Get), so a cut or garbled
// download is an error, never short data.

const sqlInsertObjectBlob = `
INSERT INTO cas_blobs (sha256, content_type, size, object_key)
VALUES ($1, $2, $3, $4)
ON CONFLICT (sha256) DO NOTHING`

// writeObject stores the blob src reads, its first chunk read and
// pending: in the object store when it is larger than s.objectMin, else
// in chunks as without one.
func (s *Store) writeObject(ctx context.Context, tenantID string, src *chunkSource, contentType string) (agent.BlobInfo, error) {
	spool, err := os.CreateTemp(s.spoolDir, "agentflow-blob-*")
	if err != nil {
		return agent.BlobInfo{}, fmt.Errorf("write blob: spool: %w", err)
	}
	defer func() {
		_ = spool.Close()
		_ = os.Remove(spool.Name())
	}()
	sum5 := md5.New() //nolint:gosec // see the import
	w := io.MultiWriter(spool, sum5)
	for src.Next() {
		if _, err := w.Write(src.buf[:src.n]); err != nil {
			return agent.BlobInfo{}, fmt.Errorf("write blob: spool: %w", err)
		}
	}
	if src.err != nil {
		return agent.BlobInfo{}, src.err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return agent.BlobInfo{}, fmt.Errorf("write blob: spool: %w", err)
	}
	if src.size <= s.objectMin {
		again := &chunkSource{r: spool, h: sha256.New(), buf: src.buf, seq: -1}
		if !again.read() {
			return agent.BlobInfo{}, fmt.Errorf("write blob: read the spool: %w", again.err)
		}
		again.pending = true
		return s.writeChunks(ctx, tenantID, again, contentType)
	}
	sum := hex.EncodeToString(src.h.Sum(nil))
	key := objstore.Key(sum)
	// The hash's shared lock, from before the upload until the row is
	// committed: a retention sweep cannot delete the object in between
	// (retention.go).
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockBlobShared, sum); err != nil {
			return err
		}
		if err := s.objects.Put(ctx, key, spool, src.size, contentType, sum5.Sum(nil)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlInsertObjectBlob, sum, contentType, src.size, key); err != nil {
			return err
		}
		if tenantID != "" {
			_, err := tx.Exec(ctx, sqlOwnBlob, tenantID, sum, contentType)
			return err
		}
		return nil
	})
	if err != nil {
		return agent.BlobInfo{}, fmt.Errorf("write blob %s: %w", sum, err)
	}
	return s.info(ctx, tenantID, sum)
}

// objectBody is where a BlobReader of a blob in the object store is.
type objectBody struct {
	key  string
	sum  string
	body io.ReadCloser // nil until read, and after a seek
	at   int64         // the offset body reads next
}

// fromObject makes r read the blob from the object store.
func (r *BlobReader) fromObject(key, sum string) error {
	if r.s.objects == nil {
		return agent.Errorf(agent.CodeUnavailable, "blob %s is kept in the object store, and this process has none configured (%s)", r.info.Ref, objstore.EnvBucket)
	}
	r.object = &objectBody{key: key, sum: sum}
	r.chunkSize = max(r.info.Size, 1)
	return nil
}

// start opens the blob's object, when it is in the object store, so
// that a store that is down fails the open, before a caller answers
// anything.
func (r *BlobReader) start() error {
	if r.object == nil || r.info.Size == 0 {
		return nil
	}
	return r.openObject()
}

// readObject reads the object's bytes at the reader's offset.
func (r *BlobReader) readObject(p []byte) (int, error) {
	o := r.object
	if o.body == nil || o.at != r.off {
		if err := r.openObject(); err != nil {
			return 0, err
		}
	}
	n, err := o.body.Read(p)
	o.at += int64(n)
	r.off += int64(n)
	if err != nil && err != io.EOF { //nolint:errorlint // the checked body's io.EOF is its verified end, never wrapped
		return n, fmt.Errorf("read blob %s: %w", r.info.Ref, err)
	}
	return n, err
}

// openObject (re)opens the object at the reader's offset.
func (r *BlobReader) openObject() error {
	o := r.object
	if o.body != nil {
		_ = o.body.Close()
		o.body = nil
	}
	body, err := r.s.objects.Get(r.ctx, o.key, r.off, objstore.Digest{Size: r.info.Size, SHA256: o.sum})
	if err != nil {
		return fmt.Errorf("read blob %s: %w", r.info.Ref, err)
	}
	o.body, o.at = body, r.off
	return nil
}

func (o *objectBody) close() error {
	if o.body == nil {
		return nil
	}
	err := o.body.Close()
	o.body = nil
	return err
}
