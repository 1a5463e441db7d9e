package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const (
	sqlVault    = `SELECT placeholder, sealed FROM pii_vault WHERE tenant_id = $1 AND scope = $2`
	sqlPutVault = `INSERT INTO pii_vault (tenant_id, scope, placeholder, sealed) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, scope, placeholder) DO NOTHING`
)

// Vault returns the sealed values of a PII scope (a session's, or a
// turn's), by placeholder.
func (s *Store) Vault(ctx context.Context, tenantID, scope string) (map[string][]byte, error) {
	rows, err := s.pool.Query(ctx, sqlVault, tenantID, scope)
	if err != nil {
		return nil, fmt.Errorf("read pii vault: %w", err)
	}
	out := map[string][]byte{}
	var p string
	var sealed []byte
	_, err = pgx.ForEachRow(rows, []any{&p, &sealed}, func() error {
		out[p] = append([]byte(nil), sealed...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pii vault: %w", err)
	}
	return out, nil
}

// PutVault adds sealed values to a PII scope, in one transaction. A
// placeholder already stored keeps its value: the caller reads the vault
// back to see whether it won.
func (s *Store) PutVault(ctx context.Context, tenantID, scope string, sealed map[string][]byte) error {
	if len(sealed) == 0 {
		return nil
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for p, v := range sealed {
			if _, err := tx.Exec(ctx, sqlPutVault, tenantID, scope, p, v); err != nil {
				return fmt.Errorf("store pii vault: %w", err)
			}
		}
		return nil
	})
}
