package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// Ref schemes.
const (
	casRefPrefix      = agent.CASRefPrefix
	artifactRefPrefix = agent.ArtifactRefPrefix
)

// DefaultContentType is stored for blobs put without a content type.
const DefaultContentType = "application/octet-stream"

const (
	sqlInsertBlob = `
INSERT INTO cas_blobs (sha256, content_type, size, data)
VALUES ($1, $2, $3, $4)
ON CONFLICT (sha256) DO NOTHING`

	sqlBlob = `SELECT data FROM cas_blobs WHERE sha256 = $1`
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

// putBlob stores data and returns its sha256 in hex.
func (s *Store) putBlob(ctx context.Context, data []byte, contentType string) (string, error) {
	if contentType == "" {
		contentType = DefaultContentType
	}
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	if data == nil {
		data = []byte{} // bytea NOT NULL: nil would be NULL
	}
	if _, err := s.pool.Exec(ctx, sqlInsertBlob, sum, contentType, len(data), data); err != nil {
		return "", fmt.Errorf("put blob %s: %w", sum, err)
	}
	return sum, nil
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
	var data []byte
	err := s.pool.QueryRow(ctx, sqlBlob, sum).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, agent.Errorf(agent.CodeNotFound, "blob %s%s not found", casRefPrefix, sum)
	}
	if err != nil {
		return nil, fmt.Errorf("load blob %s: %w", sum, err)
	}
	return data, nil
}

// parseCASRef returns the hex digest of a "cas://sha256:<hex>" ref.
func parseCASRef(ref string) (string, error) {
	sum, ok := strings.CutPrefix(ref, casRefPrefix)
	if !ok || !isLowerHex(sum, sha256.Size*2) {
		return "", agent.Errorf(agent.CodeInvalid, "ref %q: want %s<64 lowercase hex digits>", truncate(ref, 100), casRefPrefix)
	}
	return sum, nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// truncate keeps error messages short when a caller sends garbage.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

const (
	sqlOwnBlob    = `INSERT INTO blob_owners (tenant_id, sha256) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	sqlTenantBlob = `SELECT b.data, b.content_type FROM cas_blobs b JOIN blob_owners o USING (sha256) WHERE o.tenant_id = $1 AND b.sha256 = $2`
)

// PutTenantBlob stores data for a tenant and returns its ref: only that
// tenant (and others that store the same bytes) may read it. Idempotent.
func (s *Store) PutTenantBlob(ctx context.Context, tenantID string, data []byte, contentType string) (string, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return "", err
	}
	sum, err := s.putBlob(ctx, data, contentType)
	if err != nil {
		return "", err
	}
	if _, err := s.pool.Exec(ctx, sqlOwnBlob, tenantID, sum); err != nil {
		return "", fmt.Errorf("put blob %s for tenant %q: %w", sum, tenantID, err)
	}
	return casRefPrefix + sum, nil
}

// TenantBlob returns the bytes and content type behind a cas:// ref the
// tenant stored; a ref of another tenant is agent.CodeNotFound, as one of
// nothing.
func (s *Store) TenantBlob(ctx context.Context, tenantID, ref string) ([]byte, string, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, "", err
	}
	sum, err := parseCASRef(ref)
	if err != nil {
		return nil, "", err
	}
	var data []byte
	var contentType string
	err = s.pool.QueryRow(ctx, sqlTenantBlob, tenantID, sum).Scan(&data, &contentType)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", agent.Errorf(agent.CodeNotFound, "data %s not found", ref)
	}
	if err != nil {
		return nil, "", fmt.Errorf("load blob %s: %w", sum, err)
	}
	return data, contentType, nil
}

const sqlTenantBlobInfo = `SELECT b.content_type, b.size FROM cas_blobs b JOIN blob_owners o USING (sha256) WHERE o.tenant_id = $1 AND b.sha256 = $2`

// BlobInfo describes a stored blob without its bytes.
type BlobInfo struct {
	// Ref is "cas://sha256:<hex>".
	Ref string
	// ContentType is the type the bytes were first stored with.
	ContentType string
	// Size is the length of the bytes.
	Size int64
}

// TenantBlobInfo describes the blob behind a cas:// ref the tenant stored,
// without reading its bytes: agent.CodeInvalid for a malformed ref,
// agent.CodeNotFound for nothing stored or another tenant's, as TenantBlob.
func (s *Store) TenantBlobInfo(ctx context.Context, tenantID, ref string) (BlobInfo, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return BlobInfo{}, err
	}
	sum, err := parseCASRef(ref)
	if err != nil {
		return BlobInfo{}, err
	}
	info := BlobInfo{Ref: casRefPrefix + sum}
	err = s.pool.QueryRow(ctx, sqlTenantBlobInfo, tenantID, sum).Scan(&info.ContentType, &info.Size)
	if errors.Is(err, pgx.ErrNoRows) {
		return BlobInfo{}, agent.Errorf(agent.CodeNotFound, "data %s not found", ref)
	}
	if err != nil {
		return BlobInfo{}, fmt.Errorf("describe blob %s: %w", sum, err)
	}
	return info, nil
}
