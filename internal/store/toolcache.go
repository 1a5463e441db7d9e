package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	sqlCachedTool = `SELECT result FROM tool_cache WHERE tenant_id = $1 AND key = $2 AND expires_at > $3`
	sqlCacheTool  = `
INSERT INTO tool_cache (tenant_id, key, result, expires_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, key) DO UPDATE SET result = EXCLUDED.result, expires_at = EXCLUDED.expires_at`
	// Each write takes away a few expired entries, so that the table
	// stays bounded without a sweeper of its own.
	sqlTrimToolCache = `
DELETE FROM tool_cache WHERE ctid IN (SELECT ctid FROM tool_cache WHERE expires_at <= $1 LIMIT 20)`
)

// CachedTool returns the tenant's cached result under key, when it has not
// expired at now.
func (s *Store) CachedTool(ctx context.Context, tenantID, key string, now time.Time) (json.RawMessage, bool, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, false, err
	}
	var result []byte
	err := s.pool.QueryRow(ctx, sqlCachedTool, tenantID, key, now).Scan(&result)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("read tool cache: %w", err)
	}
	return result, true, nil
}

// CacheTool keeps a result under key for the tenant until expires; the
// latest write wins.
func (s *Store) CacheTool(ctx context.Context, tenantID, key string, result json.RawMessage, expires time.Time) error {
	if err := requireID("tenant_id", tenantID); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, sqlCacheTool, tenantID, key, []byte(result), expires); err != nil {
		return fmt.Errorf("write tool cache: %w", err)
	}
	if _, err := s.pool.Exec(ctx, sqlTrimToolCache, time.Now()); err != nil {
		return fmt.Errorf("trim tool cache: %w", err)
	}
	return nil
}
