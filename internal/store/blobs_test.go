package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// TestTenantBlobInfo: a tenant's blob is described by the type it was
// first stored with and its size, without its bytes; another tenant's
// ref, an unknown one and a malformed one are refused as TenantBlob
// refuses them.
func TestTenantBlobInfo(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	png := []byte("\x89PNG\r\n\x1a\nnot really")
	ref, err := s.PutTenantBlob(ctx, "demo", png, "image/png")
	require.NoError(t, err)
	_, err = s.PutTenantBlob(ctx, "demo", png, "text/plain")
	require.NoError(t, err)
	info, err := s.TenantBlobInfo(ctx, "demo", ref)
	require.NoError(t, err)
	require.Equal(t, agent.BlobInfo{Ref: ref, ContentType: "image/png", Size: int64(len(png))}, info, "the first type stands")

	for _, tc := range []struct {
		name, tenant, ref string
		code              agent.Code
	}{
		{"another tenant", "acme", ref, agent.CodeNotFound},
		{"nothing stored", "demo", "cas://sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", agent.CodeNotFound},
		{"malformed", "demo", "cas://sha256:XYZ", agent.CodeInvalid},
		{"no tenant", "", ref, agent.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.TenantBlobInfo(ctx, tc.tenant, tc.ref)
			requireCode(t, err, tc.code)
		})
	}
}

// TestBlobTypeIsEachTenants: bytes another tenant stored first, with a
// type of its choosing, are answered and served to a tenant with the
// type that tenant gave, exactly as if it were the first to store them:
// nothing says the other tenant has them, and its type poisons nothing.
// A blob owned before types were kept per owner keeps the blob's type.
func TestBlobTypeIsEachTenants(t *testing.T) {
	t.Parallel()
	for _, size := range []int{64, 3*chunk + 5} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			s := open(t, store.Options{BlobChunkSize: chunk})
			ctx := t.Context()
			page := append([]byte("<html><script>alert(1)</script>"), randomBytes(uint64(size), size)...)
			alone := open(t, store.Options{BlobChunkSize: chunk})
			wantRef, err := alone.PutTenantBlob(ctx, "victim", page, "text/html")
			require.NoError(t, err)
			want, err := alone.TenantBlobInfo(ctx, "victim", wantRef)
			require.NoError(t, err)

			_, err = s.PutTenantBlob(ctx, "mallory", page, "image/png")
			require.NoError(t, err)
			ref, err := s.PutTenantBlob(ctx, "victim", page, "text/html")
			require.NoError(t, err)
			info, err := s.TenantBlobInfo(ctx, "victim", ref)
			require.NoError(t, err)
			require.Equal(t, want, info, "the answer is the one the victim gets alone")
			_, typ, err := s.TenantBlob(ctx, "victim", ref)
			require.NoError(t, err)
			require.Equal(t, "text/html", typ)
			br, err := s.OpenTenantBlob(ctx, "victim", ref)
			require.NoError(t, err)
			require.Equal(t, "text/html", br.Info().ContentType)
			require.NoError(t, br.Close())
			mal, err := s.TenantBlobInfo(ctx, "mallory", ref)
			require.NoError(t, err)
			require.Equal(t, "image/png", mal.ContentType)

			// Owned before per-owner types: the blob's own type.
			_, err = s.Pool().Exec(ctx, `UPDATE blob_owners SET content_type = NULL WHERE tenant_id = 'victim'`)
			require.NoError(t, err)
			old, err := s.TenantBlobInfo(ctx, "victim", ref)
			require.NoError(t, err)
			require.Equal(t, "image/png", old.ContentType)
		})
	}
}

// chunk is the chunk size of the stores the stream tests open: small, so
// that a few KiB make many chunks.
const chunk = 1024

// randomBytes returns n bytes that do not compress, the same for a seed.
func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	_, _ = r.Read(b)
	return b
}

func casRef(data []byte) string {
	sum := sha256.Sum256(data)
	return agent.CASRefPrefix + hex.EncodeToString(sum[:])
}

// TestBlobStreams: a blob written from a stream is stored under the
// sha256 of its bytes, in one row when it fits in a chunk and in chunks
// when it does not, and reads back the same, as a stream (which seeks)
// and whole, whatever the sizes of the writer's reads.
func TestBlobStreams(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{BlobChunkSize: chunk})
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		size   int
		chunks int
		reader func(io.Reader) io.Reader
	}{
		{name: "empty", size: 0},
		{name: "one byte", size: 1},
		{name: "a chunk less one", size: chunk - 1},
		{name: "a chunk", size: chunk, chunks: 1},
		{name: "a chunk and one", size: chunk + 1, chunks: 2},
		{name: "many chunks", size: 5*chunk + 7, chunks: 6},
		{name: "read a byte at a time", size: 3*chunk + 1, chunks: 4, reader: iotest.OneByteReader},
		{name: "read in halves", size: 2 * chunk, chunks: 2, reader: iotest.HalfReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randomBytes(uint64(tc.size)+7, tc.size)
			var r io.Reader = bytes.NewReader(data)
			if tc.reader != nil {
				r = tc.reader(r)
			}
			info, err := s.WriteTenantBlob(ctx, "demo", r, "application/pdf", 0)
			require.NoError(t, err)
			require.Equal(t, agent.BlobInfo{Ref: casRef(data), ContentType: "application/pdf", Size: int64(tc.size)}, info)
			sum := strings.TrimPrefix(info.Ref, agent.CASRefPrefix)
			require.Equal(t, tc.chunks, count(t, s, `SELECT count(*) FROM blob_chunks c JOIN cas_blobs b USING (content_id) WHERE b.sha256 = $1`, sum))
			require.Equal(t, tc.chunks == 0, count(t, s, `SELECT count(*) FROM cas_blobs WHERE sha256 = $1 AND data IS NOT NULL`, sum) == 1)

			br, err := s.OpenTenantBlob(ctx, "demo", info.Ref)
			require.NoError(t, err)
			require.Equal(t, info, br.Info())
			require.NoError(t, iotest.TestReader(br, data))
			require.NoError(t, br.Close())

			whole, ct, err := s.TenantBlob(ctx, "demo", info.Ref)
			require.NoError(t, err)
			require.Equal(t, "application/pdf", ct)
			require.Equal(t, len(data), len(whole))
			require.True(t, bytes.Equal(data, whole))
		})
	}
}

// TestBlobStreamSeek: a reader reads from any offset, across chunks.
func TestBlobStreamSeek(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{BlobChunkSize: chunk})
	ctx := t.Context()
	data := randomBytes(1, 4*chunk+100)
	info, err := s.WriteTenantBlob(ctx, "demo", bytes.NewReader(data), "", 0)
	require.NoError(t, err)
	require.Equal(t, store.DefaultContentType, info.ContentType)
	br, err := s.OpenTenantBlob(ctx, "demo", info.Ref)
	require.NoError(t, err)
	defer br.Close()
	for _, tc := range []struct {
		off    int64
		whence int
		at     int64
	}{
		{off: chunk - 10, whence: io.SeekStart, at: chunk - 10},
		{off: 3 * chunk, whence: io.SeekStart, at: 3 * chunk},
		{off: -50, whence: io.SeekEnd, at: int64(len(data)) - 50},
		{off: 0, whence: io.SeekStart, at: 0},
	} {
		at, err := br.Seek(tc.off, tc.whence)
		require.NoError(t, err)
		require.Equal(t, tc.at, at)
		got := make([]byte, min(40, int64(len(data))-at))
		_, err = io.ReadFull(br, got)
		require.NoError(t, err)
		require.Equal(t, data[at:at+int64(len(got))], got)
	}
	_, err = br.Seek(-1, io.SeekStart)
	require.Error(t, err)
	require.NoError(t, br.Close())
	_, err = br.Read(make([]byte, 1))
	require.Error(t, err, "a closed reader reads no more")
}

// TestBlobStreamFailsMidway: a write whose stream fails midway, runs
// past its bound or is cancelled leaves nothing behind — no chunk, no
// blob — and the same write again succeeds, once, with the ref of the
// bytes.
func TestBlobStreamFailsMidway(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{BlobChunkSize: chunk})
	ctx := t.Context()
	data := randomBytes(2, 6*chunk+3)
	broken := errors.New("connection reset by peer")
	cancelled, cancel := context.WithCancel(ctx)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		r    io.Reader
		max  int64
		want func(t *testing.T, err error)
	}{
		{name: "the stream breaks", ctx: ctx, r: io.MultiReader(bytes.NewReader(data[:3*chunk+500]), iotest.ErrReader(broken)),
			want: func(t *testing.T, err error) { require.ErrorIs(t, err, broken) }},
		{name: "the stream is cut short", ctx: ctx, r: io.MultiReader(bytes.NewReader(data[:2*chunk+1]), iotest.ErrReader(io.ErrUnexpectedEOF)),
			want: func(t *testing.T, err error) { require.ErrorIs(t, err, io.ErrUnexpectedEOF) }},
		{name: "a short stream is cut short", ctx: ctx, r: io.MultiReader(bytes.NewReader(data[:100]), iotest.ErrReader(io.ErrUnexpectedEOF)),
			want: func(t *testing.T, err error) { require.ErrorIs(t, err, io.ErrUnexpectedEOF) }},
		{name: "past the bound", ctx: ctx, r: bytes.NewReader(data), max: 4 * chunk,
			want: func(t *testing.T, err error) {
				requireCode(t, err, agent.CodeInvalid)
				require.ErrorContains(t, err, fmt.Sprintf("larger than %d bytes", 4*chunk))
			}},
		{name: "cancelled", ctx: cancelled, r: io.MultiReader(bytes.NewReader(data[:2*chunk]), readerFunc(func([]byte) (int, error) {
			cancel()
			<-cancelled.Done()
			return 0, cancelled.Err()
		})), want: func(t *testing.T, err error) { require.ErrorIs(t, err, context.Canceled) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.WriteTenantBlob(tc.ctx, "demo", tc.r, "application/zip", tc.max)
			tc.want(t, err)
			require.Zero(t, count(t, s, `SELECT count(*) FROM blob_chunks`), "no chunk is left behind")
			require.Zero(t, count(t, s, `SELECT count(*) FROM cas_blobs`), "no blob is left behind")
			require.Zero(t, count(t, s, `SELECT count(*) FROM blob_owners`))
		})
	}

	info, err := s.WriteTenantBlob(ctx, "demo", bytes.NewReader(data), "application/zip", 0)
	require.NoError(t, err)
	require.Equal(t, casRef(data), info.Ref)
	got, _, err := s.TenantBlob(ctx, "demo", info.Ref)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
	require.Equal(t, 7, count(t, s, `SELECT count(*) FROM blob_chunks`))
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestBlobStreamIdempotent: the same bytes written again, by the same
// tenant (a retry), by another, at once or as one []byte, are one blob;
// each writer may read it, with the content type it first gave, and a
// tenant that wrote nothing may not.
func TestBlobStreamIdempotent(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{BlobChunkSize: chunk})
	ctx := t.Context()
	data := randomBytes(3, 3*chunk+9)
	first, err := s.WriteTenantBlob(ctx, "demo", bytes.NewReader(data), "image/png", 0)
	require.NoError(t, err)

	var g errgroup.Group
	for _, tenant := range []string{"demo", "acme", "acme", "globex"} {
		g.Go(func() error {
			info, err := s.WriteTenantBlob(ctx, tenant, bytes.NewReader(data), "text/plain", 0)
			want := agent.BlobInfo{Ref: first.Ref, ContentType: "text/plain", Size: first.Size}
			if tenant == "demo" {
				want = first // its retry: its first type stands
			}
			if err == nil && info != want {
				err = fmt.Errorf("tenant %s got %+v, want %+v", tenant, info, want)
			}
			return err
		})
	}
	require.NoError(t, g.Wait())
	ref, err := s.PutTenantBlob(ctx, "initech", data, "text/plain")
	require.NoError(t, err)
	require.Equal(t, first.Ref, ref)

	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM cas_blobs`))
	require.Equal(t, 4, count(t, s, `SELECT count(*) FROM blob_chunks`))
	for _, tenant := range []string{"demo", "acme", "globex", "initech"} {
		info, err := s.TenantBlobInfo(ctx, tenant, first.Ref)
		require.NoError(t, err, tenant)
		want := agent.BlobInfo{Ref: first.Ref, ContentType: "text/plain", Size: first.Size}
		if tenant == "demo" {
			want = first
		}
		require.Equal(t, want, info, tenant)
	}
	_, err = s.OpenTenantBlob(ctx, "hooli", first.Ref)
	requireCode(t, err, agent.CodeNotFound)
}

// TestBlobStoredInOneRow: a blob stored whole in its row, as every blob
// was before chunks, is still read, whole and as a stream.
func TestBlobStoredInOneRow(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{BlobChunkSize: chunk})
	ctx := t.Context()
	data := randomBytes(4, 5*chunk)
	ref := casRef(data)
	sum := strings.TrimPrefix(ref, agent.CASRefPrefix)
	_, err := s.Pool().Exec(ctx, `INSERT INTO cas_blobs (sha256, content_type, size, data) VALUES ($1, 'text/csv', $2, $3)`, sum, len(data), data)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `INSERT INTO blob_owners (tenant_id, sha256) VALUES ('demo', $1)`, sum)
	require.NoError(t, err)

	br, err := s.OpenTenantBlob(ctx, "demo", ref)
	require.NoError(t, err)
	require.Equal(t, agent.BlobInfo{Ref: ref, ContentType: "text/csv", Size: int64(len(data))}, br.Info())
	require.NoError(t, iotest.TestReader(br, data))
	got, _, err := s.TenantBlob(ctx, "demo", ref)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))

	// Written again as a stream, it stays the row it is.
	info, err := s.WriteTenantBlob(ctx, "demo", bytes.NewReader(data), "", 0)
	require.NoError(t, err)
	require.Equal(t, br.Info(), info)
	require.Zero(t, count(t, s, `SELECT count(*) FROM blob_chunks`))
}

// TestBlobTooLargeToReadWhole: a blob over MaxDataBytes is refused to
// whoever would read it whole, and read as a stream.
func TestBlobTooLargeToReadWhole(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	size := int64(store.MaxDataBytes + 1)
	info, err := s.WriteTenantBlob(ctx, "demo", io.LimitReader(zeros{}, size), "text/csv", 0)
	require.NoError(t, err)
	require.Equal(t, size, info.Size)
	_, _, err = s.TenantBlob(ctx, "demo", info.Ref)
	requireCode(t, err, agent.CodeInvalid)
	require.ErrorContains(t, err, "it can be read as a stream")
	_, err = s.Data(ctx, "demo", info.Ref)
	requireCode(t, err, agent.CodeInvalid)
	br, err := s.OpenTenantBlob(ctx, "demo", info.Ref)
	require.NoError(t, err)
	defer br.Close()
	n, err := io.Copy(io.Discard, br)
	require.NoError(t, err)
	require.Equal(t, size, n)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
