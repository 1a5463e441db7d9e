package store_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/store"
)

// Blobs over minObject bytes go to the object store; chunks are
// objectChunk bytes, so a blob between the two is chunked.
const (
	objectChunk = 64 << 10
	minObject   = 256 << 10
)

// openObjects returns a store whose large blobs go to a bucket of the
// test's own on the stack's object store, reached through a proxy the
// test can cut or take down, and the object store itself.
func openObjects(t *testing.T) (*store.Store, *objstore.Store, *devtest.Proxy) {
	t.Helper()
	cfg := devtest.ObjectStore(t)
	p := devtest.StartProxy(t, strings.TrimPrefix(cfg.Endpoint, "http://"))
	cfg.Endpoint, cfg.MinBlobBytes = "http://"+p.Addr(), minObject
	objects, err := objstore.New(t.Context(), cfg)
	require.NoError(t, err)
	require.NoError(t, objects.Check(t.Context()))
	return open(t, store.Options{BlobChunkSize: objectChunk, Objects: objects}), objects, p
}

func TestObjectBlobRoundTrip(t *testing.T) {
	s, objects, _ := openObjects(t)
	ctx := t.Context()
	data := randomBytes(1, 1<<20+17)
	info, err := s.WriteTenantBlob(ctx, "acme", bytes.NewReader(data), "application/x-test", 0)
	require.NoError(t, err)
	require.Equal(t, agent.BlobInfo{Ref: casRef(data), ContentType: "application/x-test", Size: int64(len(data))}, info)

	// The row names the object, and keeps no bytes of its own.
	sum := strings.TrimPrefix(info.Ref, agent.CASRefPrefix)
	var key string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT object_key FROM cas_blobs WHERE sha256 = $1 AND data IS NULL AND content_id IS NULL`, sum).Scan(&key))
	require.Equal(t, objstore.Key(sum), key)
	require.Zero(t, count(t, s, `SELECT count(*) FROM blob_chunks`))
	st, err := objects.Stat(ctx, key)
	require.NoError(t, err)
	require.Equal(t, objstore.Info{Size: int64(len(data)), ContentType: "application/x-test"}, st)

	// Read whole, as a stream, from an offset, and not by another tenant.
	got, typ, err := s.TenantBlob(ctx, "acme", info.Ref)
	require.NoError(t, err)
	require.Equal(t, "application/x-test", typ)
	require.Equal(t, data, got)
	r, err := s.OpenTenantBlob(ctx, "acme", info.Ref)
	require.NoError(t, err)
	_, err = r.Seek(700_000, io.SeekStart)
	require.NoError(t, err)
	tail, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data[700_000:], tail)
	require.NoError(t, r.Close())
	_, err = s.OpenTenantBlob(ctx, "other", info.Ref)
	requireCode(t, err, agent.CodeNotFound)

	// Bytes given whole (PutTenantBlob) and a result's (PutBlob) go the
	// same way.
	more := randomBytes(2, 300<<10)
	ref, err := s.PutTenantBlob(ctx, "acme", more, "")
	require.NoError(t, err)
	got, _, err = s.TenantBlob(ctx, "acme", ref)
	require.NoError(t, err)
	require.Equal(t, more, got)
	res := randomBytes(3, 400<<10)
	ref, err = s.PutBlob(ctx, res, "")
	require.NoError(t, err)
	got, err = s.Blob(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, res, got)
	require.Equal(t, 3, count(t, s, `SELECT count(*) FROM cas_blobs WHERE object_key IS NOT NULL`))

	// Under the threshold a blob stays in PostgreSQL: one row, or chunks.
	small := randomBytes(4, 128<<10)
	ref, err = s.PutTenantBlob(ctx, "acme", small, "")
	require.NoError(t, err)
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM cas_blobs WHERE sha256 = $1 AND content_id IS NOT NULL`, strings.TrimPrefix(ref, agent.CASRefPrefix)))
	listed, err := objects.List(ctx, "sha256/")
	require.NoError(t, err)
	require.Len(t, listed, 3)
}

func TestObjectBlobStoredOnce(t *testing.T) {
	s, objects, _ := openObjects(t)
	ctx := t.Context()
	data := randomBytes(5, 600<<10)
	first, err := s.WriteTenantBlob(ctx, "acme", bytes.NewReader(data), "text/plain", 0)
	require.NoError(t, err)
	// The same bytes again, by the same tenant (a retry) and by another.
	again, err := s.WriteTenantBlob(ctx, "acme", bytes.NewReader(data), "application/json", 0)
	require.NoError(t, err)
	require.Equal(t, first, again, "the first type stands")
	other, err := s.WriteTenantBlob(ctx, "globex", bytes.NewReader(data), "application/json", 0)
	require.NoError(t, err)
	require.Equal(t, agent.BlobInfo{Ref: first.Ref, ContentType: "application/json", Size: first.Size}, other)

	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM cas_blobs`))
	require.Equal(t, 2, count(t, s, `SELECT count(*) FROM blob_owners`))
	listed, err := objects.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, listed, 1, "one object")
	require.Equal(t, objstore.Key(strings.TrimPrefix(first.Ref, agent.CASRefPrefix)), listed[0].Key)
	require.Equal(t, first.Size, listed[0].Size)
	require.WithinDuration(t, time.Now(), listed[0].Modified, time.Minute)
	got, _, err := s.TenantBlob(ctx, "globex", first.Ref)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestObjectBlobCutDownload(t *testing.T) {
	s, _, p := openObjects(t)
	ctx := t.Context()
	data := randomBytes(6, 1<<20)
	info, err := s.WriteTenantBlob(ctx, "acme", bytes.NewReader(data), "", 0)
	require.NoError(t, err)

	// The store's answers are cut after 100 KiB: the body ends early,
	// as when a connection drops.
	p.CutAfter(100 << 10)
	r, err := s.OpenTenantBlob(ctx, "acme", info.Ref)
	require.NoError(t, err, "the answer's headers came")
	got, err := io.ReadAll(r)
	requireCode(t, err, agent.CodeUnavailable)
	require.Contains(t, err.Error(), "cut off after")
	require.Less(t, len(got), len(data), "what came is less than the blob, and ends in an error")
	require.NoError(t, r.Close())

	_, _, err = s.TenantBlob(ctx, "acme", info.Ref)
	requireCode(t, err, agent.CodeUnavailable)

	// Whole again once the connection holds.
	p.CutAfter(0)
	whole, _, err := s.TenantBlob(ctx, "acme", info.Ref)
	require.NoError(t, err)
	require.Equal(t, data, whole)
}

func TestObjectStoreDown(t *testing.T) {
	s, _, p := openObjects(t)
	ctx := t.Context()
	stored := randomBytes(7, 512<<10)
	info, err := s.WriteTenantBlob(ctx, "acme", bytes.NewReader(stored), "", 0)
	require.NoError(t, err)

	p.Down()

	// A write fails clearly and leaves no row.
	data := randomBytes(8, 512<<10)
	_, err = s.WriteTenantBlob(ctx, "acme", bytes.NewReader(data), "", 0)
	requireCode(t, err, agent.CodeUnavailable)
	require.Contains(t, err.Error(), "object store: put")
	_, err = s.PutTenantBlob(ctx, "acme", data, "")
	requireCode(t, err, agent.CodeUnavailable)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.False(t, store.Unavailable(err), "the store is up: a caller does not wait for the database")
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM cas_blobs`))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM blob_owners`))
	_, err = s.TenantBlobInfo(ctx, "acme", casRef(data))
	requireCode(t, err, agent.CodeNotFound)

	// A read fails clearly: unavailable, never "not found".
	_, err = s.OpenTenantBlob(ctx, "acme", info.Ref)
	requireCode(t, err, agent.CodeUnavailable)
	require.Contains(t, err.Error(), "object store: get")
	// What it knows without the store, it still tells.
	got, err := s.TenantBlobInfo(ctx, "acme", info.Ref)
	require.NoError(t, err)
	require.Equal(t, info, got)
}
